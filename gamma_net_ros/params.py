"""Declaring node parameters with descriptors and ranges, in one line each.

Every parameter a node reads is declared here with a description and, for numbers,
a range, so `ros2 param describe` documents it and out-of-range values from YAML
or `ros2 param set` are refused by rclpy before the node sees them.
"""

from __future__ import annotations

from typing import Any, TypeVar

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node

from gamma_net_core.config import fields_of, from_mapping

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
    return node.declare_parameter(name, default, descriptor).value


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
