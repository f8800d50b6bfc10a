"""The `authorization:` section of the config file: who may do what (DDR-21, 22, 23).

Every rule maps one remote identity to local permissions. The identity is
either OpenShift group membership (`groups`) or a JWT from one issuer whose
claims match (`issuer` + `claims`). Validation is fail-closed: a rule that
could be read two ways, or that could accept tokens minted for another
service, stops the service at startup instead of being interpreted.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from workqueue.project_patterns import pattern_problem, placeholders

Permission = Literal["read", "submit", "retry", "report"]
PERMISSIONS: tuple[Permission, ...] = ("read", "submit", "retry", "report")
# Permissions that make the service write to GitLab, or decide whether it
# merges and how items end (`report`: external checks): a rule granting one of
# them must say on which projects (`projects:`), never "everywhere" by omission.
WRITE_PERMISSIONS: frozenset[Permission] = frozenset({"submit", "retry", "report"})

# `issuer: k8s` names the cluster's own service-account issuer, whose real URL
# is only known at runtime from in-cluster discovery (DDR-11).
K8S_ISSUER = "k8s"

# Strict types: YAML turns `1.0`, `2024-01-01` or `~` into floats, dates and
# nulls whose string form is not what the author typed. Such values must be
# quoted rather than silently coerced into something that never matches.
ClaimScalar = StrictStr | StrictInt | StrictBool
ClaimValue = ClaimScalar | list[ClaimScalar]
NonEmptyName = Annotated[str, Field(min_length=1)]
# A claim name as `{claim}` placeholders spell them (never `=`: limit keys are
# stored as `claim:<name>=<value>`).
LimitKeyClaim = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]+$", max_length=256)]
_Name = TypeVar("_Name", bound=str)


def _issuer_problem(issuer: str) -> str | None:
    """Why `issuer` is unusable as an OIDC issuer, or None when it is fine."""
    if issuer == K8S_ISSUER:
        return None
    parts = urlsplit(issuer)
    if parts.scheme not in {"https", "http"}:
        return f"must be {K8S_ISSUER!r} or an https:// URL, got {issuer!r}"
    if not parts.hostname:
        return f"has no host: {issuer!r}"
    # OpenID Connect Discovery 1.0 §2: an issuer has no query or fragment.
    # Credentials in the URL would end up in logs and in every request.
    if parts.query or parts.fragment or "?" in issuer or "#" in issuer:
        return f"must not have a query or fragment: {issuer!r}"
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials"
    return None


def _unique(values: list[_Name], what: str) -> list[_Name]:
    duplicates = sorted({value for value in values if values.count(value) > 1})
    if duplicates:
        raise ValueError(f"duplicate {what}: {', '.join(duplicates)}")
    return values


class AuthorizationRule(BaseModel):
    """One rule: `groups` XOR (`issuer` + `claims`), granting `permissions`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: list[NonEmptyName] | None = Field(
        None, min_length=1, description="OpenShift groups; any one of them matches"
    )
    issuer: str | None = Field(
        None, description=f"OIDC issuer URL of the JWT, or {K8S_ISSUER!r} for the cluster"
    )
    claims: dict[NonEmptyName, ClaimValue] | None = Field(
        None,
        description="JWT claims that must all match; a list matches any of its values; "
        "compared exactly (case-sensitive; integers and booleans as their JSON text). "
        "Must include `aud`.",
    )
    permissions: list[Permission] = Field(min_length=1)
    item_types: list[NonEmptyName] | None = Field(
        None, min_length=1, description="restrict the rule to these item types; omit for all"
    )
    projects: list[NonEmptyName] | None = Field(
        None,
        min_length=1,
        description="GitLab project paths the rule covers (globs: `*` within a segment, "
        "`**` across segments, `{claim}` = the token's claim value); required when the "
        'rule grants submit, retry or report (`["**"]` for every project); omitted: every project',
    )
    limit_key: LimitKeyClaim | None = Field(
        None,
        description="count the callers this rule designates by this token claim instead of "
        "`sub` for `authorization.limits` (GitLab CI: `project_path`, so a project's refs are "
        "one caller); a token without the claim is refused (403)",
    )

    @field_validator("issuer")
    @classmethod
    def _issuer_is_usable(cls, issuer: str | None) -> str | None:
        if issuer is not None:
            problem = _issuer_problem(issuer)
            if problem:
                raise ValueError(f"issuer {problem}")
        return issuer

    @field_validator("claims")
    @classmethod
    def _claim_lists_are_not_empty(
        cls, claims: dict[str, ClaimValue] | None
    ) -> dict[str, ClaimValue] | None:
        # An empty alternative list can never match: surely a mistake.
        for name, value in (claims or {}).items():
            if isinstance(value, list) and not value:
                raise ValueError(f"claim {name!r} has an empty list of accepted values")
        return claims

    @field_validator("permissions")
    @classmethod
    def _permissions_are_unique(cls, permissions: list[Permission]) -> list[Permission]:
        return _unique(permissions, "permissions")

    @field_validator("projects")
    @classmethod
    def _project_patterns_are_valid(cls, projects: list[str] | None) -> list[str] | None:
        for pattern in projects or []:
            problem = pattern_problem(pattern)
            if problem:
                raise ValueError(problem)
        return None if projects is None else _unique(projects, "project patterns")

    @field_validator("groups", "item_types")
    @classmethod
    def _names_are_unique(cls, names: list[str] | None) -> list[str] | None:
        return None if names is None else _unique(names, "entries")

    @model_validator(mode="after")
    def _one_kind_of_identity(self) -> AuthorizationRule:
        if self.groups is not None and self.issuer is not None:
            raise ValueError("a rule has either `groups` or `issuer` + `claims`, not both")
        if self.groups is None and self.issuer is None:
            raise ValueError("a rule needs either `groups` or `issuer` + `claims`")
        if self.groups is not None and self.claims is not None:
            raise ValueError("`claims` belong to `issuer` rules, not to `groups` rules")
        # DDR-22: without an audience binding, a token any other service
        # obtained from the same issuer would be accepted here too.
        if self.issuer is not None and (not self.claims or "aud" not in self.claims):
            raise ValueError("an `issuer` rule must bind the audience: add `aud` to `claims`")
        writes = [p for p in PERMISSIONS if p in WRITE_PERMISSIONS and p in self.permissions]
        if writes and self.projects is None:
            raise ValueError(
                f"a rule granting {' and '.join(writes)} must list `projects` "
                '(write `projects: ["**"]` to allow every project deliberately)'
            )
        used = set().union(*(placeholders(pattern) for pattern in self.projects or []))
        if used and self.groups is not None:
            raise ValueError(
                "`{claim}` placeholders in `projects` need token claims: use them in "
                "`issuer` rules, not in `groups` rules"
            )
        if self.limit_key is not None and self.groups is not None:
            raise ValueError(
                "`limit_key` names a token claim: use it in `issuer` rules, not in `groups` rules"
            )
        return self

    @property
    def insecure_issuer(self) -> bool:
        """True for an `http://` issuer: keys fetched in clear text (development only)."""
        return self.issuer is not None and self.issuer.startswith("http://")


GIB = 1024**3


class CallerLimits(BaseModel):
    """`authorization.limits`: what one caller, and one project, may hold and send (429 beyond).

    A caller is its issuer with its `sub` (or the claim a matching rule names in
    `limit_key`); a project is its canonical GitLab path, whoever submits.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_live_items_per_caller: PositiveInt = Field(
        1000, description="active or failed items one caller may hold at once"
    )
    submissions_per_minute_per_caller: PositiveInt = Field(
        120, description="submissions one caller may make per minute (all replicas together)"
    )
    max_live_items_per_project: PositiveInt = Field(
        1000, description="active or failed items of one project, all callers together"
    )
    submissions_per_minute_per_project: PositiveInt = Field(
        300,
        description="submissions to one project per minute, all callers and replicas together",
    )
    max_stored_bytes_per_caller: PositiveInt = Field(
        GIB,
        description="bytes one caller's items may hold, live and finished: the UTF-8 of "
        "every stored text (title, description, commit message, labels, paths, contents); "
        "finished ones count what is left once `retention.content_days` drops their contents",
    )


class AuthorizationConfig(BaseModel):
    """`authorization:` — no rules means no remote caller may do anything."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[AuthorizationRule] = Field(default_factory=list)
    limits: CallerLimits = Field(default_factory=CallerLimits)

    @model_validator(mode="after")
    def _one_limit_key_per_issuer(self) -> AuthorizationConfig:
        # A token matching two rules that count it differently would have two
        # answers to "who is this caller"; refuse the config rather than pick.
        seen: dict[str, tuple[int, str]] = {}
        for index, rule in enumerate(self.rules):
            if rule.issuer is None or rule.limit_key is None:
                continue
            first = seen.setdefault(rule.issuer, (index, rule.limit_key))
            if first[1] != rule.limit_key:
                raise ValueError(
                    f"rules {first[0]} and {index} (issuer {rule.issuer}) set different "
                    f"`limit_key` claims ({first[1]!r}, {rule.limit_key!r}): use one per issuer"
                )
        return self

    @property
    def issuers(self) -> frozenset[str]:
        """Every distinct `issuer:` value, `k8s` included as written."""
        return frozenset(rule.issuer for rule in self.rules if rule.issuer is not None)

    @property
    def insecure_issuers(self) -> frozenset[str]:
        """The `http://` issuers, so the application can warn about them."""
        return frozenset(
            rule.issuer for rule in self.rules if rule.issuer is not None and rule.insecure_issuer
        )
