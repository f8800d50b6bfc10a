"""docs/howto/add-an-item-type.md, followed literally: its code blocks make a working type.

The guide's blocks are complete files. This test writes those of the example
type into a throwaway package, and in a child process (so the example's table
never joins this process's metadata) applies the guide's migration to a real
PostgreSQL database, installs the plugin through a catalog, submits an item
and waits until the engine has posted it to every channel and completed it.
It also holds the guide to what a new type touches outside its own package:
the catalog's one line and a migration.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from workqueue.types.catalog import PLUGIN_MODULES

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "howto" / "add-an-item-type.md"
BLOCK = re.compile(r"```python\n# (?P<path>\S+)\n(?P<code>.*?)```", re.DOTALL)
TYPE_DIR = "src/workqueue/types/notice/"
PACKAGE = "notice_example"  # the throwaway package the guide's `workqueue.types.notice` becomes

CHILD = textwrap.dedent(
    """
    import importlib.util, sys
    from alembic.migration import MigrationContext
    from alembic.operations import Operations
    from sqlalchemy.engine import make_url
    from harness import fast_config, item_row, running_manager, wait_until
    from workqueue.db.engine import build_engine, build_sessions
    from workqueue.queue import Submitter
    from workqueue.types.catalog import build_registry, load_catalog

    url, migration_path = make_url(sys.argv[1]), sys.argv[2]
    engine = build_engine(url, pool_size=8)
    spec = importlib.util.spec_from_file_location("migration", migration_path)
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    with engine.begin() as connection, Operations.context(MigrationContext.configure(connection)):
        migration.upgrade()

    catalog = load_catalog(["notice_example.plugin"])
    (plugin,) = list(catalog)
    registry = build_registry({"notice": {"max_channels": 3}}, available=catalog.installers())
    routes = {(method, route.path) for route in plugin.router.routes for method in route.methods}
    assert ("POST", "/api/work-items/notice") in routes, routes

    from notice_example.repository import create_notice
    sessions = build_sessions(engine)
    with sessions() as session:
        item = create_notice(session, message="deploy at noon", channels=["ops", "dev"],
                             project="acme/widgets", submitter=Submitter("tests", "alice"))
        session.commit()
        item_id = item.id
    with running_manager(sessions, registry, fast_config(), handled_types=["notice"]):
        wait_until(lambda: item_row(sessions, item_id).phase == "completed", what="completed")
    with sessions() as session:
        posted = session.execute(
            __import__("sqlalchemy").text(
                "SELECT variant, status FROM work_item_statuses WHERE work_item_id = :id "
                "ORDER BY variant"), {"id": item_id}).all()
    print(sorted((variant, status) for variant, status in posted))
    engine.dispose()
    """
)


def guide_blocks() -> dict[str, str]:
    return {match["path"]: match["code"] for match in BLOCK.finditer(GUIDE.read_text())}


def write_type(blocks: dict[str, str], root: Path) -> None:
    for path, code in blocks.items():
        if not path.startswith(TYPE_DIR):
            continue
        target = root / PACKAGE / path.removeprefix(TYPE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code.replace("workqueue.types.notice", PACKAGE), encoding="utf-8")
    for directory in [root / PACKAGE, *(root / PACKAGE).rglob("*/")]:
        if directory.is_dir() and not (directory / "__init__.py").exists():
            (directory / "__init__.py").write_text("", encoding="utf-8")


def test_outside_its_package_a_new_type_touches_the_catalog_and_a_migration():
    outside = sorted(path for path in guide_blocks() if not path.startswith(TYPE_DIR))
    assert len(outside) == 2
    catalog_path, migration_path = sorted(outside, key=lambda p: "migrations" in p)
    assert catalog_path == "src/workqueue/types/catalog.py"
    assert re.fullmatch(r"src/workqueue/db/migrations/versions/\d{4}_\w+\.py", migration_path)


def test_the_guides_catalog_is_todays_with_one_line_more():
    code = guide_blocks()["src/workqueue/types/catalog.py"]
    names = re.findall(r'"([\w.]+)"', code)
    assert names == [*PLUGIN_MODULES, "workqueue.types.notice.plugin"]


def guide_migration() -> str:
    """The guide's migration, whichever number it is at."""
    [code] = [
        code
        for path, code in guide_blocks().items()
        if re.fullmatch(r"src/workqueue/db/migrations/versions/\d{4}_notice_details\.py", path)
    ]
    return code


def test_the_guides_migration_follows_the_newest_revision():
    migration = guide_migration()
    versions = sorted((ROOT / "src/workqueue/db/migrations/versions").glob("[0-9]*.py"))
    newest = versions[-1].name[:4]
    assert f'down_revision = "{newest}"' in migration
    assert f'revision = "{int(newest) + 1:04d}"' in migration


def test_the_guides_type_installs_and_the_engine_completes_its_item(tmp_path, database_url):
    write_type(guide_blocks(), tmp_path)
    migration = tmp_path / "migration.py"
    migration.write_text(guide_migration())
    support = ROOT / "tests" / "support"
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            database_url.render_as_string(hide_password=False),
            str(migration),
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(support)])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip().splitlines()[-1] == "[('dev', 'false'), ('ops', 'false')]"
