"""Read a Containerfile into stages of instructions (the subset of the syntax we write).

Handles comments, `\\` continuations (with comment lines inside them, which
the builders drop), `ARG` before the first `FROM`, and exec-form (JSON)
arguments. Images cannot be built here, so the tests read the file instead.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    arguments: str  # the rest of the logical line, continuations joined

    def exec_form(self) -> list[str]:
        """The JSON array form (`["a", "b"]`); anything else is an error here."""
        value = json.loads(self.arguments)
        if not isinstance(value, list) or not all(isinstance(part, str) for part in value):
            raise ValueError(f"{self.keyword} is not in exec form: {self.arguments}")
        return value


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [item for item in self.instructions if item.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        if not found:
            raise LookupError(f"stage {self.name or self.base} has no {keyword}")
        return found[-1]

    def environment(self) -> dict[str, str]:
        """ENV key=value pairs (the form we use), later ones winning."""
        variables: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for pair in shlex.split(instruction.arguments):
                key, separator, value = pair.partition("=")
                if not separator:
                    raise ValueError(f"ENV without `=`: {instruction.arguments}")
                variables[key] = value
        return variables


@dataclass
class Containerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        return next(stage for stage in self.stages if stage.name == name)


def logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current: list[str] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current.append(stripped[:-1].strip())
            continue
        current.append(stripped)
        lines.append(" ".join(part for part in current if part))
        current = []
    if current:
        raise ValueError("the file ends inside a continued line")
    return lines


def parse(path: Path) -> Containerfile:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, arguments = line.partition(" ")
        keyword = keyword.upper()
        arguments = arguments.strip()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arguments, flags=re.IGNORECASE)
            if match is None:
                raise ValueError(f"cannot read FROM {arguments}")
            base = re.sub(r"\$\{(\w+)\}", lambda found: global_args.get(found[1], ""), match[1])
            stages.append(Stage(base=base, name=match[2]))
        elif not stages:
            if keyword != "ARG":
                raise ValueError(f"{keyword} before the first FROM")
            name, _, default = arguments.partition("=")
            global_args[name] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, arguments))
    return Containerfile(global_args, stages)
