"""Exceptions the engine understands."""

from __future__ import annotations


class PermanentError(Exception):
    """Raised by an executor when retrying cannot help: the item fails at once.

    The message becomes the item's `error`, so it should say what was refused
    and by whom (e.g. GitLab's own message).
    """


class LeaseLostError(Exception):
    """This worker's lease was taken over; its outcome must not be written."""


class DuplicateRegistrationError(ValueError):
    """A type, executor, event handler or resolver was registered twice."""


class UnknownItemTypeError(LookupError):
    """No registration exists for an item type."""
