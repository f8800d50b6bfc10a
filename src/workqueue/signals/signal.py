"""What a signal is: one check's status for one component on one commit. Pure."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

# The event type a stored signal is announced to the item types with. Not a
# GitLab `object_kind`: the webhook receiver and the SQS consumer never accept
# it from outside.
CHECK_SIGNAL_EVENT = "check_signal"


class CheckStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def finished(self) -> bool:
        return self in {CheckStatus.SUCCESS, CheckStatus.FAILED, CheckStatus.CANCELED}

    @property
    def red(self) -> bool:
        """A result that is not green: a canceled build never proved the commit either."""
        return self in {CheckStatus.FAILED, CheckStatus.CANCELED}


@dataclass(frozen=True, slots=True)
class Signal:
    """One report: check `name` of component `variant` is `status` on `sha` of `project`,
    as of `reported_at` (the reporter's time: the newest per variant wins)."""

    project: str
    sha: str
    name: str
    variant: str
    status: CheckStatus
    reported_at: datetime
    url: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class CheckState:
    """The newest stored signal of one (name, variant) on a commit."""

    name: str
    variant: str
    status: CheckStatus
    url: str | None
    reported_at: datetime
    received_at: datetime

    def shown(self) -> dict[str, str | None]:
        """As `details.post_merge.checks[]` and `details.checks[]` show it."""
        return {
            "name": self.name,
            "variant": self.variant,
            "status": self.status.value,
            "url": self.url,
            "updated_at": self.reported_at.isoformat(),
        }


def shown_checks(
    states: Iterable[CheckState], expected: Iterable[tuple[str, Sequence[str]]]
) -> list[dict[str, str | None]]:
    """The checks as an item shows them: every stored state, and each expected
    (name, variant) nothing reported yet as `pending` without a link or time, so a
    person sees what is still awaited. A name expected without variants awaits
    variant '' until any variant reports."""
    shown = {(state.name, state.variant): state.shown() for state in states}
    reported_names = {name for name, _ in shown}
    for name, variants in expected:
        awaited = list(variants) or ([] if name in reported_names else [""])
        for variant in awaited:
            shown.setdefault(
                (name, variant),
                {
                    "name": name,
                    "variant": variant,
                    "status": CheckStatus.PENDING.value,
                    "url": None,
                    "updated_at": None,
                },
            )
    return [shown[key] for key in sorted(shown)]
