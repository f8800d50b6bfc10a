"""Security review of issue 22: a rebased head is the service's only when it carries exactly
the service's content (real PostgreSQL, the simulator).

Git lets whoever pushes write any author and committer, and the service's commit
message (with its stamp and content hash) is public in the MR. A developer who may
push to the bot branch but not merge into the protected target can therefore push a
commit that looks like the service's own rebase (one commit on the target, stamped,
"made by" the service's user) while carrying other files. The service must not adopt
and merge it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "mr"))

from harness import wait_until
from mr_harness import FILES, PROJECT, body, submit
from test_mr_lifecycle_merge import green_pipeline
from test_mr_lifecycle_support import BRANCH, MR_CONTENT, gitlab, lifecycle

from workqueue.queue.models import Phase

REBASE_ROUTE = "/projects/:id/merge_requests/:merge_request_iid/rebase"
PERSON_README = "# project, edited by a person\n"
EVIL = {"patches/evil.patch": "+evil\n"}


def forge_the_services_commit(simulator, item_commit_sha: str) -> str:
    """A person's force-push of a commit dressed as the service's rebase: the service's
    message, the service's user as author and committer, on the target, plus a file."""
    [ours] = simulator.log_commits(PROJECT, item_commit_sha, exclude="main")
    main = simulator.branch_head(PROJECT, "main")
    files = {**FILES, "README.md": PERSON_README, **MR_CONTENT, **EVIL}
    return simulator.force_push(
        PROJECT, BRANCH, files, onto=main, message=ours.message, user=simulator.bot.username
    )


def test_a_forged_rebase_of_the_services_commit_is_never_merged(sessions):
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        simulator.state.rebase_reads = 1000  # the rebase waits until the test runs it
        item_id, iid = world.open_mr()
        pushed = world.detail(item_id).mr_sha
        simulator.push(PROJECT, "main", {"README.md": PERSON_README})
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        wait_until(
            lambda: len(world.simulator.app.log.records("PUT", REBASE_ROUTE)) == 1,
            what="the rebase request",
        )
        forged = forge_the_services_commit(simulator, pushed)
        simulator.finish_rebase(PROJECT, iid)  # nothing left to rebase: the forged head stays
        assert simulator.branch_head(PROJECT, BRANCH) == forged
        green = green_pipeline(world, iid)
        world.send(item_id, world.mr_hook(iid, "update"), world.pipeline_hook(green))
        world.wait_settled()
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        assert world.detail(item_id).mr_sha != forged
        assert world.merge_calls() == []
        assert simulator.read_file(PROJECT, "main", "patches/evil.patch") is None
        assert world.item(item_id).phase == Phase.ACTIVE
        # A conflict the caller resolves as any other: the same content is pushed anew,
        # over the forged commit, and that is what merges.
        assert world.detail(item_id).merge_blocker["code"] == "conflict"
        result = submit(world.sessions, world.registry, body())
        assert result.outcome == "updated"
        world.manager.notify(item_id)
        world.wait_settled()
        fresh = world.detail(item_id).mr_sha
        assert fresh not in {pushed, forged}
        assert simulator.branch_head(PROJECT, BRANCH) == fresh
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert simulator.read_file(PROJECT, "main", "patches/evil.patch") is None
        assert simulator.read_file(PROJECT, "main", "kernel.spec") == b"Version: 2\n"


def test_a_forged_commit_is_not_taken_for_the_services_own_push_on_a_resubmission(sessions):
    """Identical content resubmitted for a conflicted item runs ensure_mr again, which
    takes a head stamped with this content's hash for its own earlier push."""
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        pushed = world.detail(item_id).mr_sha
        simulator.push(PROJECT, "main", {"README.md": PERSON_README})
        simulator.fail_next_rebase(PROJECT, iid)
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        wait_until(
            lambda: (world.detail(item_id).merge_blocker or {}).get("code") == "conflict",
            what="the conflict",
        )
        world.wait_settled()
        forged = forge_the_services_commit(simulator, pushed)
        result = submit(world.sessions, world.registry, body())  # the same body again
        world.manager.notify(result.item.id)
        world.wait_settled()
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        assert world.detail(item_id).mr_sha != forged
        assert simulator.read_file(PROJECT, "main", "patches/evil.patch") is None
