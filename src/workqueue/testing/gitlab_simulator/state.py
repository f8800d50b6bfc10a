"""The simulator's data model: users, projects, merge requests, notes, pipelines and jobs.

All of it lives in one `SimulatorState` guarded by one re-entrant lock: HTTP
handlers and the Python test helpers both take it, so every request sees and
leaves a consistent world. Branch moves go through `set_branch`, the one place
that keeps open merge requests in step with their source branch, as GitLab's
`MergeRequests::RefreshService` does after a push.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime

from workqueue.testing.gitlab_simulator.hook_delivery import HookDeliveries
from workqueue.testing.gitlab_simulator.repository import Repository, Signature
from workqueue.testing.gitlab_simulator.versions import DEFAULT_GITLAB_VERSION, parse_version

# GitLab's `Gitlab::Regex.merge_request_draft`: "Draft:", "[Draft]" or "(Draft)" at the start.
_DRAFT = re.compile(r"^\s*(\[draft\]|\(draft\)|draft:)", re.IGNORECASE)


@dataclass(frozen=True)
class User:
    id: int
    username: str
    name: str
    email: str

    @property
    def signature(self) -> Signature:
        return Signature(self.name, self.email)


# GitLab's project access levels (`Gitlab::Access`).
GUEST, REPORTER, DEVELOPER, MAINTAINER, OWNER = 10, 20, 30, 40, 50
ACCESS_LEVELS = (GUEST, REPORTER, DEVELOPER, MAINTAINER, OWNER)


@dataclass
class Note:
    """A comment (or system note) on a merge request or an issue.

    Every note belongs to a discussion (`discussion_id`, 40 hex digits): a plain
    note starts its own (`type` None, an individual note); notes started as a
    thread or replying in one are `DiscussionNote`s.
    """

    id: int
    body: str
    author: User
    project_id: int
    noteable_id: int
    noteable_iid: int
    created_at: datetime
    updated_at: datetime
    system: bool = False
    internal: bool = False
    noteable_type: str = "MergeRequest"  # or "Issue"
    discussion_id: str = ""
    type: str | None = None  # None (a plain note) or "DiscussionNote"
    updated_by: User | None = None  # who last edited it; None until edited


@dataclass
class Issue:
    id: int
    iid: int
    project_id: int
    title: str
    description: str
    author: User
    created_at: datetime
    updated_at: datetime
    confidential: bool = False
    state: str = "opened"
    labels: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


@dataclass
class ProjectMember:
    """A direct member of a project (`ProjectMember`), with one of `ACCESS_LEVELS`."""

    user: User
    access_level: int
    created_at: datetime
    created_by: User | None = None


@dataclass
class MergeRequest:
    id: int
    iid: int
    project_id: int
    title: str
    description: str
    source_branch: str
    target_branch: str
    author: User
    created_at: datetime
    updated_at: datetime
    # GitLab's `diff_head_sha`: follows the source branch while open, frozen afterwards.
    sha: str
    labels: list[str] = field(default_factory=list)
    state: str = "opened"
    previous_sha: str | None = None
    force_remove_source_branch: bool = False
    should_remove_source_branch: bool | None = None
    squash: bool = False
    assignee_ids: list[int] = field(default_factory=list)
    reviewer_ids: list[int] = field(default_factory=list)
    merged_at: datetime | None = None
    closed_at: datetime | None = None
    merge_user: User | None = None
    closed_by: User | None = None
    merge_commit_sha: str | None = None
    squash_commit_sha: str | None = None
    merge_when_pipeline_succeeds: bool = False
    auto_merge_params: dict[str, object] = field(default_factory=dict)
    merge_error: str | None = None
    approved_by: list[User] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    # None until the first response after creation (GitLab prepares the diff asynchronously).
    prepared_at: datetime | None = None
    # API reads left that report `checking` (see GitLabSimulator's `checking_reads`).
    checks_pending: int = 0
    # API reads left that report `unchecked` / `approvals_syncing` (MergeabilityHelpers).
    unchecked_reads: int = 0
    approvals_syncing_reads: int = 0
    # Reviewers who requested changes; their approval withdraws the request.
    changes_requested_by: list[User] = field(default_factory=list)
    unresolved_discussions: int = 0
    # A check the simulator does not model itself (merge_request_blocked,
    # jira_association_missing, status_checks_must_pass, ...), reported as is.
    blocked_status: str | None = None
    # `PUT …/rebase` runs in the background (`RebaseWorker`): who asked, and the API
    # reads of the MR left that report `rebase_in_progress` before it runs.
    rebase_requested_by: User | None = None
    rebase_reads_left: int = 0
    # Set by a test (`fail_next_rebase`): the next rebase fails with this merge_error.
    rebase_failure: str | None = None

    @property
    def draft(self) -> bool:
        return _DRAFT.match(self.title) is not None


@dataclass
class Job:
    id: int
    pipeline_id: int
    project_id: int
    name: str
    stage: str
    status: str
    user: User
    created_at: datetime
    failure_reason: str | None = None
    trace: str = ""
    allow_failure: bool = False
    when: str = "on_success"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    retried: bool = False


@dataclass
class Pipeline:
    id: int
    iid: int
    project_id: int
    sha: str
    before_sha: str
    ref: str
    source: str
    user: User
    created_at: datetime
    updated_at: datetime
    merge_request_iid: int | None = None
    # Set by the test helper to force a status; None means "derived from the jobs".
    status_override: str | None = None
    job_ids: list[int] = field(default_factory=list)
    name: str | None = None
    # Variables given when the pipeline was triggered through the API, in order.
    variables: list[dict[str, str]] = field(default_factory=list)
    # Merged-results and merge-train pipelines run on a temporary merge commit
    # (`sha`): `source_sha` is the MR head it merges, `target_sha` what it merges into.
    source_sha: str | None = None
    target_sha: str | None = None


@dataclass
class MergeTrainCar:
    """An MR on a merge train (EE's `MergeTrains::Car`); a branch's cars run in id order."""

    id: int
    merge_request_iid: int
    target_branch: str
    user: User
    created_at: datetime
    updated_at: datetime
    # idle (no train pipeline yet), stale (its train ref is out of date), fresh,
    # merging, merged, skip_merged (merged outside the train).
    status: str = "idle"
    pipeline_id: int | None = None
    merged_at: datetime | None = None


@dataclass
class Project:
    id: int
    path_with_namespace: str
    default_branch: str
    created_at: datetime
    description: str = ""
    repository: Repository = field(default_factory=Repository)
    only_allow_merge_if_pipeline_succeeds: bool = False
    allow_merge_on_skipped_pipeline: bool = False
    approvals_required: int = 0
    only_allow_merge_if_all_discussions_are_resolved: bool = False
    merge_method: str = "merge"
    reset_approvals_on_push: bool = True
    protected_branches: list[str] = field(default_factory=list)
    # GitLab's "CI/CD configuration file" setting: None (the default, shown as null) means
    # `.gitlab-ci.yml`; `path@group/project[:ref]` is a file of another project.
    ci_config_path: str | None = None
    # EE settings: merged-results pipelines, and merge trains (which need them).
    merge_pipelines_enabled: bool = False
    merge_trains_enabled: bool = False
    # With merge trains on, `PUT …/merge` (skipping the train) is refused unless this is set.
    merge_trains_skip_train_allowed: bool = False
    # Cars on this project's merge trains; a dropped car is deleted, as in GitLab.
    train_cars: list[MergeTrainCar] = field(default_factory=list)
    merge_requests: dict[int, MergeRequest] = field(default_factory=dict)
    next_mr_iid: int = 1
    issues: dict[int, Issue] = field(default_factory=dict)
    next_issue_iid: int = 1
    # Direct members by user id (the simulator has no groups, so these are all of them).
    members: dict[int, ProjectMember] = field(default_factory=dict)
    next_pipeline_iid: int = 1

    @property
    def name(self) -> str:
        return self.path_with_namespace.rsplit("/", 1)[-1]

    @property
    def namespace(self) -> str:
        return self.path_with_namespace.rsplit("/", 1)[0]

    def is_protected(self, branch: str) -> bool:
        return any(fnmatch.fnmatchcase(branch, pattern) for pattern in self.protected_branches)

    def mr_heads(self) -> dict[int, str]:
        return {mr.iid: mr.sha for mr in self.merge_requests.values()}

    def train_car(self, iid: int) -> MergeTrainCar | None:
        """The MR's car: the one on the train, else its last merged one."""
        cars = (car for car in reversed(self.train_cars) if car.merge_request_iid == iid)
        return next(cars, None)


class SimulatorState:
    """Everything the simulated GitLab knows; hold `lock` while reading or changing it."""

    # API reads of an MR that show `rebase_in_progress` after `PUT …/rebase` (0: at once).
    rebase_reads = 1

    def __init__(
        self,
        web_url: str = "http://gitlab.invalid",
        checking_reads: int = 0,
        gitlab_version: str = DEFAULT_GITLAB_VERSION,
    ) -> None:
        self.lock = threading.RLock()
        self.web_url = web_url.rstrip("/")
        self.checking_reads = checking_reads
        # The GitLab release whose shapes are served (`versions`), as given and parsed.
        self.gitlab_version_text = gitlab_version
        self.gitlab_version = parse_version(gitlab_version)
        self.hook_deliveries = HookDeliveries()  # project hooks, losses (`hook_delivery`)
        self.users: dict[str, User] = {}
        self.tokens: dict[str, User] = {}
        # Optional names of tokens, recorded as `RequestRecord.caller` (never the token).
        self.token_labels: dict[str, str] = {}
        self.projects: dict[int, Project] = {}
        self.pipelines: dict[int, Pipeline] = {}
        # Pipelines by (project id, sha): every MR read looks up its head's pipelines.
        self._pipelines_by_sha: dict[tuple[int, str], list[Pipeline]] = {}
        self.jobs: dict[int, Job] = {}
        self.notes: dict[int, Note] = {}
        # Distinct ranges per kind, so a test that mixes up an id and an iid fails loudly.
        self._ids = {
            "user": itertools.count(1),
            "project": itertools.count(42),
            "merge_request": itertools.count(1001),
            "pipeline": itertools.count(5501),
            "job": itertools.count(90301),
            "note": itertools.count(77001),
            "merge_train_car": itertools.count(267),
            "issue": itertools.count(3001),
            "discussion": itertools.count(1),
        }

    def next_id(self, kind: str) -> int:
        return next(self._ids[kind])

    def add_pipeline(self, pipeline: Pipeline) -> None:
        """Store a new pipeline (its sha never changes afterwards)."""
        self.pipelines[pipeline.id] = pipeline
        self._pipelines_by_sha.setdefault((pipeline.project_id, pipeline.sha), []).append(pipeline)
        if pipeline.source_sha is not None:
            # GitLab's `for_sha_or_source_sha`: a merged result counts for the head it merges.
            key = (pipeline.project_id, pipeline.source_sha)
            self._pipelines_by_sha.setdefault(key, []).append(pipeline)

    def pipelines_for_sha(self, project_id: int, sha: str) -> list[Pipeline]:
        """Pipelines on `sha`, and merged-results or train pipelines of `sha` as MR head."""
        return list(self._pipelines_by_sha.get((project_id, sha), ()))

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)

    def add_user(self, username: str, name: str | None = None, email: str | None = None) -> User:
        user = User(
            id=self.next_id("user"),
            username=username,
            name=name or username.replace("-", " ").title(),
            email=email or f"{username}@example.com",
        )
        self.users[username] = user
        return user

    def find_project(self, ref: str | int) -> Project | None:
        """By numeric id, or by `path_with_namespace` (case-insensitive, as in GitLab)."""
        if isinstance(ref, int) or ref.isdigit():
            return self.projects.get(int(ref))
        wanted = ref.lower()
        for project in self.projects.values():
            if project.path_with_namespace.lower() == wanted:
                return project
        return None

    def add_system_note(self, mr: MergeRequest, author: User, body: str) -> Note:
        return self.add_note(mr, author, body, system=True)

    def new_discussion_id(self, noteable: MergeRequest | Issue) -> str:
        """40 hex digits, as GitLab's `Discussion.build_discussion_id` (a SHA-1 over the
        noteable and a random part; here a counter, so runs repeat)."""
        kind = "issue" if isinstance(noteable, Issue) else "merge_request"
        seed = f"discussion-{kind}-{noteable.id}-{self.next_id('discussion')}"
        return hashlib.sha1(seed.encode(), usedforsecurity=False).hexdigest()

    def add_note(
        self,
        noteable: MergeRequest | Issue,
        author: User,
        body: str,
        *,
        system: bool = False,
        internal: bool = False,
        discussion_id: str | None = None,
        note_type: str | None = None,
    ) -> Note:
        """A note on an MR or issue; without `discussion_id` it starts a new discussion."""
        now = self.now()
        note = Note(
            id=self.next_id("note"),
            body=body,
            author=author,
            project_id=noteable.project_id,
            noteable_id=noteable.id,
            noteable_iid=noteable.iid,
            created_at=now,
            updated_at=now,
            system=system,
            internal=internal,
            noteable_type="Issue" if isinstance(noteable, Issue) else "MergeRequest",
            discussion_id=discussion_id or self.new_discussion_id(noteable),
            type=note_type,
        )
        noteable.notes.append(note)
        self.notes[note.id] = note
        return note

    def noteable_of(self, note: Note) -> MergeRequest | Issue:
        project = self.projects[note.project_id]
        if note.noteable_type == "Issue":
            return project.issues[note.noteable_iid]
        return project.merge_requests[note.noteable_iid]

    def set_branch(self, project: Project, branch: str, sha: str | None, actor: User) -> None:
        """Move (or delete, with `sha=None`) a branch and refresh the MRs that depend on it."""
        if sha is None:
            project.repository.branches.pop(branch, None)
        else:
            project.repository.branches[branch] = sha
        for mr in project.merge_requests.values():
            if mr.state != "opened":
                continue
            if mr.source_branch == branch and sha is not None and sha != mr.sha:
                self._source_updated(project, mr, sha, actor)
            elif branch in {mr.target_branch, mr.source_branch}:
                mr.checks_pending = self.checking_reads

    def _source_updated(self, project: Project, mr: MergeRequest, sha: str, actor: User) -> None:
        mr.previous_sha, mr.sha = mr.sha, sha
        mr.updated_at = self.now()
        mr.checks_pending = self.checking_reads
        if project.reset_approvals_on_push:
            mr.approved_by.clear()
        car = project.train_car(mr.iid)
        if car is not None and car.status not in {"merged", "skip_merged"}:
            self.drop_train_car(project, car, actor, "the source branch was updated")
        if mr.merge_when_pipeline_succeeds:
            # RefreshService aborts auto-merge when new commits arrive after it was set.
            mr.merge_when_pipeline_succeeds = False
            mr.merge_user = None
            mr.auto_merge_params = {}
            self.add_system_note(
                mr, actor, "aborted the automatic merge because the source branch was updated"
            )

    def drop_train_car(
        self, project: Project, car: MergeTrainCar, actor: User, reason: str
    ) -> None:
        """`AutoMerge::MergeTrainService#abort`: the car is deleted, auto-merge reset, and
        the cars behind it get new train refs at the next refresh."""
        project.train_cars.remove(car)
        for behind in project.train_cars:
            same_train = behind.target_branch == car.target_branch and behind.id > car.id
            if same_train and behind.status in {"idle", "fresh"}:
                behind.status = "stale"
        mr = project.merge_requests[car.merge_request_iid]
        mr.merge_when_pipeline_succeeds = False
        mr.merge_user = None
        mr.auto_merge_params = {}
        self.add_system_note(
            mr, actor, f"removed this merge request from the merge train because {reason}"
        )
