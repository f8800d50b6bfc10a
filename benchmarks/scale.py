"""Scale: the hot queries and the API at 100k and at 1.1M MR items, then a prune.

One embedded PostgreSQL (default durability). The population grows in two
steps, generated with set-based SQL (`scale_data.py`): 90,909 finished +
9,091 active items (100k), then up to 1,000,000 finished + 100,000 active
(1.1M). At each size:

* database, in this process, through the engine's own functions (each in a
  transaction that is rolled back): the claim (`claim_due_items`, with 500
  due items), the due-time query (`seconds_until_due`), the deferral wake-up
  (`wake_due_deferrals`), the MR and generic list pages and an item load;
  each also once under `EXPLAIN (ANALYZE, BUFFERS)`, whose scan lines are
  printed and checked for a sequential scan of a large table;
* HTTP, against a `serve` process (the path a caller uses), 8 client
  threads: list pages with each filter and with a deep cursor, item GETs,
  `/metrics` scrapes; the process's startup time and RSS;
* table and index sizes.

Then growth 100k → 1.1M per figure (target: claim and list p99 within 2x,
list p99 ≤ 50 ms), and `workqueue-service prune --older-than 90d` run as a
process at 1.1M (rows/s).

Usage: python benchmarks/scale.py [--factor 1.0] [--json FILE]
  (--factor 0.1 builds 10k / 110k for a quick look)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session

from scale_data import CALLERS, PACKAGES, PROJECTS, branch_of, generate, project_of
from service_process import percentile, start_service, write_config
from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import libpq_conninfo
from workqueue.queue import read_repository
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.processing import lease_repository, sweeps
from workqueue.queue.retention import repository as retention_repository
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.mr.repository import list_mr_rows

CLIENT_THREADS = 8
DUE_ITEMS = 500
LARGE_TABLES = ("work_items", "mr_details", "work_item_statuses", "audit_entries")
SIZE_TABLES = (
    "work_items",
    "mr_details",
    "work_item_statuses",
    "audit_entries",
    "outbox_deliveries",
    "attention_memberships",
)


class StatementCapture:
    """The statements an engine sends while active, with their parameters."""

    def __init__(self, engine: Engine) -> None:
        self.statements: list[tuple[str, Any]] = []
        self.active = False
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if self.active:
            self.statements.append((statement, parameters))


def explain(engine: Engine, capture: StatementCapture, work: Callable[[Session], object]) -> str:
    """`work`'s statements under EXPLAIN (ANALYZE, BUFFERS), in a rolled-back transaction."""
    sessions = build_sessions(engine)
    with sessions() as session:
        capture.statements.clear()
        capture.active = True
        try:
            work(session)
        finally:
            capture.active = False
        session.rollback()
        plans = []
        for statement, parameters in list(capture.statements):
            rows = session.connection().exec_driver_sql(
                "EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters
            )
            plans.append("\n".join(row[0] for row in rows))
        session.rollback()
    return "\n---\n".join(plans)


def plan_summary(plan: str) -> dict[str, Any]:
    lines = [line.strip().lstrip("-> ").strip() for line in plan.splitlines()]
    scans = [line for line in lines if re.search(r"Scan|Sort|Limit", line)]
    seq = [line for line in scans if re.match(r"(Parallel )?Seq Scan on (\w+)", line)]
    large_seq = [
        line for line in seq if any(f" on {table} " in line + " " for table in LARGE_TABLES)
    ]
    times = [line for line in lines if line.startswith("Execution Time")]
    return {"scans": scans, "execution": times, "uses_index": not large_seq}


def timed(engine: Engine, work: Callable[[Session], object], repeat: int) -> dict[str, float]:
    sessions = build_sessions(engine)
    times = []
    for _ in range(repeat):
        with sessions() as session:
            started = time.perf_counter()
            work(session)
            times.append((time.perf_counter() - started) * 1000)
            session.rollback()
    return {"p50_ms": round(percentile(times, 0.5), 2), "p99_ms": round(percentile(times, 0.99), 2)}


def deep_cursor(
    engine: Engine, depth: int, model: type[WorkItem], *, phase: str | None = None
) -> str:
    """The cursor of a page `depth` items deep (among items in `phase`, if given)."""
    with build_sessions(engine)() as session:
        item_id = session.execute(
            sa.text(
                "SELECT id FROM work_items WHERE phase = coalesce(:phase, phase)"
                " ORDER BY created_at DESC, id DESC OFFSET :depth LIMIT 1"
            ),
            {"depth": depth, "phase": phase},
        ).scalar_one()
        item = session.get(model, item_id)
        if item is None:
            raise RuntimeError("the deep cursor's item vanished")
        return read_repository.encode_cursor(item)


def active_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(
                sa.text("SELECT count(*) FROM work_items WHERE phase = 'active'")
            ).scalar_one()
        )


def mr_list_query(arguments: dict[str, Any]) -> Callable[[Session], object]:
    return lambda session: list_mr_rows(session, limit=50, **arguments)


def database_figures(engine: Engine, total: int) -> dict[str, Any]:
    """Hot queries in this process, each timed and explained."""
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "UPDATE work_items SET actionable = true, updated_at = now() - interval '1 minute'"
                " WHERE id IN (SELECT id FROM work_items WHERE phase = 'active'"
                " ORDER BY created_at LIMIT :n)"
            ),
            {"n": DUE_ITEMS},
        )
    capture = StatementCapture(engine)
    with engine.connect() as connection:
        sample_id = connection.execute(
            sa.text("SELECT id FROM work_items OFFSET :n LIMIT 1"), {"n": total // 4}
        ).scalar_one()
    deep = deep_cursor(engine, total // 2, MRWorkItem)
    last_active = deep_cursor(engine, active_count(engine) - 10, MRWorkItem, phase="active")
    sample_branch = branch_of(total // 3)
    mr_list: dict[str, dict[str, Any]] = {
        "newest": {},
        "phase_active": {"phase": Phase.ACTIVE},
        "project": {"project": project_of(7)},
        "source_branch": {"source_branch": sample_branch},
        "caller_identity": {"caller_identity": "caller-3"},
        "package": {"package": "pkg-11"},
        "deep_cursor": {"cursor": deep},
        "phase_active_last_page": {"phase": Phase.ACTIVE, "cursor": last_active},
    }
    queries: dict[str, Callable[[Session], object]] = {
        "claim": lambda s: lease_repository.claim_due_items(
            s, item_types=["mr"], limit=10, lease_seconds=30
        ),
        "due_time": lambda s: sweeps.seconds_until_due(s, ["mr"]),
        "wake_due_deferrals": lambda s: sweeps.wake_due_deferrals(s, ["mr"]),
        "generic_list_type_phase": lambda s: read_repository.list_rows(
            s,
            item_types=["mr"],
            filters=[WorkItem.phase == Phase.COMPLETED],
            limit=50,
            cursor=None,
        ),
        "generic_list_active": lambda s: read_repository.list_rows(
            s, item_types=None, filters=[WorkItem.phase == Phase.ACTIVE], limit=50, cursor=None
        ),
        "item_get": lambda s: (
            read_repository.get_item(s, sample_id),
            read_repository.dimensions_of(s, [sample_id]),
        ),
    }
    for name, filters in mr_list.items():
        arguments = {
            "project": None,
            "package": None,
            "source_branch": None,
            "phase": None,
            "caller_identity": None,
            "cursor": None,
            **filters,
        }
        queries[f"mr_list_{name}"] = mr_list_query(arguments)
    figures: dict[str, Any] = {}
    for name, work in queries.items():
        figures[name] = timed(engine, work, repeat=30)
        figures[name]["plan"] = plan_summary(explain(engine, capture, work))
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE work_items SET actionable = false WHERE actionable"))
    return figures


def http_figures(
    url: URL, engine: Engine, workdir: Path, simulator: GitLabSimulator, total: int
) -> dict[str, Any]:
    config = write_config(workdir, simulator.url)
    service = start_service(url, config, workdir / f"service-{total}.log")
    try:
        catch_up_seconds = attention_catch_up(engine)
        chooser = random.Random(total)
        with engine.connect() as connection:
            ids = [
                str(row[0])
                for row in connection.execute(
                    sa.text("SELECT id FROM work_items ORDER BY random() LIMIT 2000")
                )
            ]
        mr_deep = deep_cursor(engine, total // 2, MRWorkItem)
        last_active = deep_cursor(engine, active_count(engine) - 10, WorkItem, phase="active")
        generic_deep = deep_cursor(engine, total // 2, WorkItem)
        kinds: dict[str, Callable[[], tuple[str, dict[str, str]]]] = {
            "mr_newest": lambda: ("/api/work-items/mr", {}),
            "mr_phase_active": lambda: ("/api/work-items/mr", {"phase": "active"}),
            "mr_project": lambda: (
                "/api/work-items/mr",
                {"project": project_of(chooser.randrange(PROJECTS))},
            ),
            "mr_source_branch": lambda: (
                "/api/work-items/mr",
                {"source_branch": branch_of(chooser.randrange(total))},
            ),
            "mr_caller_identity": lambda: (
                "/api/work-items/mr",
                {"caller_identity": f"caller-{chooser.randrange(CALLERS)}"},
            ),
            "mr_package": lambda: (
                "/api/work-items/mr",
                {"package": f"pkg-{chooser.randrange(PACKAGES)}"},
            ),
            "mr_deep_cursor": lambda: ("/api/work-items/mr", {"cursor": mr_deep}),
            "generic_newest": lambda: ("/api/work-items", {}),
            "generic_type_phase": lambda: (
                "/api/work-items",
                {"item_type": "mr", "phase": "completed"},
            ),
            "generic_phase_active": lambda: ("/api/work-items", {"phase": "active"}),
            "generic_deep_cursor": lambda: ("/api/work-items", {"cursor": generic_deep}),
            "mr_phase_active_last_page": lambda: (
                "/api/work-items/mr",
                {"phase": "active", "cursor": last_active},
            ),
            "item_get": lambda: (f"/api/work-items/{chooser.choice(ids)}", {}),
        }
        figures: dict[str, Any] = {
            "startup_seconds": round(service.startup_seconds, 2),
            "attention_catch_up_seconds": catch_up_seconds,
        }
        for name, request in kinds.items():
            figures[name] = load(service.base_url, request, threads=CLIENT_THREADS, per_thread=25)
            # One client alone: the request's own latency, without queueing for the CPU.
            alone = load(service.base_url, request, threads=1, per_thread=50)
            figures[name].update({f"alone_{key}": value for key, value in alone.items()})
        scrapes = []
        with httpx.Client(base_url=service.base_url, timeout=60) as client:
            for _ in range(5):
                started = time.perf_counter()
                client.get("/metrics").raise_for_status()
                scrapes.append((time.perf_counter() - started) * 1000)
                time.sleep(2.1)  # past the 2 s gauge cache: every scrape queries
        figures["metrics_scrape"] = {
            "p50_ms": round(percentile(scrapes, 0.5), 1),
            "max_ms": round(max(scrapes), 1),
        }
        figures["rss_mib"] = round(service.rss_mib(), 1)
    finally:
        service.stop()
    return figures


def attention_catch_up(engine: Engine, *, quiet_seconds: float = 5.0) -> float:
    """Seconds until the attention reconciler's first pass settles after a start.

    The generated items include failed ones that the default `needs-human`
    rule wants as members; a service meeting them for the first time adds
    them all, which competes with requests for the CPU. The API is measured
    once memberships have stopped changing for `quiet_seconds`.
    """
    started = time.perf_counter()
    last, last_change = -1, started
    while time.perf_counter() - last_change < quiet_seconds:
        with engine.connect() as connection:
            count = connection.execute(
                sa.text("SELECT count(*) FROM attention_memberships")
            ).scalar_one()
        if count != last:
            last, last_change = count, time.perf_counter()
        time.sleep(0.5)
    return round(last_change - started, 1)


def load(
    base_url: str,
    request: Callable[[], tuple[str, dict[str, str]]],
    *,
    threads: int,
    per_thread: int,
) -> dict[str, float]:
    times: list[float] = []
    failures: list[int] = []
    lock = threading.Lock()

    def client_thread() -> None:
        try:
            requests()
        except Exception:
            with lock:
                failures.append(-1)  # printed by the thread machinery as well
            raise

    def requests() -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            client.get("/healthz")  # connect before timing
            for _ in range(per_thread):
                with lock:
                    path, params = request()
                started = time.perf_counter()
                response = client.get(path, params=params)
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    times.append(elapsed)
                    if response.status_code != 200:
                        failures.append(response.status_code)

    clients = [threading.Thread(target=client_thread) for _ in range(threads)]
    started = time.perf_counter()
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"requests failed with {sorted(set(failures))}")
    return {
        "p50_ms": round(percentile(times, 0.5), 1),
        "p99_ms": round(percentile(times, 0.99), 1),
        "per_s": round(len(times) / elapsed, 1),
    }


def sizes(engine: Engine) -> dict[str, Any]:
    with engine.connect() as connection:
        tables = {
            table: {
                "rows": connection.execute(
                    sa.text("SELECT reltuples::bigint FROM pg_class WHERE relname = :t"),
                    {"t": table},
                ).scalar_one(),
                "table_mib": round(
                    connection.execute(
                        sa.text("SELECT pg_table_size(:t)"), {"t": table}
                    ).scalar_one()
                    / 2**20,
                    1,
                ),
                "indexes_mib": round(
                    connection.execute(
                        sa.text("SELECT pg_indexes_size(:t)"), {"t": table}
                    ).scalar_one()
                    / 2**20,
                    1,
                ),
            }
            for table in SIZE_TABLES
        }
        indexes = {
            row.indexname: round(row.size / 2**20, 1)
            for row in connection.execute(
                sa.text(
                    "SELECT indexname, pg_relation_size(indexname::regclass) AS size"
                    " FROM pg_indexes WHERE tablename IN ('work_items', 'mr_details')"
                    " ORDER BY size DESC"
                )
            )
        }
    return {"tables": tables, "work_items_and_mr_details_indexes_mib": indexes}


def prune_batch_plan(engine: Engine) -> dict[str, Any]:
    """One batch of `prune --older-than 90d` under EXPLAIN (ANALYZE, BUFFERS), rolled back."""
    capture = StatementCapture(engine)

    def batch(session: Session) -> object:
        cutoff = retention_repository.cutoff_before(session, timedelta(days=90))
        capture.statements.clear()  # only the batch, not the cutoff
        return retention_repository.delete_finished_batch(session, cutoff=cutoff, batch_size=1000)

    plan = explain(engine, capture, batch)
    summary = plan_summary(plan)
    summary["deletes"] = [line.strip() for line in plan.splitlines() if "Delete on" in line]
    summary["triggers"] = [line.strip() for line in plan.splitlines() if "Trigger" in line]
    return summary


def run_prune(url: URL, workdir: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["DATABASE_URL"] = url.render_as_string(hide_password=False)
    env["WORKQUEUE_SERVICE_CONFIG"] = str(workdir / "config.yml")
    command = [sys.executable, "-m", "workqueue", "prune", "--older-than", "90d"]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"prune failed: {result.stderr.strip()}")
    numbers = [
        int(value)
        for value in re.findall(r"(\d+) (?:items|dimension|pending|audit|outbox)", result.stdout)
    ]
    items = numbers[0]
    # The command's own timing of its batches (the process start is not pruning).
    batch_seconds = float(re.findall(r"batches, ([0-9.]+) s", result.stdout)[0])
    # work_items and mr_details rows, the counted ones, and memberships by cascade.
    rows = 2 * items + sum(numbers[1:])
    return {
        "output": result.stdout.strip(),
        "process_seconds": round(seconds, 1),
        "batch_seconds": batch_seconds,
        "items": items,
        "rows_deleted_counted": rows,
        "items_per_s": round(items / max(batch_seconds, 0.1)),
        "rows_per_s": round(rows / max(batch_seconds, 0.1)),
    }


def growth(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float]:
    ratios = {}
    for section in ("database", "http"):
        for name, figure in large[section].items():
            if isinstance(figure, dict) and "p99_ms" in figure:
                before = small[section][name]["p99_ms"]
                ratios[f"{section}.{name}.p99"] = round(figure["p99_ms"] / max(before, 0.01), 2)
    return ratios


def measure(
    url: URL, engine: Engine, workdir: Path, simulator: GitLabSimulator, total: int
) -> dict[str, Any]:
    print(f"== {total} items", file=sys.stderr, flush=True)
    database = database_figures(engine, total)
    http = http_figures(url, engine, workdir, simulator, total)
    return {
        "items": total,
        "database": database,
        "http": http,
        "sizes": sizes(engine),
        "load_average_1m": round(os.getloadavg()[0], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factor", type=float, default=1.0, help="scale both sizes by this")
    parser.add_argument("--json", type=Path, help="write the whole result here")
    parser.add_argument("--no-prune", action="store_true")
    arguments = parser.parse_args()
    terminal = [round(90_909 * arguments.factor), round(1_000_000 * arguments.factor)]
    active = [round(9_091 * arguments.factor), round(100_000 * arguments.factor)]
    workdir = Path(tempfile.mkdtemp(prefix="workqueue-scale-"))
    cluster = EmbeddedPostgres(workdir / "pg")
    simulator = GitLabSimulator(token="bench-token").start()  # noqa: S106 - simulator token
    results: dict[str, Any] = {}
    try:
        url = cluster.start()
        engine = build_engine(url, pool_size=4)
        upgrade_to_head(engine)
        conninfo = libpq_conninfo(url)
        made_terminal = made_active = 0
        for step, (want_terminal, want_active) in enumerate(zip(terminal, active, strict=True)):
            started = time.perf_counter()
            generate(
                conninfo,
                first=made_terminal + made_active,
                terminal=want_terminal - made_terminal,
                active=want_active - made_active,
            )
            made_terminal, made_active = want_terminal, want_active
            total = made_terminal + made_active
            results[f"generate_{step}_seconds"] = round(time.perf_counter() - started, 1)
            results[f"at_{total}"] = measure(url, engine, workdir, simulator, total)
        small, large = (results[f"at_{t + a}"] for t, a in zip(terminal, active, strict=True))
        results["growth"] = growth(small, large)
        if not arguments.no_prune:
            results["prune_batch_plan"] = prune_batch_plan(engine)
            results["prune"] = run_prune(url, workdir)
            results["after_prune_sizes"] = sizes(engine)
        engine.dispose()
    finally:
        simulator.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    report(results, small, large)
    return 0


def report_prune(results: dict[str, Any]) -> None:
    plan = results["prune_batch_plan"]
    print(f"plan prune batch: uses_index={plan['uses_index']}")
    for line in plan["scans"] + plan["deletes"] + plan["triggers"] + plan["execution"]:
        print(f"    {line}")
    print(f"prune: {json.dumps(results['prune'])}")


def report(results: dict[str, Any], small: dict[str, Any], large: dict[str, Any]) -> None:
    print(
        f"{'figure':<34} {'p50 small':>10} {'p99 small':>10} "
        f"{'p50 large':>10} {'p99 large':>10} {'growth':>7}"
    )
    for section in ("database", "http"):
        for name, figure in large[section].items():
            if not isinstance(figure, dict) or "p99_ms" not in figure:
                continue
            before = small[section][name]
            print(
                f"{section + '.' + name:<34} {before['p50_ms']:>10} {before['p99_ms']:>10} "
                f"{figure['p50_ms']:>10} {figure['p99_ms']:>10} "
                f"{results['growth'][f'{section}.{name}.p99']:>6}x"
            )
    for name, figure in large["database"].items():
        print(f"plan {name}: uses_index={figure['plan']['uses_index']}")
        for line in figure["plan"]["scans"] + figure["plan"]["execution"]:
            print(f"    {line}")
    for key in ("startup_seconds", "attention_catch_up_seconds", "rss_mib", "metrics_scrape"):
        print(f"{key}: {small['http'][key]} -> {large['http'][key]}")
    print(json.dumps({"sizes_small": small["sizes"], "sizes_large": large["sizes"]}))
    if "prune" in results:
        report_prune(results)
    for name, figure in large["http"].items():
        if isinstance(figure, dict) and "alone_p99_ms" in figure:
            before = small["http"][name]
            print(
                f"{'http.' + name + ' (1 client)':<34} {before['alone_p50_ms']:>10} "
                f"{before['alone_p99_ms']:>10} {figure['alone_p50_ms']:>10} "
                f"{figure['alone_p99_ms']:>10}"
            )
    alone_p99 = max(
        figure["alone_p99_ms"]
        for name, figure in large["http"].items()
        if name.startswith(("mr_", "generic_"))
    )
    list_p99 = max(
        figure["p99_ms"]
        for name, figure in large["http"].items()
        if name.startswith(("mr_", "generic_"))
    )
    flat = all(
        ratio <= 2.0
        for name, ratio in results["growth"].items()
        if name.startswith(("database.claim", "http.mr_", "http.generic_"))
    )
    indexed = all(figure["plan"]["uses_index"] for figure in large["database"].values())
    verdict = "PASS" if flat and list_p99 <= 50 and indexed else "FAIL"
    print(
        f"scale: {verdict} items={large['items']} list_p99_ms={list_p99} "
        f"list_p99_one_client_ms={alone_p99} "
        f"claim_p99_ms={large['database']['claim']['p99_ms']} flat_within_2x={flat} "
        f"plans_use_indexes={indexed}"
    )


if __name__ == "__main__":
    sys.exit(main())
