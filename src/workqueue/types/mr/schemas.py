"""Request schema of an `mr` submission (`POST /api/work-items/mr`).

Only structure is checked here: types, required fields, allowed enum values
and unknown fields (refused, so a misspelt optional field is a 422 rather than
a silently ignored instruction). Everything that depends on configuration or
on the meaning of values is the policy's job (`policy.py`).

Models are strict: `"auto_merge": "false"` or `"execute_filemode": 1` are
refused instead of being coerced, because the caller is untrusted and a
coercion is a guess about what it meant.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from workqueue.types.mr.config import MAX_LABELS_CEILING

Encoding = Literal["text", "base64"]

_MODEL_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True)


class CreateAction(BaseModel):
    """Create a file that must not exist yet on the target branch."""

    model_config = _MODEL_CONFIG

    action: Literal["create"]
    file_path: str
    content: str = Field(description="file content; empty for an empty file")
    encoding: Encoding = Field("text", description="'base64' for binary content")


class UpdateAction(BaseModel):
    """Replace the content of a file that must exist on the target branch."""

    model_config = _MODEL_CONFIG

    action: Literal["update"]
    file_path: str
    content: str = Field(description="the whole new content")
    encoding: Encoding = Field("text", description="'base64' for binary content")


class DeleteAction(BaseModel):
    """Delete a file."""

    model_config = _MODEL_CONFIG

    action: Literal["delete"]
    file_path: str


class MoveAction(BaseModel):
    """Move `previous_path` to `file_path`, optionally replacing its content."""

    model_config = _MODEL_CONFIG

    action: Literal["move"]
    file_path: str = Field(description="the new path")
    previous_path: str = Field(description="the current path")
    content: str | None = Field(None, description="new content; omitted keeps the old content")
    encoding: Encoding = Field("text", description="encoding of content, when given")


class ChmodAction(BaseModel):
    """Set or clear the executable bit of a file."""

    model_config = _MODEL_CONFIG

    action: Literal["chmod"]
    file_path: str
    execute_filemode: bool


FileAction = Annotated[
    CreateAction | UpdateAction | DeleteAction | MoveAction | ChmodAction,
    Field(discriminator="action"),
]

# The actions that carry content, for code that needs to narrow on it.
ContentAction = CreateAction | UpdateAction | MoveAction


class MRWorkItemCreate(BaseModel):
    """Body of a submission: the change to put on `source_branch` as one commit."""

    model_config = _MODEL_CONFIG

    project: str = Field(description="numeric id or 'group/sub/project' path, used as given")
    source_branch: str = Field(description="bot branch the commit is pushed to")
    target_branch: str | None = Field(None, description="omitted: the project default branch")
    title: str = Field(description="MR title")
    description: str | None = Field(None, description="MR description")
    commit_message: str
    package: str | None = Field(None, description="free-form label for filtering")
    change_kind: str | None = Field(None, description="free-form label for filtering")
    # A hard ceiling before the configurable `max_labels` (policy): parsing a
    # million labels would already cost seconds of CPU.
    labels: list[str] = Field(
        default_factory=list, max_length=MAX_LABELS_CEILING, description="GitLab labels of the MR"
    )
    auto_merge: bool = Field(default=True, description="merge once the pipeline succeeds")
    file_actions: list[FileAction]
