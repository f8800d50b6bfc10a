"""MR resolvers: which active items each GitLab hook kind reaches (payloads captured from GitLab).

The fixtures (tests/gitlab/simulator/fixtures/hook_*.json) share project 42 `acme/widgets`,
MR !7 from `workqueue/bump-requests` into `main`, pipeline 5511 and head sha `c3e5…9a1`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from webhook_support import make_item, mr_registry

from workqueue.queue.errors import DuplicateRegistrationError
from workqueue.queue.registry import TypeRegistry
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.mr.resolvers import MR_RESOLVERS, register_mr_resolvers

FIXTURES = Path(__file__).resolve().parents[1] / "gitlab" / "simulator" / "fixtures"
SHA = "c3e5a7b9d1f3e5a7c9b1d3f5e7a9c1b3d5f7e9a1"
OLD_SHA = "8a2d4c6e0f1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f"
BRANCH = "workqueue/bump-requests"

# The item as GitLab knows it; cases override single columns.
BOT_MR = {
    "project": "acme/widgets",
    "source_branch": BRANCH,
    "target_branch": "main",
    "mr_iid": 7,
    "mr_sha": SHA,
    "head_pipeline_id": 5511,
}


def hook(name):
    return json.loads((FIXTURES / f"hook_{name}.json").read_text())


def setting(path, value):
    """A change setting `payload[path[0]][path[1]]... = value` (None deletes the key)."""

    def change(payload):
        target = payload
        for key in path[:-1]:
            target = target[key]
        if value is None:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value

    return change


def unrelated(**columns):
    """An item sharing nothing with the fixtures except what `columns` set."""
    return {
        "project": "acme/widgets",
        "source_branch": "workqueue/other",
        "target_branch": "release",
        "mr_iid": 99,
        "mr_sha": "f" * 40,
        "head_pipeline_id": 1,
        **columns,
    }


CASES = [
    # merge_request: by project + iid, or source branch before the item knows its MR
    ("mr: path project + iid", "merge_request", None, BOT_MR, True),
    ("mr: numeric project + iid", "merge_request", None, {**BOT_MR, "project": "42"}, True),
    ("mr: other iid", "merge_request", None, {**BOT_MR, "mr_iid": 8}, False),
    ("mr: other project path", "merge_request", None, {**BOT_MR, "project": "acme/x"}, False),
    ("mr: other project id", "merge_request", None, {**BOT_MR, "project": "43"}, False),
    (
        "mr: no MR yet, same branch",
        "merge_request",
        None,
        {**BOT_MR, "mr_iid": None, "head_pipeline_id": None},
        True,
    ),
    (
        "mr: no MR yet, other branch",
        "merge_request",
        None,
        unrelated(mr_iid=None),
        False,
    ),
    (
        "mr: same branch but the item tracks another MR",
        "merge_request",
        None,
        {**BOT_MR, "mr_iid": 3},
        False,
    ),
    (
        "mr: payload without project path still matches the id",
        "merge_request",
        setting(("project", "path_with_namespace"), None),
        {**BOT_MR, "project": "42"},
        True,
    ),
    # pipeline: by pipeline id, MR iid or sha
    ("pipeline: head pipeline id", "pipeline", None, unrelated(head_pipeline_id=5511), True),
    ("pipeline: MR iid", "pipeline", None, unrelated(mr_iid=7), True),
    ("pipeline: sha", "pipeline", None, unrelated(mr_sha=SHA), True),
    ("pipeline: numeric project", "pipeline", None, unrelated(project="42", mr_iid=7), True),
    ("pipeline: nothing shared", "pipeline", None, unrelated(), False),
    (
        "pipeline: MR pipeline, item has no MR yet",
        "pipeline",
        None,
        unrelated(mr_iid=None, source_branch=BRANCH),
        True,
    ),
    (
        "pipeline: branch pipeline (merge_request null) by sha",
        "pipeline",
        setting(("merge_request",), None),
        unrelated(mr_sha=SHA),
        True,
    ),
    (
        "pipeline: branch pipeline does not match by MR iid",
        "pipeline",
        setting(("merge_request",), None),
        unrelated(mr_iid=7),
        False,
    ),
    ("pipeline: other project", "pipeline", None, {**BOT_MR, "project": "acme/x"}, False),
    # build (Job Hook): by pipeline id or sha, never by MR iid
    ("job: head pipeline id", "job", None, unrelated(head_pipeline_id=5511), True),
    ("job: sha", "job", None, unrelated(mr_sha=SHA), True),
    ("job: numeric project", "job", None, unrelated(project="42", mr_sha=SHA), True),
    ("job: MR iid alone is not enough", "job", None, unrelated(mr_iid=7), False),
    ("job: older pipeline", "job", None, unrelated(head_pipeline_id=5512), False),
    (
        "job: top-level project_id when `project` is missing",
        "job",
        setting(("project",), None),
        unrelated(project="42", head_pipeline_id=5511),
        True,
    ),
    # note: by MR iid, MR notes only
    ("note: MR iid", "note", None, unrelated(mr_iid=7), True),
    ("note: numeric project", "note", None, unrelated(project="42", mr_iid=7), True),
    ("note: other MR", "note", None, unrelated(mr_iid=8), False),
    (
        "note: on a commit",
        "note",
        setting(("object_attributes", "noteable_type"), "Commit"),
        BOT_MR,
        False,
    ),
    # push: to an item's bot branch, or to the branch items target
    ("push: to the bot branch", "push", None, unrelated(source_branch=BRANCH), True),
    (
        "push: to the target branch",
        "push",
        setting(("ref",), "refs/heads/main"),
        unrelated(target_branch="main"),
        True,
    ),
    (
        "push: numeric project",
        "push",
        setting(("ref",), "refs/heads/main"),
        unrelated(project="42", target_branch="main"),
        True,
    ),
    (
        "push: to another branch",
        "push",
        setting(("ref",), "refs/heads/feature"),
        BOT_MR,
        False,
    ),
    ("push: a tag", "push", setting(("ref",), "refs/tags/main"), BOT_MR, False),
    (
        "push: target not known yet",
        "push",
        setting(("ref",), "refs/heads/main"),
        unrelated(target_branch=None),
        False,
    ),
]

EVENT_TYPES = {"merge_request": "merge_request", "pipeline": "pipeline", "job": "build"}


@pytest.fixture
def registry() -> TypeRegistry:
    return mr_registry()


def resolve(sessions, kind, payload):
    resolver = MR_RESOLVERS[EVENT_TYPES.get(kind, kind)]
    with sessions() as session:
        return resolver(session, payload)


@pytest.mark.parametrize(
    ("kind", "change", "item", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_resolver_matches(sessions, registry, kind, change, item, expected):
    item_id = make_item(sessions, registry, **item)
    payload = hook(kind)
    if change is not None:
        change(payload)

    assert resolve(sessions, kind, payload) == ([item_id] if expected else [])


@pytest.mark.parametrize("kind", ["merge_request", "pipeline", "job", "note", "push"])
@pytest.mark.parametrize("phase", ["completed", "cancelled", "failed"])
def test_items_that_are_not_active_are_never_resolved(sessions, registry, kind, phase):
    make_item(sessions, registry, **BOT_MR, phase=phase)

    assert resolve(sessions, kind, hook(kind)) == []


def test_a_push_to_a_target_branch_resolves_every_item_targeting_it(sessions, registry):
    targeting = {
        make_item(
            sessions, registry, **unrelated(source_branch=f"workqueue/{n}", target_branch="main")
        )
        for n in range(4)
    }
    make_item(sessions, registry, **unrelated(source_branch="workqueue/r", target_branch="release"))
    make_item(
        sessions,
        registry,
        **unrelated(project="acme/x", source_branch="workqueue/o", target_branch="main"),
    )
    payload = hook("push")
    payload["ref"] = "refs/heads/main"

    assert set(resolve(sessions, "push", payload)) == targeting


def test_items_of_both_project_forms_are_resolved_together(sessions, registry):
    by_path = make_item(sessions, registry, **unrelated(source_branch="workqueue/a", mr_sha=SHA))
    by_id = make_item(
        sessions, registry, **unrelated(project="42", source_branch="workqueue/b", mr_sha=SHA)
    )

    assert set(resolve(sessions, "pipeline", hook("pipeline"))) == {by_path, by_id}


@pytest.mark.parametrize("kind", ["merge_request", "pipeline", "job", "note", "push"])
def test_the_canonical_project_path_decides_whatever_the_caller_wrote(sessions, registry, kind):
    """Submission resolves the project to GitLab's canonical path (`project_path`): an item
    written `ACME/Widgets` is found by the hook's `acme/widgets`; the comparison is exact,
    so a path GitLab did not confirm in that spelling matches nothing."""
    canonical = make_item(sessions, registry, **{**BOT_MR, "project": "ACME/Widgets"})
    unconfirmed = make_item(
        sessions,
        registry,
        **{**BOT_MR, "project": "Acme/Widgets", "source_branch": "workqueue/other"},
    )
    with sessions() as session:
        session.execute(
            sa.text("UPDATE work_items SET project_path = :path WHERE id = :id"),
            {"path": "acme/widgets", "id": canonical},
        )
        session.commit()

    found = resolve(sessions, kind, hook(kind))
    assert canonical in found
    assert unconfirmed not in found


MALFORMED = [
    {},
    {"project": "acme/widgets"},
    {"project": {"id": "42"}, "object_attributes": []},
    {"project": {"id": True}, "object_attributes": {"iid": True}},
    {"project": {"id": 42}, "object_attributes": {"iid": "7", "id": 5511.0, "sha": 3}},
    {"project": {"id": 42}, "object_attributes": {"iid": 2**40, "id": 2**70}},
    {"project": {"id": 42}, "object_attributes": {"iid": -(2**40), "id": -(2**70)}},
    {"project": {"id": 42}, "object_attributes": {"iid": 2**31, "id": 2**63}},
    {"project": {"id": -42, "path_with_namespace": ""}, "object_attributes": {"iid": 7}},
    {"project": {"id": 42}, "ref": 7, "merge_request": "x", "pipeline_id": [5511]},
    {"project": {"id": 42}, "ref": "refs/heads/", "object_attributes": {"noteable_type": 1}},
]


@pytest.mark.parametrize("payload", MALFORMED)
@pytest.mark.parametrize("event_type", sorted(MR_RESOLVERS))
def test_malformed_payloads_resolve_to_nothing(sessions, registry, payload, event_type):
    make_item(sessions, registry, **{**BOT_MR, "project": "42"})

    with sessions() as session:
        assert MR_RESOLVERS[event_type](session, copy.deepcopy(payload)) == []


def test_register_mr_resolvers_routes_the_five_gitlab_kinds_and_signals_once():
    registration = TypeRegistry().register("mr", model=MRWorkItem, decider=decide_mr)

    register_mr_resolvers(registration)

    assert set(registration.resolvers) == {
        "merge_request",
        "pipeline",
        "build",
        "note",
        "push",
        "check_signal",
    }
    with pytest.raises(DuplicateRegistrationError):
        register_mr_resolvers(registration)


def test_the_fixture_shas_are_what_the_cases_assume():
    assert hook("merge_request")["object_attributes"]["oldrev"] == OLD_SHA
    assert hook("job")["object_kind"] == "build"
    assert hook("push")["ref"] == f"refs/heads/{BRANCH}"


# -- many hooks at once (`ManyResolver`, the intake's batches) ---------------------


def test_a_batch_of_hooks_resolves_as_each_hook_alone(sessions, registry):
    """Every case's payload (and the malformed ones) in one batch per kind, against items
    of several cases at once: the batch answers, in order, what each hook alone does."""
    items = [
        make_item(sessions, registry, **BOT_MR),
        make_item(
            sessions, registry, **{**BOT_MR, "project": "42", "source_branch": "workqueue/a"}
        ),
        make_item(sessions, registry, **unrelated(source_branch="workqueue/b", mr_iid=None)),
        make_item(
            sessions, registry, **unrelated(source_branch="workqueue/c", target_branch="main")
        ),
        make_item(sessions, registry, **unrelated(source_branch=BRANCH, mr_iid=None)),
    ]
    registration = registry.get("mr")
    for kind in ("merge_request", "pipeline", "job", "note", "push"):
        event_type = EVENT_TYPES.get(kind, kind)
        payloads = []
        for _name, case_kind, change, _item, _expected in CASES:
            if case_kind == kind:
                payload = hook(kind)
                if change is not None:
                    change(payload)
                payloads.append(payload)
        payloads += [copy.deepcopy(payload) for payload in MALFORMED]
        with sessions() as session:
            alone = [MR_RESOLVERS[event_type](session, payload) for payload in payloads]
            together = registration.resolver_of_many(event_type)(session, payloads)
        assert together == alone, kind
        assert any(alone), kind  # the table reaches some of these items
    assert items


def test_a_batch_of_hooks_is_one_statement(sessions, registry, monkeypatch):
    make_item(sessions, registry, **BOT_MR)
    payloads = [hook("pipeline") for _ in range(21)]
    payloads[-1]["project"] = {"id": 43, "path_with_namespace": "acme/x"}
    with sessions() as session:
        # The transaction's own BEGIN is not the resolver's.
        own = session.connection().connection.driver_connection
        statements = []
        real_execute = psycopg.Connection.execute

        def counted(connection, query, *args, **kwargs):
            if connection is own:  # other threads (the database pool's) share the class
                statements.append(query)
            return real_execute(connection, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "execute", counted)
        found = registry.get("mr").resolver_of_many("pipeline")(session, payloads)
        monkeypatch.undo()

    assert len(statements) == 1
    assert found[:-1] == [found[0]] * 20
    assert len(found[0]) == 1
    assert found[-1] == []
