"""Simulator helpers that play the CI runner: pipelines, job statuses, traces, retries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workqueue.testing.gitlab_simulator.ci import (
    JOB_STATUSES,
    PIPELINE_STATUSES,
    JobSpec,
    add_job,
    all_jobs,
    latest_jobs,
    retry_job,
    set_job_status,
)
from workqueue.testing.gitlab_simulator.entities import job_entity, pipeline_entity
from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef, SimulatorBase
from workqueue.testing.gitlab_simulator.repository import ZERO_SHA
from workqueue.testing.gitlab_simulator.state import Pipeline
from workqueue.testing.gitlab_simulator.trains import merge_ref_commit, settle


class CiHelpers(SimulatorBase):
    """Helpers standing in for runners: pipelines and jobs move only when a test says so."""

    def create_pipeline(
        self,
        project: ProjectRef,
        *,
        merge_request_iid: int | None = None,
        ref: str | None = None,
        sha: str | None = None,
        jobs: Sequence[JobSpec] = (),
        status: str | None = None,
        user: str | None = None,
        merged_results: bool = False,
    ) -> int:
        """A pipeline for an MR (ref `refs/merge-requests/<iid>/head`) or a branch; returns its id.

        Without `sha`, it runs on the MR's head or the branch head. Its status
        follows the jobs unless `status` forces one. With `merged_results`, an MR
        pipeline runs on a new temporary merge commit of its head (`sha`, default the
        MR head) into the target head, on `refs/merge-requests/<iid>/merge` (`trains`).
        """
        if status is not None and status not in PIPELINE_STATUSES:
            raise ValueError(f"unknown pipeline status {status!r}")
        # Checked up front so a bad spec cannot leave a half-built pipeline behind.
        bad = [spec.status for spec in jobs if spec.status not in JOB_STATUSES]
        if bad:
            raise ValueError(f"unknown job status {bad[0]!r}")
        with self._locked() as state:
            found = self._project(project)
            repo = found.repository
            source_sha = target_sha = None
            if merge_request_iid is not None and merged_results:
                mr = found.merge_requests[merge_request_iid]
                pipeline_ref = f"refs/merge-requests/{mr.iid}/merge"
                source_sha, target_sha = sha or mr.sha, repo.branches[mr.target_branch]
                actor = self._user(user, self.bot)
                merged = merge_ref_commit(found, target_sha, mr, source_sha, actor, state.now())
                pipeline_sha = merged.id
                source = "merge_request_event"
            elif merge_request_iid is not None:
                mr = found.merge_requests[merge_request_iid]
                pipeline_ref = f"refs/merge-requests/{mr.iid}/head"
                pipeline_sha = sha or mr.sha
                source = "merge_request_event"
            elif merged_results:
                raise ValueError("merged_results needs merge_request_iid")
            else:
                pipeline_ref = ref or found.default_branch
                pipeline_sha = sha or repo.branches[pipeline_ref]
                source = "push"
            commit = repo.commits[pipeline_sha]
            now = state.now()
            pipeline = Pipeline(
                id=state.next_id("pipeline"),
                iid=found.next_pipeline_iid,
                project_id=found.id,
                sha=pipeline_sha,
                before_sha=commit.parent_ids[0] if commit.parent_ids else ZERO_SHA,
                ref=pipeline_ref,
                source=source,
                user=self._user(user, self.bot),
                created_at=now,
                updated_at=now,
                merge_request_iid=merge_request_iid,
                source_sha=source_sha,
                target_sha=target_sha,
            )
            found.next_pipeline_iid += 1
            state.add_pipeline(pipeline)
            for spec in jobs:
                add_job(state, pipeline, spec, pipeline.user)
            pipeline.status_override = status
            settle(state, found)
            return pipeline.id

    def set_job_status(
        self,
        job_id: int,
        status: str,
        *,
        failure_reason: str | None = None,
        trace: str | None = None,
    ) -> None:
        """Move a job (like a runner would); the pipeline status and auto-merge follow."""
        with self._locked() as state:
            job = state.jobs[job_id]
            set_job_status(state, job, status, failure_reason=failure_reason, trace=trace)
            settle(state, state.projects[job.project_id])

    def append_trace(self, job_id: int, text: str) -> None:
        with self._locked() as state:
            state.jobs[job_id].trace += text

    def set_pipeline_status(self, pipeline_id: int, status: str) -> None:
        """Force a pipeline status (until one of its jobs changes)."""
        if status not in PIPELINE_STATUSES:
            raise ValueError(f"unknown pipeline status {status!r}")
        with self._locked() as state:
            pipeline = state.pipelines[pipeline_id]
            pipeline.status_override = status
            pipeline.updated_at = state.now()
            settle(state, state.projects[pipeline.project_id])

    def pipeline_ids(self, project: ProjectRef, *, source: str | None = None) -> list[int]:
        """Ids of the project's pipelines (optionally of one `source`, e.g. `api`), oldest first."""
        with self._locked() as state:
            found = self._project(project)
            return sorted(
                p.id
                for p in state.pipelines.values()
                if p.project_id == found.id and (source is None or p.source == source)
            )

    def pipeline_variables(self, pipeline_id: int) -> dict[str, str]:
        """The variables a pipeline was triggered with, key → value."""
        with self._locked() as state:
            return {v["key"]: v["value"] for v in state.pipelines[pipeline_id].variables}

    def pipeline(self, pipeline_id: int) -> dict[str, Any]:
        with self._locked() as state:
            return pipeline_entity(state, state.pipelines[pipeline_id])

    def jobs(self, pipeline_id: int, *, include_retried: bool = False) -> list[dict[str, Any]]:
        with self._locked() as state:
            pipeline = state.pipelines[pipeline_id]
            chosen = all_jobs(state, pipeline) if include_retried else latest_jobs(state, pipeline)
            return [job_entity(state, job) for job in chosen]

    def job(self, job_id: int) -> dict[str, Any]:
        with self._locked() as state:
            return job_entity(state, state.jobs[job_id])

    def retry_job(self, job_id: int, *, user: str | None = None) -> int:
        """Retry as a human pressing the button; returns the new job id."""
        with self._locked() as state:
            return retry_job(state, state.jobs[job_id], self._user(user, self.human)).id
