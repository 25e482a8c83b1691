"""Readable tables and JSON for every `gamma-net` subcommand that computes or measures.

A subcommand returns a :class:`Report`; the CLI prints its tables and, with
``--json PATH``, writes the same numbers (plus any extra data) as JSON.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Table:
    """A titled table of numbers and labels, printed aligned and written as JSON."""

    title: str
    columns: Sequence[str]
    rows: list[Sequence[Any]] = field(default_factory=list)
    #: printf-style format for floats, per column name (default: 4 significant digits)
    formats: dict[str, str] = field(default_factory=dict)

    def add(self, *row: Any) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"table {self.title!r}: row has {len(row)} cells, expected {len(self.columns)}")
        self.rows.append(list(row))

    def _cell(self, column: str, value: Any) -> str:
        if isinstance(value, (float, np.floating)):
            fmt = self.formats.get(column, "{:.4g}")
            return "nan" if math.isnan(value) else fmt.format(value)
        return str(value)

    def render(self) -> str:
        cells = [[self._cell(c, v) for c, v in zip(self.columns, row)] for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        line = "  ".join("-" * w for w in widths)
        out = [self.title, "  ".join(c.rjust(w) for c, w in zip(self.columns, widths)), line]
        out += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows]}


@dataclass
class Report:
    """What a subcommand computed: tables to print, extra JSON data, files it wrote."""

    tables: list[Table] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    #: One line the CLI prints last, after the tables and the JSON path: the result a reader should take away.
    summary: str = ""

    def render(self) -> str:
        parts = [t.render() for t in self.tables]
        if self.files:
            parts.append("wrote:\n" + "\n".join(f"  {f}" for f in self.files))
        return "\n\n".join(parts)

    def to_json(self, command: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "command": command,
            "arguments": arguments,
            "tables": [t.to_json() for t in self.tables],
            "data": self.data,
            "files": list(self.files),
            "summary": self.summary,
        }


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, pathlib.PurePath):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _finite_or_none(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null rather than invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def round_significant(value: Any, digits: int = 4) -> Any:
    """Floats (also inside dicts, lists, arrays) to ``digits`` significant digits, non-finite to None.

    So that JSON of study results committed to the repository stays small.
    """
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: round_significant(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_significant(v, digits) for v in value]
    if isinstance(value, np.ndarray):
        return round_significant(value.tolist(), digits)
    if isinstance(value, np.generic):
        return round_significant(value.item(), digits)
    return value


def write_json(path: str | os.PathLike, obj: Any, *, digits: int | None = None, compact: bool = False) -> pathlib.Path:
    """Write ``obj`` as JSON atomically (a reader never sees half a file); NaN and infinity as null.

    Args:
      digits: round floats to this many significant digits (committed study results stay small).
      compact: no indentation or spaces.
    """
    plain = json.loads(json.dumps(obj, default=_json_default))
    plain = round_significant(plain, digits) if digits is not None else _finite_or_none(plain)
    text = json.dumps(plain, allow_nan=False, **({"separators": (",", ":")} if compact else {"indent": 2}))
    from gamma_net_core.checkpoint import atomic_write

    return atomic_write(path, lambda f: f.write(text.encode("utf-8") + b"\n"))
