"""Simulator helpers around merging: background rebases, merge trains, and merges
GitLab refuses (answers the service must survive without looping)."""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator.application import Application
from workqueue.testing.gitlab_simulator.faults import FaultRule
from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef, SimulatorBase
from workqueue.testing.gitlab_simulator.rebasing import REBASE_FAILED, finish_rebase
from workqueue.testing.gitlab_simulator.trains import car_entity, refresh_trains

MERGE_ROUTE = "/projects/:id/merge_requests/:merge_request_iid/merge"
TRAIN_ROUTE = "/projects/:id/merge_trains/merge_requests/:merge_request_iid"
# What GitLab answers for each refusal of `PUT …/merge` (`lib/api/merge_requests.rb`);
# 406 is what GitLab before 16.0 answered where it now answers 422.
REFUSALS = {
    405: "405 Method Not Allowed",
    406: "Branch cannot be merged",
    409: "SHA does not match HEAD of source branch: {head}",
    422: "Branch cannot be merged",
}


class MergingHelpers(SimulatorBase):
    app: Application  # GitLabSimulator's: its fault injector shapes the refusals

    def configure_merge_trains(
        self, project: ProjectRef, *, enabled: bool = True, skip_train_allowed: bool = False
    ) -> None:
        """Turn merge trains on (with merged-results pipelines, which they need) or off;
        `skip_train_allowed` lets `PUT …/merge` merge at once past the train."""
        with self._locked():
            found = self._project(project)
            found.merge_trains_enabled = enabled
            found.merge_pipelines_enabled |= enabled
            found.merge_trains_skip_train_allowed = skip_train_allowed

    def finish_rebase(self, project: ProjectRef, iid: int) -> None:
        """Run the MR's enqueued rebase now, as GitLab's worker would."""
        with self._locked() as state:
            found, mr = self._mr(project, iid)
            finish_rebase(state, found, mr)

    def fail_next_rebase(self, project: ProjectRef, iid: int, message: str = REBASE_FAILED) -> None:
        """The MR's next rebase fails (leaving the branch as it is) with `merge_error`
        `message`, as a rebase Gitaly cannot do does."""
        with self._locked():
            _, mr = self._mr(project, iid)
            mr.rebase_failure = message

    def rebase_in_progress(self, project: ProjectRef, iid: int) -> bool:
        with self._locked():
            _, mr = self._mr(project, iid)
            return mr.rebase_requested_by is not None

    def merge_train(self, project: ProjectRef, target_branch: str) -> list[dict[str, Any]]:
        """The cars of `target_branch`'s train, merged ones included, oldest first."""
        with self._locked() as state:
            found = self._project(project)
            refresh_trains(state, found)
            return [
                car_entity(state, found, car)
                for car in found.train_cars
                if car.target_branch == target_branch
            ]

    def train_car(self, project: ProjectRef, iid: int) -> dict[str, Any] | None:
        """The MR's car as `GET …/merge_trains/merge_requests/:iid` shows it (None: 404)."""
        with self._locked() as state:
            found, _ = self._mr(project, iid)
            refresh_trains(state, found)
            car = found.train_car(iid)
            return None if car is None else car_entity(state, found, car)

    def refuse_merges(
        self,
        status: int = 405,
        message: str | None = None,
        *,
        times: int | None = None,
        train: bool = False,
    ) -> FaultRule:
        """Make GitLab refuse the next `times` merges (None: every one) with `status`
        and GitLab's message for it (or `message`), before any check; `train=True`
        refuses adding to a merge train instead (default message `Failed to merge`)."""
        if train:
            text = message or "400 Bad request - Failed to merge"
            route = TRAIN_ROUTE
            method = "POST"
        else:
            text = message or REFUSALS.get(status, f"{status} refused").format(head="0" * 40)
            route, method = MERGE_ROUTE, "PUT"
        body = {"message": text}
        return self.app.faults.inject(method, route, status=status, times=times, body=body)
