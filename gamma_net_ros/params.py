"""Declaring node parameters with descriptors and ranges, in one line each.

Every parameter a node reads is declared here with a description and, for numbers,
a range, so `ros2 param describe` documents it and out-of-range values from YAML
or `ros2 param set` are refused by rclpy before the node sees them. A value rclpy
refuses at start becomes a ValueError naming the parameter and the value.

An integer where a float is declared (``-p rate:=6``, ``publish_timescales: [1, 2]``,
``ros2 param set /bag_player rate 2``) is taken as that float, as users type it: the
start-up value is converted before it is declared, and a pre-set callback converts
values set at run time, so the float range still applies.

:func:`unknown_parameters` finds the keys a node's own YAML section or ``-p`` gives that
the node does not declare (a typo such as ``learner.step_sze``), which
:func:`gamma_net_ros.node_main.run_node` refuses, as ``gamma-net`` refuses unknown keys
of the same file. :func:`mistyped_overrides` finds the ``-p`` values of another type than the
parameter they set: rcl keeps the params file's value in that case (``-p max_gap:=fast`` next
to a file giving ``max_gap: 1.0`` ran with 1.0), so they are refused by name instead.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from gamma_net_core.config import fields_of, from_mapping

#: Declared type -> the integer type a user may give instead.
_FLOAT_FROM_INT = {
    ParameterType.PARAMETER_DOUBLE: Parameter.Type.INTEGER,
    ParameterType.PARAMETER_DOUBLE_ARRAY: Parameter.Type.INTEGER_ARRAY,
}
_TYPE_WORDS = {
    Parameter.Type.BOOL: "a bool",
    Parameter.Type.INTEGER: "an integer",
    Parameter.Type.DOUBLE: "a float",
    Parameter.Type.STRING: "a string",
    Parameter.Type.BYTE_ARRAY: "a byte array",
    Parameter.Type.BOOL_ARRAY: "a bool list",
    Parameter.Type.INTEGER_ARRAY: "an integer list",
    Parameter.Type.DOUBLE_ARRAY: "a float list",
    Parameter.Type.STRING_ARRAY: "a string list",
}

C = TypeVar("C")


def declare(
    node: Node,
    name: str,
    default: Any,
    description: str,
    *,
    low: float | None = None,
    high: float | None = None,
    read_only: bool = False,
    constraints: str = "",
) -> Any:
    """Declare ``name`` on ``node`` and return its value (the YAML's, else ``default``).

    Args:
      low, high: inclusive range for an int or float parameter (both or neither).
      read_only: the value is fixed once the node is up (e.g. a serial port).
      constraints: a human-readable note on valid values beyond the range.

    A ``default`` that is a ``Parameter.Type`` (``Parameter.Type.STRING_ARRAY``) declares a parameter
    of that type with no value: a list with no default, which ``[]`` cannot type.

    Returns:
      The parameter's value at start (None if a typed parameter without default was not given).

    Raises:
      ValueError: the start-up value is of another type or out of range, naming both.
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only, additional_constraints=constraints)
    if (low is None) != (high is None):
        raise ValueError(f"parameter {name!r}: give both low and high, or neither")
    if low is not None:
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            raise ValueError(f"parameter {name!r}: a range needs an int or float default, got {default!r}")
        if isinstance(default, int):
            descriptor.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=0)]
        else:
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
            ]
    _accept_integers_as_floats(node)
    kind = default if isinstance(default, Parameter.Type) else Parameter.Type.from_parameter_value(default)
    overrides = node._parameter_overrides  # rclpy keeps the start-up values here; no public accessor
    given = overrides.get(name)
    if given is not None and _FLOAT_FROM_INT.get(kind.value) == given.type_:
        overrides[name] = _as_float(given)
    try:
        return node.declare_parameter(name, default, descriptor).value
    except InvalidParameterTypeException:
        value = overrides[name].value
        expected = _TYPE_WORDS.get(kind, kind.name)
        raise ValueError(
            f"parameter {name} must be {expected}; got {_shown(value)} ({_TYPE_WORDS.get(overrides[name].type_, '?')})"
        ) from None
    except InvalidParameterValueException:
        value = overrides[name].value
        where = f" [{low!r}, {high!r}]" if low is not None else ""
        raise ValueError(f"parameter {name} must be in{where or ' its allowed range'}; got {_shown(value)}") from None


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if not isinstance(value, (bool, int, float)) and hasattr(value, "__len__"):
        return repr(list(value))
    return repr(value)


def _as_float(parameter: Parameter) -> Parameter:
    if parameter.type_ == Parameter.Type.INTEGER:
        return Parameter(parameter.name, Parameter.Type.DOUBLE, float(parameter.value))
    return Parameter(parameter.name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in parameter.value])


def _accept_integers_as_floats(node: Node) -> None:
    """Once per node: a pre-set callback that turns an integer given for a float parameter into the float."""
    if getattr(node, "_gamma_net_floats_from_ints", False):
        return
    node._gamma_net_floats_from_ints = True

    def convert(parameters: list[Parameter]) -> list[Parameter]:
        converted = []
        for p in parameters:
            if node.has_parameter(p.name):
                declared = node.describe_parameter(p.name).type
                if _FLOAT_FROM_INT.get(declared) == p.type_:
                    p = _as_float(p)
            converted.append(p)
        return converted

    node.add_pre_set_parameters_callback(convert)


def declare_config(node: Node, cls: type[C], prefix: str, *, read_only: bool = True) -> C:
    """Declare one parameter per field of config dataclass ``cls`` (``prefix.field``) and build it.

    The description, range and choices come from the field's :func:`gamma_net_core.config.setting`,
    so `ros2 param describe` shows what the YAML and the `gamma-net` command document.

    Raises:
      ValueError: a value outside its range or choices, naming the parameter.
    """
    values = {}
    for f in fields_of(cls):
        meta = f.metadata
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        constraints = f"one of {list(meta['choices'])}" if meta.get("choices") else ""
        ranged = meta.get("low") is not None and not isinstance(default, (list, bool, str))
        values[f.name] = declare(
            node,
            f"{prefix}.{f.name}",
            default,
            meta.get("help", ""),
            low=meta["low"] if ranged else None,
            high=meta["high"] if ranged else None,
            read_only=read_only,
            constraints=constraints,
        )
    return from_mapping(cls, values, where=f"parameters {prefix}.*")


#: The flags rcl takes after ``--ros-args`` that have a value, and those that have none.
ROS_FLAGS_WITH_VALUE = (
    "--params-file",
    "-p",
    "--param",
    "-r",
    "--remap",
    "-e",
    "--enclave",
    "--log-level",
    "--log-config-file",
    "--log-file-name",
)
ROS_FLAGS = ROS_FLAGS_WITH_VALUE + tuple(
    f"--{state}-{what}-logs" for state in ("enable", "disable") for what in ("rosout", "stdout", "external-lib")
)


class RosArguments(NamedTuple):
    """What a process's ``--ros-args ... [--]`` sections hold."""

    #: the ``--params-file`` paths
    files: list[pathlib.Path]
    #: the ``-p``/``--param`` assignments (``key:=value``, ``node:key:=value``)
    assignments: list[str]
    #: tokens rcl does not take there (a mistyped flag such as ``--params_file``)
    unknown: list[str]


def ros_arguments(argv: Sequence[str]) -> RosArguments:
    """The parameter files, assignments and unknown tokens among ``argv``'s ``--ros-args``."""
    files, assignments, unknown = [], [], []
    inside, i = False, 0
    while i < len(argv):
        token = argv[i]
        if token == "--ros-args":
            inside = True
        elif token == "--":
            inside = False
        elif inside and token in ROS_FLAGS_WITH_VALUE:
            i += 1
            if i < len(argv) and token == "--params-file":
                files.append(pathlib.Path(argv[i]))
            elif i < len(argv) and token in ("-p", "--param"):
                assignments.append(argv[i])
        elif inside and token not in ROS_FLAGS:
            unknown.append(token)
        i += 1
    return RosArguments(files, assignments, unknown)


def read_params_file(path: pathlib.Path) -> dict:
    """A ``--params-file`` as a mapping of sections; ValueError naming the file if it is missing or broken."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"parameter file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"parameter file {path} is not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    if document is None:
        return {}
    if not isinstance(document, dict) or not all(
        isinstance(section, dict) and isinstance(section.get("ros__parameters", {}), dict)
        for section in document.values()
    ):
        raise ValueError(f"parameter file {path} must map node names to {{ros__parameters: {{...}}}}")
    return document


def _flatten(mapping: dict, prefix: str = "") -> Iterable[str]:
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{name}.")
        else:
            yield name


def unknown_parameters(node: Node, argv: Sequence[str]) -> list[tuple[str, str]]:
    """Keys given to ``node`` by name that it does not declare: ``(key, where)`` pairs.

    A key counts when it is in a section named after the node (``predictor:``, ``/predictor:``
    or its fully qualified name) or in a ``-p`` meant for it. Wildcard sections (``/**``) are
    shared by several nodes, each taking what it declares, so their keys are not checked.
    """
    files, assignments, _ = ros_arguments(argv)
    names = {node.get_name(), node.get_fully_qualified_name().lstrip("/")}
    unknown = []
    for path in files:
        for section, content in read_params_file(path).items():
            if str(section).lstrip("/") in names:
                for key in _flatten(content.get("ros__parameters") or {}):
                    if not node.has_parameter(key):
                        unknown.append((key, f"{path}, section {section}"))
    for assignment in assignments:
        target, _, key = assignment.partition(":=")[0].rpartition(":")
        if (not target or target in names) and not node.has_parameter(key):
            unknown.append((key, f"-p {assignment}"))
    return unknown


def _assignment_value(text: str) -> Any:
    """A ``-p`` value as rcl types it: YAML scalars and flow sequences (``1``, ``1.0``, ``true``, ``[a, b]``)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def mistyped_overrides(node: Node, argv: Sequence[str]) -> list[str]:
    """One line for each ``-p`` meant for ``node`` whose value's type is not its declared parameter's.

    An integer for a float (or an integer list for a float list) is accepted, as :func:`declare` takes it.
    Keys the node does not declare are :func:`unknown_parameters`' to report.
    """
    assignments = ros_arguments(argv).assignments
    names = {node.get_name(), node.get_fully_qualified_name().lstrip("/")}
    problems = []
    for assignment in assignments:
        rule, _, text = assignment.partition(":=")
        target, _, key = rule.rpartition(":")
        if (target and target not in names) or not node.has_parameter(key):
            continue
        value = _assignment_value(text)
        if isinstance(value, list) and not value:
            continue  # an empty list has no element type to compare
        try:
            given = Parameter.Type.from_parameter_value(value)
        except TypeError:
            continue  # not a parameter value at all (e.g. a mapping): rcl refuses it itself
        declared = node.describe_parameter(key).type
        if declared in (given.value, ParameterType.PARAMETER_NOT_SET) or _FLOAT_FROM_INT.get(declared) == given:
            continue
        expected = _TYPE_WORDS.get(Parameter.Type(declared), str(declared))
        problems.append(
            f"parameter {key} must be {expected}; got {_shown(value)} ({_TYPE_WORDS[given]}) in -p {assignment}"
        )
    return problems


def section_applies(section: str, node_fqn: str) -> bool:
    """Whether a params file's section reaches the node whose fully qualified name is ``node_fqn``, as rcl matches.

    A section without a leading ``/`` is taken from the root (``predictor`` is ``/predictor``, which a
    node in a namespace never is); ``*`` stands for one name, ``/**`` for any number of them.
    """
    pattern = "/" + str(section).lstrip("/")
    regex = re.escape(pattern).replace(r"/\*\*", "(?:/[^/]+)*").replace(r"/\*", "/[^/]+")
    return re.fullmatch(regex, node_fqn) is not None


def unapplied_sections(node: Node, argv: Sequence[str]) -> list[str]:
    """One warning line per params file that gives ``node`` nothing, or a section meant for it that misses.

    rcl ignores a section whose name does not match the node's fully qualified name without a word:
    ``predictor:`` for a node started in a namespace, ``/robot/predictor:`` for one outside it. Sections
    for other nodes of a shared file are not reported, only those named after this node, and a file
    none of whose sections applies.
    """
    fqn = node.get_fully_qualified_name()
    lines = []
    for path in ros_arguments(argv).files:
        sections = [str(s) for s in read_params_file(path)]
        if not sections:
            continue
        applied = [s for s in sections if section_applies(s, fqn)]
        missed = [s for s in sections if s not in applied and s.rstrip("/").rsplit("/", 1)[-1] == node.get_name()]
        for section in missed:
            lines.append(
                f"parameter file {path}: section {section!r} does not apply to this node, {fqn} (a section "
                f"matches the full name; {fqn!r} or '/**/{node.get_name()}' would): its values are ignored"
            )
        if not applied and not missed:
            lines.append(
                f"parameter file {path} has no section for this node, {fqn} (its sections: {sections}): "
                "none of its values are used"
            )
    return lines
