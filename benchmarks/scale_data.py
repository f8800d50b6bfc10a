"""Set-based generation of a realistic MR item population for `scale.py`.

Every statement is one `INSERT ... SELECT` over `generate_series`: first a
temporary table of the new items (id, number, phase, times), then each table
filled from it in one statement. Proportions per item, roughly what a
merged MR leaves behind:

* `work_items` + `mr_details`: terminal items 85 % completed, 10 % cancelled,
  5 % failed, created over the last 180 days and finished within two hours;
  active items created over the last 14 days;
* `work_item_statuses`: `needs_mr`, `needs_reconcile`, `needs_empty_check`
  (deferred 1-25 h ahead on active items; cleared on finished ones, as the
  0009 trigger leaves them) and, on one item in five, a `needs_ci_retry`
  variant;
* `audit_entries`: five per finished item, three per active one;
* `outbox_deliveries`: one delivered event on one item in twenty;
* `attention_memberships`: one active item in twenty in the `stuck` queue.

Items are spread over 200 projects, 50 callers and 500 packages; each has
its own source branch (`workqueue/b<n>`).
"""

from __future__ import annotations

import psycopg

PROJECTS = 200
CALLERS = 50
PACKAGES = 500


def project_of(n: int) -> str:
    return f"group-{n % PROJECTS}/app"


def branch_of(n: int) -> str:
    return f"workqueue/b{n}"


_NEW_ITEMS = """
CREATE TEMP TABLE new_items ON COMMIT DROP AS
SELECT gen_random_uuid() AS id, n,
       CASE WHEN n - {first} >= {terminal} THEN 'active'
            WHEN n % 20 = 0 THEN 'failed'
            WHEN n % 10 = 1 THEN 'cancelled'
            ELSE 'completed' END AS phase,
       CASE WHEN n - {first} >= {terminal}
            THEN now() - random() * interval '14 days'
            ELSE now() - interval '14 days' - random() * interval '166 days' END AS created_at
FROM generate_series({first}, {first} + {terminal} + {active} - 1) AS n
"""

_WORK_ITEMS = f"""
INSERT INTO work_items (id, item_type, phase, actionable, attempts, caller_identity,
    caller_issuer, project_path, live_key, idempotency_key, generation, last_event_at,
    created_at, updated_at, error)
SELECT id, 'mr', phase, false, 0, 'caller-' || (n % {CALLERS}), 'https://issuer.example',
       'group-' || (n % {PROJECTS}) || '/app',
       'group-' || (n % {PROJECTS}) || '/app:workqueue/b' || n,
       'group-' || (n % {PROJECTS}) || '/app:workqueue/b' || n || ':1', 1,
       created_at + interval '20 minutes', created_at,
       CASE WHEN phase = 'active' THEN created_at + interval '30 minutes'
            ELSE created_at + random() * interval '2 hours' END,
       CASE WHEN phase = 'failed' THEN 'GitLab refused the commit: A file with this name '
            || 'already exists' END
FROM new_items
"""

_MR_DETAILS = f"""
INSERT INTO mr_details (id, project, source_branch, target_branch, package, change_kind,
    title, description, labels, auto_merge, commit_message, file_actions, content_hash,
    mr_iid, mr_url, mr_sha, head_pipeline_id, head_pipeline_sha, head_pipeline_status,
    detailed_merge_status, completion_reason, ci_retry_counts)
SELECT id, 'group-' || (n % {PROJECTS}) || '/app', 'workqueue/b' || n, 'main',
       'pkg-' || (n % {PACKAGES}), 'bump', 'Bump pkg-' || (n % {PACKAGES}) || ' to ' || n,
       'Automated dependency update.', '["dependencies", "automated"]', true,
       'Bump pkg-' || (n % {PACKAGES}),
       jsonb_build_array(jsonb_build_object('action', 'update', 'file_path', 'requirements.txt',
           'content', 'pkg-' || (n % {PACKAGES}) || '==' || n || E'\\n')),
       md5(n::text), n, 'https://gitlab.example/group/app/-/merge_requests/' || n,
       md5('sha' || n), n, md5('sha' || n), 'success',
       CASE WHEN phase = 'active' THEN 'ci_still_running' ELSE 'mergeable' END,
       CASE WHEN phase = 'completed' THEN 'merged' END, '{{}}'
FROM new_items
"""

_STATUSES = """
INSERT INTO work_item_statuses (work_item_id, dimension, variant, status, pending_until,
    updated_at)
SELECT id, dimension, variant, 'false',
       CASE WHEN dimension = 'needs_empty_check' AND phase = 'active'
            THEN now() + interval '1 hour' + random() * interval '24 hours' END,
       created_at
FROM new_items
CROSS JOIN LATERAL (VALUES ('needs_mr', ''), ('needs_reconcile', ''),
                           ('needs_empty_check', '')) AS dims(dimension, variant)
UNION ALL
SELECT id, 'needs_ci_retry', 'unit-tests', 'false', NULL, created_at
FROM new_items WHERE n % 5 = 0
"""

_AUDIT = """
INSERT INTO audit_entries (entry_id, occurred_at, work_item_id, item_type, event_type, actor,
    reason, before, after, details)
SELECT gen_random_uuid(), created_at + step * interval '10 minutes', id, 'mr', event_type,
       CASE WHEN step = 0 THEN 'caller-' || (n % 50) ELSE 'engine' END, NULL,
       CASE WHEN event_type = 'phase_change' THEN '{"phase": "active"}'::jsonb END,
       CASE WHEN event_type = 'phase_change' THEN jsonb_build_object('phase', phase) END,
       jsonb_build_object('project', 'group-' || (n % 200) || '/app', 'mr_iid', n)
FROM new_items
CROSS JOIN LATERAL (VALUES (0, 'item_submitted'), (1, 'mr_ensured'), (2, 'merge_not_now'),
                           (3, 'mr_merged'), (4, 'phase_change')) AS steps(step, event_type)
WHERE phase <> 'active' OR step < 3
"""

_OUTBOX = """
INSERT INTO outbox_deliveries (event_id, subscriber, event_type, work_item_id, data, status,
    attempts, next_attempt_at, created_at, delivered_at)
SELECT gen_random_uuid(), 'chat', 'item.' || phase, id,
       jsonb_build_object('id', id, 'phase', phase), 'delivered', 1, created_at, created_at,
       created_at + interval '1 second'
FROM new_items WHERE n % 20 = 3
"""

_MEMBERSHIPS = """
INSERT INTO attention_memberships (queue_id, work_item_id, added_at, added_by)
SELECT (SELECT id FROM attention_queues WHERE name = 'stuck'), id, created_at, 'rule'
FROM new_items WHERE phase = 'active' AND n % 20 = 7
"""


def generate(conninfo: str, *, first: int, terminal: int, active: int) -> None:
    """Add `terminal` finished and `active` active MR items numbered from `first`."""
    with psycopg.connect(conninfo) as connection:
        connection.execute(
            "INSERT INTO attention_queues (name, description) VALUES ('stuck', 'scale benchmark')"
            " ON CONFLICT (name) DO NOTHING"
        )
        # Whole numbers formatted in: CREATE TABLE AS takes no bound parameters.
        numbers = {"first": int(first), "terminal": int(terminal), "active": int(active)}
        connection.execute(_NEW_ITEMS.format(**numbers).encode())
        for statement in (_WORK_ITEMS, _MR_DETAILS, _STATUSES, _AUDIT, _OUTBOX, _MEMBERSHIPS):
            connection.execute(statement)
        connection.commit()
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("VACUUM (ANALYZE)")
