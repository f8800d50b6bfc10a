"""Database URL handling: accepted schemes, the driver we use, password masking."""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

ACCEPTED_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


class InvalidDatabaseURLError(ValueError):
    """The configured database URL cannot be used."""


def normalize_database_url(raw: str) -> URL:
    """Parse a user-supplied URL and point it at the psycopg 3 driver.

    `postgres://` is what Heroku-style platforms hand out; SQLAlchemy only knows
    `postgresql://`, and without a driver suffix it would pick psycopg2.
    """
    scheme = raw.split("://", 1)[0] if "://" in raw else ""
    if scheme not in ACCEPTED_SCHEMES:
        raise InvalidDatabaseURLError(
            f"unsupported database URL scheme {scheme!r} in {mask_password(raw)}; "
            f"use one of {', '.join(s + '://' for s in ACCEPTED_SCHEMES)}"
        )
    try:
        url = make_url("postgresql+psycopg://" + raw.split("://", 1)[1])
    except ArgumentError as error:
        raise InvalidDatabaseURLError(f"cannot parse database URL {mask_password(raw)}") from error
    return url


def mask_password(url: str | URL) -> str:
    """Render a URL for logs and errors with any password replaced by `***`."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        # Unparseable: drop everything between the scheme and the host rather
        # than risk echoing a secret.
        if "@" in url and "://" in url:
            scheme, rest = url.split("://", 1)
            return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
        return url


def libpq_conninfo(url: URL) -> str:
    """The same URL as a libpq string for raw psycopg connections (LISTEN, benchmarks)."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)
