"""What every GitLab-backed item type does the same way: check its `gitlab_url`, build its client.

One place, so that a second (or third) type cannot forget the token check, the
plain-http warning or the test doubles' client factory.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from workqueue.gitlab.client import GitLabClient
from workqueue.types.plugin import HandledTypeError, InstallContext

logger = logging.getLogger(__name__)
# (item type, URL) already warned about: `serve` installs the types twice, once
# to validate the config before touching the database and once to run.
_warned_plain_http: set[tuple[str, str]] = set()


def check_gitlab_url(value: str) -> str:
    """`value` as a GitLab base URL (http(s), a host, no query or fragment), or ValueError."""
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"gitlab_url must be an http(s) URL with a host, got {value!r}")
    if parts.query or parts.fragment:
        raise ValueError("gitlab_url must not have a query or fragment")
    # python-gitlab appends '/api/v4'; a trailing slash would double it.
    return value.rstrip("/")


def connect_gitlab(item_type: str, gitlab_url: str, context: InstallContext) -> GitLabClient:
    """The client a type's executors use; refuses to install the type without a token."""
    if gitlab_url.startswith("http://") and (item_type, gitlab_url) not in _warned_plain_http:
        _warned_plain_http.add((item_type, gitlab_url))
        logger.warning(
            "handled_types.%s.gitlab_url %s is plain http: the GitLab token crosses the "
            "network unencrypted (acceptable for local development only)",
            item_type,
            gitlab_url,
        )
    if not context.gitlab_token:
        raise HandledTypeError(
            f"handled_types.{item_type} needs a GitLab token: set WORKQUEUE_SERVICE_GITLAB_TOKEN"
        )
    if context.gitlab_client_factory is not None:
        client: GitLabClient = context.gitlab_client_factory(gitlab_url, context.gitlab_token)
        return client
    return GitLabClient(gitlab_url, context.gitlab_token, on_call=context.gitlab_on_call)
