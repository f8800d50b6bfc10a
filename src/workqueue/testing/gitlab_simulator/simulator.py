"""`GitLabSimulator`: the HTTP server plus the Python helpers tests drive it with.

Helpers take the lock like HTTP handlers do, so a test can change the world
(push to the target branch, finish a pipeline, approve) while the service under
test talks to the API from other threads. Webhooks are built under the lock and
POSTed after releasing it, so a receiver may call the API back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, NamedTuple, Self

from workqueue.testing.gitlab_simulator.application import Application
from workqueue.testing.gitlab_simulator.entities import (
    mr_entity,
    note_entity,
)
from workqueue.testing.gitlab_simulator.faults import FaultInjector, FaultRule, RequestLog
from workqueue.testing.gitlab_simulator.handlers_notes import approve, unapprove
from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef
from workqueue.testing.gitlab_simulator.helpers_ci import CiHelpers
from workqueue.testing.gitlab_simulator.helpers_discussions import DiscussionHelpers
from workqueue.testing.gitlab_simulator.helpers_hook_delivery import HookDeliveryHelpers
from workqueue.testing.gitlab_simulator.helpers_members import MemberHelpers
from workqueue.testing.gitlab_simulator.helpers_mergeability import MergeabilityHelpers
from workqueue.testing.gitlab_simulator.helpers_merging import MergingHelpers
from workqueue.testing.gitlab_simulator.mergeability import (
    conflicting_paths,
    perform_merge,
)
from workqueue.testing.gitlab_simulator.repository import Commit, FileEntry
from workqueue.testing.gitlab_simulator.server import SimulatorServer
from workqueue.testing.gitlab_simulator.state import (
    DEVELOPER,
    MAINTAINER,
    MergeRequest,
    Project,
    ProjectMember,
    SimulatorState,
    User,
)
from workqueue.testing.gitlab_simulator.versions import DEFAULT_GITLAB_VERSION

MERGE_METHODS = ("merge", "rebase_merge", "ff")


class MergeRequestHead(NamedTuple):
    iid: int
    sha: str
    source_branch: str


def _as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


class GitLabSimulator(
    CiHelpers,
    MergeabilityHelpers,
    MergingHelpers,
    HookDeliveryHelpers,
    DiscussionHelpers,
    MemberHelpers,
):
    """A simulated GitLab (REST v4 subset) for tests, benchmarks and demos.

    `token` authenticates as the bot user (`bot_username`); a second user, `ada`,
    plays the human reviewer in helpers. `checking_reads` makes each MR report
    `checking` for that many API reads after a change, like GitLab's asynchronous
    mergeability check (0: statuses are computed at once). `rebase_reads` is how
    many API reads of an MR show `rebase_in_progress` before a requested rebase
    runs (`rebasing`; 0: at once).

    Every project starts with two members: the bot as Developer (30, what the
    project's `permissions.project_access` reports) and `ada` as Maintainer (40);
    `add_member` changes a level or adds people. Issues (`create_issue`) and
    comments and threads on MRs and issues (`add_comment`, `discussion`, see
    `discussions`) are there for item types that read and answer comments.

    `gitlab_version` (default `versions.DEFAULT_GITLAB_VERSION`, "17.6") picks the
    shapes that differ between real releases, as `versions` lists them: before
    15.6 MR answers and hooks carry no `detailed_merge_status` (judge them from
    `merge_status`, `draft`, `blocking_discussions_resolved`, `has_conflicts`);
    before 16.0 Job Hooks carry no `project` object, only `project_id`. Hooks
    are sent with `User-Agent: GitLab/<version>`.

    Webhooks: `send_webhook` POSTs a body a test built; `add_project_hook` and
    `emit` deliver as GitLab does, through losses (`lose_hooks`) and disabled
    hooks (`disable_project_hooks`, and GitLab's own auto-disabling after four
    failures), see `hook_delivery`.
    """

    def __init__(
        self,
        # A well-known value any test can use, not a secret: the simulator guards nothing real.
        token: str = "simulator-token",  # noqa: S107
        *,
        bot_username: str = "workqueue-bot",
        host: str = "127.0.0.1",
        port: int = 0,
        checking_reads: int = 0,
        gitlab_version: str = DEFAULT_GITLAB_VERSION,
        rebase_reads: int = 1,
    ) -> None:
        self.token = token
        self.state = SimulatorState(checking_reads=checking_reads, gitlab_version=gitlab_version)
        self.state.rebase_reads = rebase_reads
        with self.state.lock:
            self.bot = self.state.add_user(bot_username)
            self.state.tokens[token] = self.bot
            self.human = self.state.add_user("ada", "Ada Reviewer")
        self.app = Application(self.state)
        self._server = SimulatorServer(self.app, host, port)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        self._server.start()
        with self.state.lock:
            self.state.web_url = self._server.url
        return self

    def stop(self) -> None:
        self._server.stop()
        self.close_webhook_client()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL to give python-gitlab (`gitlab.Gitlab(sim.url, ...)`)."""
        return self._server.url

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v4"

    @property
    def faults(self) -> FaultInjector:
        return self.app.faults

    @property
    def log(self) -> RequestLog:
        return self.app.log

    @property
    def errors(self) -> list[str]:
        """Tracebacks of handler crashes (each answered 500); a healthy run has none."""
        return list(self.app.errors)

    # -- users, faults, request log ----------------------------------------------------------

    def add_user(self, username: str, name: str | None = None, *, token: str | None = None) -> User:
        with self._locked() as state:
            user = state.add_user(username, name)
            if token is not None:
                state.tokens[token] = user
            return user

    def add_bot_token(self, token: str, label: str) -> None:
        """Another token of the bot user; calls made with it are logged with `caller=label`
        (several service replicas, one GitLab identity, told apart in the request log)."""
        with self._locked() as state:
            state.tokens[token] = self.bot
            state.token_labels[token] = label

    def inject_fault(self, method: str, route: str, **options: Any) -> FaultRule:
        """Shortcut for `faults.inject` (see `FaultInjector.inject` for the options)."""
        return self.app.faults.inject(method, route, **options)

    def request_count(self, method: str | None = None, route: str | None = None) -> int:
        return self.app.log.count(method, route)

    def reset_requests(self) -> None:
        self.app.log.clear()

    # -- projects and repositories ---------------------------------------------------------

    def create_project(
        self,
        path_with_namespace: str,
        files: Mapping[str, str | bytes] | None = None,
        *,
        default_branch: str = "main",
        executable: Iterable[str] = (),
        description: str = "",
        only_allow_merge_if_pipeline_succeeds: bool = False,
        allow_merge_on_skipped_pipeline: bool = False,
        approvals_required: int = 0,
        merge_method: str = "merge",
        reset_approvals_on_push: bool = True,
        protected_branches: Iterable[str] = (),
        only_allow_merge_if_all_discussions_are_resolved: bool = False,
        ci_config_path: str | None = None,
        merge_pipelines_enabled: bool = False,
        merge_trains_enabled: bool = False,
    ) -> int:
        """Create a project (with one initial commit when `files` is given); returns its id.

        Merge trains (`trains`) need merged-results pipelines, as in GitLab: enabling
        them enables both."""
        if merge_method not in MERGE_METHODS:
            raise ValueError(f"merge_method must be one of {MERGE_METHODS}")
        with self._locked() as state:
            if state.find_project(path_with_namespace) is not None:
                raise ValueError(f"project {path_with_namespace} already exists")
            project = Project(
                id=state.next_id("project"),
                path_with_namespace=path_with_namespace,
                default_branch=default_branch,
                created_at=state.now(),
                description=description,
                only_allow_merge_if_pipeline_succeeds=only_allow_merge_if_pipeline_succeeds,
                allow_merge_on_skipped_pipeline=allow_merge_on_skipped_pipeline,
                approvals_required=approvals_required,
                merge_method=merge_method,
                reset_approvals_on_push=reset_approvals_on_push,
                protected_branches=list(protected_branches),
                only_allow_merge_if_all_discussions_are_resolved=(
                    only_allow_merge_if_all_discussions_are_resolved
                ),
                ci_config_path=ci_config_path,
                merge_pipelines_enabled=merge_pipelines_enabled or merge_trains_enabled,
                merge_trains_enabled=merge_trains_enabled,
            )
            project.members = {
                user.id: ProjectMember(user, level, project.created_at)
                for user, level in ((self.bot, DEVELOPER), (self.human, MAINTAINER))
            }
            state.projects[project.id] = project
        if files is not None:
            self.push(
                project.id, default_branch, files, message="Initial commit", executable=executable
            )
        return project.id

    def configure_project(
        self,
        project: ProjectRef,
        *,
        only_allow_merge_if_pipeline_succeeds: bool | None = None,
        allow_merge_on_skipped_pipeline: bool | None = None,
        approvals_required: int | None = None,
        merge_method: str | None = None,
        reset_approvals_on_push: bool | None = None,
        protected_branches: Iterable[str] | None = None,
        ci_config_path: str | None = None,
    ) -> None:
        """Change project settings; None leaves a setting as it is (`ci_config_path=""`
        unsets that one: GitLab then shows "" and reads `.gitlab-ci.yml`). Merge trains:
        `configure_merge_trains`."""
        with self._locked():
            found = self._project(project)
            if only_allow_merge_if_pipeline_succeeds is not None:
                found.only_allow_merge_if_pipeline_succeeds = only_allow_merge_if_pipeline_succeeds
            if allow_merge_on_skipped_pipeline is not None:
                found.allow_merge_on_skipped_pipeline = allow_merge_on_skipped_pipeline
            if approvals_required is not None:
                found.approvals_required = approvals_required
            if merge_method is not None:
                if merge_method not in MERGE_METHODS:
                    raise ValueError(f"merge_method must be one of {MERGE_METHODS}")
                found.merge_method = merge_method
            if reset_approvals_on_push is not None:
                found.reset_approvals_on_push = reset_approvals_on_push
            if protected_branches is not None:
                found.protected_branches = list(protected_branches)
            if ci_config_path is not None:
                found.ci_config_path = ci_config_path

    def push(
        self,
        project: ProjectRef,
        branch: str,
        files: Mapping[str, str | bytes | None],
        *,
        message: str = "Simulated push",
        user: str | None = None,
        start_branch: str | None = None,
        executable: Iterable[str] = (),
    ) -> str:
        """Push one commit to `branch` directly (a human, or another MR landing); returns its sha.

        `files` maps paths to new content, or to None to delete them. A missing
        branch is created from `start_branch` (default: the default branch).
        """
        with self._locked() as state:
            found = self._project(project)
            repo = found.repository
            author = self._user(user, self.human)
            parent = repo.branches.get(branch) or repo.branches.get(
                start_branch or found.default_branch
            )
            tree = dict(repo.commits[parent].tree) if parent else {}
            marked = set(executable)
            for path, content in files.items():
                if content is None:
                    tree.pop(path, None)
                    continue
                keep = tree[path].executable if path in tree else False
                tree[path] = FileEntry(_as_bytes(content), keep or path in marked)
            commit = repo.create_commit(
                tree=tree,
                parent_ids=(parent,) if parent else (),
                message=message,
                author=author.signature,
                committer=author.signature,
                when=state.now(),
            )
            state.set_branch(found, branch, commit.id, author)
            return commit.id

    def force_push(
        self,
        project: ProjectRef,
        branch: str,
        files: Mapping[str, str | bytes],
        *,
        onto: str | None = None,
        message: str = "Rewritten history",
        user: str | None = None,
    ) -> str:
        """Rewrite `branch` (a force-push): one new commit on `onto` (None: a root commit)
        holding exactly `files`; the old head is no longer an ancestor. Returns its sha."""
        with self._locked() as state:
            found = self._project(project)
            author = self._user(user, self.human)
            commit = found.repository.create_commit(
                tree={path: FileEntry(_as_bytes(data)) for path, data in files.items()},
                parent_ids=(onto,) if onto else (),
                message=message,
                author=author.signature,
                committer=author.signature,
                when=state.now(),
            )
            state.set_branch(found, branch, commit.id, author)
            return commit.id

    def create_branch(self, project: ProjectRef, branch: str, ref: str | None = None) -> str:
        with self._locked() as state:
            found = self._project(project)
            sha = found.repository.resolve(ref or found.default_branch, found.mr_heads())
            if sha is None:
                raise KeyError(f"unknown ref {ref!r}")
            state.set_branch(found, branch, sha, self.human)
            return sha

    def delete_branch(self, project: ProjectRef, branch: str) -> None:
        with self._locked() as state:
            state.set_branch(self._project(project), branch, None, self.human)

    def branch_head(self, project: ProjectRef, branch: str) -> str | None:
        with self._locked():
            return self._project(project).repository.branches.get(branch)

    def branches(self, project: ProjectRef) -> dict[str, str]:
        with self._locked():
            return dict(self._project(project).repository.branches)

    def files(self, project: ProjectRef, ref: str) -> dict[str, bytes]:
        """The whole tree at `ref` (branch or sha) as path → bytes."""
        with self._locked():
            found = self._project(project)
            sha = found.repository.resolve(ref, found.mr_heads())
            if sha is None:
                raise KeyError(f"unknown ref {ref!r}")
            return {path: e.content for path, e in found.repository.commits[sha].tree.items()}

    def read_file(self, project: ProjectRef, ref: str, path: str) -> bytes | None:
        return self.files(project, ref).get(path)

    def log_commits(
        self, project: ProjectRef, ref: str, exclude: str | None = None
    ) -> list[Commit]:
        """`git log exclude..ref`, newest first."""
        with self._locked():
            found = self._project(project)
            repo = found.repository
            sha = repo.resolve(ref, found.mr_heads())
            if sha is None:
                raise KeyError(f"unknown ref {ref!r}")
            excluded = repo.resolve(exclude, found.mr_heads()) if exclude else None
            return repo.log(sha, exclude=excluded)

    # -- merge requests ----------------------------------------------------------------------

    def merge_request(self, project: ProjectRef, iid: int) -> dict[str, Any]:
        """The MR as GET would return it (without counting as an API read)."""
        with self._locked() as state:
            found, mr = self._mr(project, iid)
            return mr_entity(state, found, mr)

    def merge_requests(
        self, project: ProjectRef, *, state: str | None = None, source_branch: str | None = None
    ) -> list[dict[str, Any]]:
        with self._locked() as current:
            found = self._project(project)
            return [
                mr_entity(current, found, mr)
                for mr in sorted(found.merge_requests.values(), key=lambda m: m.iid)
                if (state is None or mr.state == state)
                and (source_branch is None or mr.source_branch == source_branch)
            ]

    def merge_request_heads(
        self, project: ProjectRef, *, state: str | None = "opened"
    ) -> list[MergeRequestHead]:
        """(iid, head sha, source branch) of each MR in `state` (None: all), by iid.

        Without building the API entity (mergeability, pipelines), so a test's CI
        loop can poll it often while the history grows."""
        with self._locked():
            found = self._project(project)
            return [
                MergeRequestHead(mr.iid, mr.sha, mr.source_branch)
                for mr in sorted(found.merge_requests.values(), key=lambda m: m.iid)
                if state is None or mr.state == state
            ]

    def create_merge_request(
        self,
        project: ProjectRef,
        source_branch: str,
        title: str,
        *,
        target_branch: str | None = None,
        user: str | None = None,
        labels: Iterable[str] = (),
    ) -> int:
        """Open an MR as a human would (no duplicate check); returns its iid."""
        with self._locked() as state:
            found = self._project(project)
            now = state.now()
            mr = MergeRequest(
                id=state.next_id("merge_request"),
                iid=found.next_mr_iid,
                project_id=found.id,
                title=title,
                description="",
                source_branch=source_branch,
                target_branch=target_branch or found.default_branch,
                author=self._user(user, self.human),
                created_at=now,
                updated_at=now,
                sha=found.repository.branches[source_branch],
                labels=sorted(set(labels)),
                prepared_at=now,
            )
            found.next_mr_iid += 1
            found.merge_requests[mr.iid] = mr
            return mr.iid

    def merge(self, project: ProjectRef, iid: int, *, user: str | None = None) -> str:
        """Merge like a maintainer overriding CI/approval rules; conflicts still refuse.

        Returns the new head of the target branch.
        """
        with self._locked() as state:
            found, mr = self._mr(project, iid)
            if mr.state != "opened":
                raise ValueError(f"!{iid} is {mr.state}")
            conflicts = conflicting_paths(found, mr)
            if conflicts:
                raise ValueError(f"!{iid} conflicts on {', '.join(conflicts)}")
            perform_merge(state, found, mr, self._user(user, self.human), {})
            return found.repository.branches[mr.target_branch]

    def close_merge_request(
        self, project: ProjectRef, iid: int, *, user: str | None = None
    ) -> None:
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            if mr.state == "opened":
                actor = self._user(user, self.human)
                mr.state = "closed"
                mr.closed_at = mr.updated_at = state.now()
                mr.closed_by = actor
                state.add_system_note(mr, actor, "closed")

    def approve(self, project: ProjectRef, iid: int, *, user: str | None = None) -> None:
        """Approve as `user` (default: the human reviewer); may trigger a pending auto-merge."""
        with self._locked() as state:
            found, mr = self._mr(project, iid)
            approve(state, found, mr, self._user(user, self.human), None)

    def unapprove(self, project: ProjectRef, iid: int, *, user: str | None = None) -> None:
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            unapprove(state, mr, self._user(user, self.human))

    def add_note(
        self,
        project: ProjectRef,
        iid: int,
        body: str,
        *,
        user: str | None = None,
        internal: bool = False,
    ) -> int:
        """A comment by `user` (default: the human reviewer); returns the note id."""
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            return state.add_note(mr, self._user(user, self.human), body, internal=internal).id

    def notes(self, project: ProjectRef, iid: int) -> list[dict[str, Any]]:
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            return [note_entity(state, note) for note in mr.notes]
