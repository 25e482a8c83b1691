"""One configuration, two doors: frozen dataclasses filled from YAML or from ROS parameters.

A learner's settings are a frozen dataclass whose fields are declared with
:func:`setting` (a default, a one-line help, an optional range or choices). The
`gamma-net` command fills it from a node's section of a YAML file in ``config/``
(:func:`load_section`); a node declares one ROS parameter per field with the same
help and range (``gamma_net_ros.params.declare_config``). So a study run offline and
the node on the robot learn with identical settings, and a checkpoint records the
configuration (:func:`to_mapping`) it was made with.

Field types must be ROS parameter types: bool, int, float, str, or a tuple of one
of those (a YAML list).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import yaml

C = TypeVar("C")


def setting(
    default: Any,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[Any] | None = None,
) -> Any:
    """A dataclass field with the metadata that both doors (YAML, ROS parameters) use.

    Args:
      default: the default value (a tuple for list-valued settings).
      help: what the value means, in which units, and where the default comes from.
      low, high: inclusive range for numbers (each element, for tuples).
      choices: the allowed values for a string setting.
    """
    metadata = {"help": help, "low": low, "high": high, "choices": tuple(choices) if choices else None}
    return dataclasses.field(default=default, metadata=metadata)


def fields_of(cls) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _check_value(cls_name: str, f: dataclasses.Field, value: Any) -> None:
    meta = f.metadata
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{cls_name}.{f.name} must be finite; got {value!r}")
        if meta.get("low") is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
            if not meta["low"] <= v <= meta["high"]:
                raise ValueError(f"{cls_name}.{f.name} must be in [{meta['low']}, {meta['high']}]; got {value!r}")
        if meta.get("choices") and v not in meta["choices"]:
            raise ValueError(f"{cls_name}.{f.name} must be one of {list(meta['choices'])}; got {value!r}")


def validate(config) -> None:
    """Raise ValueError naming the first field outside its range or choices."""
    for f in fields_of(type(config)):
        _check_value(type(config).__name__, f, getattr(config, f.name))


def _coerce(f: dataclasses.Field, value: Any, cls_name: str) -> Any:
    """YAML and ROS give lists and ints where the dataclass wants tuples and floats."""
    default = f.default
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{cls_name}.{f.name} must be a list; got {value!r}")
        kind = type(default[0]) if default else None
        return tuple(float(v) if kind is float and isinstance(v, int) and not isinstance(v, bool) else v for v in value)
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if default is not dataclasses.MISSING and default is not None and type(value) is not type(default):
        raise ValueError(f"{cls_name}.{f.name} must be {type(default).__name__}; got {value!r}")
    return value


def from_mapping(cls: type[C], mapping: Mapping[str, Any], *, where: str = "") -> C:
    """Build ``cls`` from a mapping (e.g. a YAML section), refusing unknown keys.

    Raises:
      ValueError: an unknown key, a value of the wrong type, or out of range; the
        message names the key and, with ``where``, the file it came from.
    """
    names = {f.name: f for f in fields_of(cls)}
    unknown = sorted(set(mapping) - set(names))
    suffix = f" (in {where})" if where else ""
    if unknown:
        raise ValueError(f"unknown {cls.__name__} settings {unknown}{suffix}; known: {sorted(names)}")
    try:
        values = {k: _coerce(names[k], v, cls.__name__) for k, v in mapping.items()}
        config = cls(**values)
        validate(config)
    except ValueError as exc:
        raise ValueError(f"{exc}{suffix}") from None
    return config


def to_mapping(config) -> dict[str, Any]:
    """The configuration as plain JSON/YAML types (tuples become lists)."""
    return {
        f.name: (list(v) if isinstance(v := getattr(config, f.name), tuple) else v) for f in fields_of(type(config))
    }


class _UniqueKeys:
    """Refuses a key given twice in one mapping (else the last silently wins)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen and key != "<<":
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice: the reference, whose errors name what is wrong."""


# libyaml parses 3-4 times faster (a 20,000-rule file: 2.2 s against 7.3 s), but says less when the text is
# broken ("found undefined alias", not which), so a document it refuses is read again by the reference.
_FastUniqueKeyLoader = (
    type("_FastUniqueKeyLoader", (_UniqueKeys, yaml.CSafeLoader), {}) if yaml.__with_libyaml__ else None
)


def safe_load(text: str) -> Any:
    """``yaml.safe_load``, except that a key given twice in one mapping is an error (yaml.YAMLError)."""
    if _FastUniqueKeyLoader is not None:
        try:
            return yaml.load(text, Loader=_FastUniqueKeyLoader)  # a SafeLoader: plain data only
        except yaml.YAMLError:
            pass  # the reference's error below
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: plain data only


def _yaml_error(exc: yaml.YAMLError) -> str:
    """Where and what, in one line: ``at line L, column C: problem (context from line K)``."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    opened = f" ({context} from line {start.line + 1})" if context and start is not None else ""
    return f"{where}: {problem}{opened}"


def read_document(source: str | pathlib.Path | Mapping[str, Any], *, kind: str) -> tuple[Any, str]:
    """A YAML file's document (or an already-parsed mapping) and the name its errors start with.

    Args:
      source: a path to a YAML file, or the mapping itself.
      kind: what the file holds ("questions", "rules"): names a missing file and a mapping.

    Raises:
      FileNotFoundError: no such file.
      ValueError: one line naming the file, when it is not valid YAML.
    """
    if isinstance(source, Mapping):
        return dict(source), kind
    path = pathlib.Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no {kind} file {path}")
    try:
        return safe_load(path.read_text()), str(path)
    except UnicodeDecodeError as exc:  # its own message names a codec and a byte, not the file
        raise ValueError(f"{path}: not a text (UTF-8) file: byte {exc.start} is {exc.object[exc.start]:#04x}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML{_yaml_error(exc)}") from None


def load_section(path: str | pathlib.Path, node: str, prefix: str | None = None) -> dict[str, Any]:
    """The ``node: ros__parameters:`` section of a ROS 2 parameter file, optionally one nested group.

    Args:
      path: a YAML file as `--ros-args --params-file` takes it.
      node: the node name at the top of the section (``/**`` sections are merged in first).
      prefix: a nested group inside ``ros__parameters`` (e.g. ``"learner"``).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no parameter file {path}")
    try:
        document = safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML{_yaml_error(exc)}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a mapping of node names, got {type(document).__name__}")
    params: dict[str, Any] = {}
    for key in ("/**", node, f"/{node}"):
        section = document.get(key)
        if section is not None:
            if "ros__parameters" not in section:
                raise ValueError(f"{path}: section {key!r} has no 'ros__parameters'")
            params.update(section["ros__parameters"] or {})
    if not params and node not in document:
        raise ValueError(f"{path}: no section for node {node!r}; sections: {sorted(document)}")
    if prefix is not None:
        group = params.get(prefix, {})
        if not isinstance(group, dict):
            raise ValueError(f"{path}: {node}.{prefix} must be a mapping")
        return dict(group)
    return params


def load_config(cls: type[C], path: str | pathlib.Path, node: str, prefix: str | None = None) -> C:
    """``cls`` filled from a node's section of a YAML parameter file (missing keys keep defaults)."""
    return from_mapping(
        cls, load_section(path, node, prefix), where=f"{path}:{node}" + (f".{prefix}" if prefix else "")
    )
