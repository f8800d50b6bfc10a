"""Flags appear in `--help` as flags: `--json`, not `--json <bool>`.

typer's rich help (0.29) prints a value type after every option, flags too, as
if `--json` took `true` or `false`; a flag takes nothing. Options that take a
value keep their type.
"""

from __future__ import annotations

import typer
from typer.core import TyperOption

_original = TyperOption.display_type_rich


def _display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
    return None if self.is_flag else _original(self, ctx)


def show_flags_as_flags() -> None:
    setattr(TyperOption, "display_type_rich", _display_type_rich)  # noqa: B010 - a method, on purpose
