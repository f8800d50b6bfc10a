"""Scoped callers for API tests: rules with `projects:`, tokens, CI jobs, bodies.

The GitLab-CI-style caller holds `project_path`/`namespace_path` claims and a
rule `projects: ["{project_path}"]`: it may act on its own project only. Used
by tests/api/test_api_scoping.py and the attack suite in tests/security/.
"""

from __future__ import annotations

from typing import Any

from auth_support import LocalIssuer, claims_for, sign

OWN = "team/app"
SIBLING = "team/other"
VICTIM = "victim/prod"
ADMIN_SUB = "system:serviceaccount:ops:admin"
OTHER_BOT = "system:serviceaccount:ops:other-bot"
TEAM_READER = "system:serviceaccount:team:reader"
MAIN_ONLY = "system:serviceaccount:ci:main-only"
WRITES = ("POST", "PUT", "DELETE")
FILES = {"README.md": "# hello\n", "kernel.spec": "Version: 1\n"}


def scoped_rules(issuer_url: str) -> tuple[dict[str, Any], ...]:
    def rule(claims: dict[str, Any], permissions: list[str], **extra: Any) -> dict[str, Any]:
        return {
            "issuer": issuer_url,
            "claims": {"aud": "workqueue-service", **claims},
            "permissions": permissions,
            **extra,
        }

    return (
        # GitLab CI: its own project only (the documented example).
        rule(
            {"namespace_path": "team"},
            ["read", "submit", "retry"],
            item_types=["mr"],
            projects=["{project_path}"],
        ),
        rule({"sub": [ADMIN_SUB, OTHER_BOT]}, ["read", "submit", "retry"], projects=["**"]),
        rule({"sub": TEAM_READER}, ["read"], projects=["team/**"]),
        rule({"sub": MAIN_ONLY, "ref": "main"}, ["submit"], projects=["**"]),
    )


def token(issuer: LocalIssuer, key, sub: str, **claims: Any) -> dict[str, str]:
    signed = sign(claims_for(issuer.issuer, sub=sub, aud="workqueue-service", **claims), key)
    return {"Authorization": f"Bearer {signed}"}


def ci_job(issuer, key, *, ref: str = "main", project_path: str = OWN) -> dict[str, str]:
    """A GitLab CI id_token of one job: the subject names the project and the ref."""
    return token(
        issuer,
        key,
        f"project_path:{project_path}:ref_type:branch:ref:{ref}",
        project_path=project_path,
        namespace_path=project_path.split("/", maxsplit=1)[0],
        ref=ref,
    )


def submission(project: str, branch: str = "workqueue/sync", **extra: Any) -> dict[str, Any]:
    return {
        "project": project,
        "source_branch": branch,
        "title": "Sync",
        "commit_message": "Sync from upstream",
        "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "v2\n"}],
        **extra,
    }
