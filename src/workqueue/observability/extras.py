"""The error for an observability variable set without its optional dependency."""

from __future__ import annotations


class ObservabilityUnavailableError(RuntimeError):
    """A variable asks for tracing or error reports whose extra is not installed.

    A RuntimeError, so `serve` reports it as a one-line startup error (exit 1)
    like the other missing optional dependencies (boto3 for the S3 archive).
    """


def missing_extra(variable: str, what: str, extra: str, error: ImportError) -> Exception:
    return ObservabilityUnavailableError(
        f"{variable} is set but {what} is not installed "
        f"(pip install 'workqueue-service[{extra}]'): {error}"
    )
