"""Exceptions the engine understands."""

from __future__ import annotations


class PermanentError(Exception):
    """Raised by an executor when retrying cannot help: the item fails at once.

    The message becomes the item's `error`, so it should say what was refused
    and by whom (e.g. GitLab's own message).
    """


def retry_after_seconds(error: BaseException) -> float:
    """How long the failed call's server asked to be left alone (0 when it did not say).

    Any exception may carry a `retry_after` attribute in seconds (the GitLab
    adapter sets it from `Retry-After`); the engine schedules the next attempt no
    sooner than that, whatever its own backoff says. Duck-typed, so the engine
    needs to know nothing about where the error came from.
    """
    value = getattr(error, "retry_after", None)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 86_400:
        return float(value)
    return 0.0


def is_outage(error: BaseException) -> bool:
    """Whether the error says the other side is unavailable for now, not that the action failed.

    Any exception may carry a true `outage` attribute (the GitLab adapter sets
    it for rate limits, gateway errors and unreachable servers). Such a
    failure backs off like any other but never uses up `max_attempts`: an
    item must not fail because GitLab was down for a while (DDR-14 counts
    the action's failures). Duck-typed like `retry_after_seconds`.
    """
    return getattr(error, "outage", False) is True


class LeaseLostError(Exception):
    """This worker's lease was taken over; its outcome must not be written."""


class DuplicateRegistrationError(ValueError):
    """A type, executor, event handler or resolver was registered twice."""


class UnknownItemTypeError(LookupError):
    """No registration exists for an item type."""
