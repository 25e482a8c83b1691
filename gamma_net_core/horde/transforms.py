"""Transforms: what a signal's value becomes before it is a cumulant or a state input.

One registry (:data:`TRANSFORMS`), read by every consumer through :func:`transform_function`:
the Horde's rows, the offline sampler and the reflex's present-signal rules all compute a
question's value by the same function, so two nodes can never disagree on one question. The
built-in transforms, each with the keys it takes beside ``transform:`` in the questions file:

- ``identity``: the value.
- ``abs``: |value|.
- ``square``: value².
- ``indicator`` (``threshold``, required; ``direction``: ``above``, the default, or ``below``):
  1.0 where the value is past the threshold, else 0.0 ("how often": (1 - gamma) V is then about
  the chance of the event within tau steps).
- ``clip`` (``min`` and/or ``max``): the value limited to [min, max].
- ``inverse``: 1 / value (a distance turned into a nearness, largest close by).

A value that is not finite (NaN: no reading; an infinity that REP 117 could not read, see
:mod:`gamma_net_core.horde.fields`) has no transform: it comes out NaN, and so does a result
that is not finite (``inverse`` of 0). NaN is what every consumer takes as "no value this time"
(the Horde stops what reads it, naming the field; the reflex ignores it and its rule's input ages).

Adding one (docs/extending.md walks through it)::

    @register_transform("deadband", parameters={"width": REQUIRED})
    def deadband(value: float, *, width: float) -> float:
        return 0.0 if abs(value) < width else value
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gamma_net_core.horde.registry import Registry


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: A parameter's default that says the file must give it.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class TransformKind:
    """A registered transform.

    Attributes:
      name: its name in the questions file (``transform: NAME``).
      function: ``f(value, **parameters) -> float``, called with a finite value.
      parameters: (key, default) in declaration order; a default is a number, :data:`REQUIRED`,
        or a tuple of the strings allowed (its first the default).
      check: ``f(parameters) -> str | None``: what is wrong with a whole set of parameters (None: nothing).
    """

    name: str
    function: Callable[..., float]
    parameters: tuple[tuple[str, Any], ...] = ()
    check: Callable[[dict[str, Any]], str | None] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys this transform takes in the questions file."""
        return tuple(key for key, _ in self.parameters)


TRANSFORMS: Registry[TransformKind] = Registry("transform")


def register_transform(
    name: str,
    *,
    parameters: Mapping[str, Any] | None = None,
    check: Callable[[dict[str, Any]], str | None] | None = None,
):
    """Register ``f(value, **parameters) -> float`` as the transform ``name`` (a decorator).

    Args:
      name: the name a questions file gives as ``transform:``.
      parameters: {key: default}: a number, :data:`REQUIRED`, or a tuple of allowed strings
        (the first the default). The file gives them beside ``transform:``.
      check: what is wrong with a whole set of parameters, as a phrase (None: nothing).

    Raises:
      ValueError: the name is taken.
    """

    def add(function: Callable[..., float]) -> Callable[..., float]:
        TRANSFORMS.add(name, TransformKind(name, function, tuple((parameters or {}).items()), check))
        return function

    return add


def transform_parameters(name: Any, given: Mapping[str, Any], label: str) -> tuple[tuple[str, float | str], ...]:
    """The parameters of transform ``name`` from a file's keys, defaults filled in, checked.

    Args:
      name: the ``transform:`` value.
      given: the file's keys of this transform (others are the caller's to refuse).
      label: where in the file, for error lines (``question 'q'.cumulant``).

    Returns:
      ((key, value), ...) in the transform's declaration order.

    Raises:
      ValueError: ``{label}.transform`` not registered (naming the known ones), a parameter
        missing, not a finite number, or not one of its choices, in one line naming it.
    """
    kind = TRANSFORMS.check(name, f"{label}.transform")
    out: dict[str, Any] = {}
    for key, default in kind.parameters:
        if key not in given:
            if default is REQUIRED:
                raise ValueError(f"{label}.{key}: required by the {name} transform")
            out[key] = default[0] if isinstance(default, tuple) else default
            continue
        value = given[key]
        if isinstance(default, tuple):
            if value not in default:
                raise ValueError(f"{label}.{key}: must be one of {list(default)}; got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{label}.{key}: must be a finite number; got {value!r}")
        else:
            value = float(value)
        out[key] = value
    if kind.check is not None and (wrong := kind.check(out)):
        raise ValueError(f"{label}: {wrong}")
    return tuple(out.items())


def transform_function(name: str, parameters: tuple[tuple[str, Any], ...] = ()) -> Callable[[float], float]:
    """``value -> transformed value`` of a transform and its parameters; NaN in, or not finite out, is NaN.

    Raises:
      ValueError: an unknown transform, naming it and the known ones.
    """
    bound = functools.partial(TRANSFORMS[name].function, **dict(parameters))

    def apply(value: float) -> float:
        if not math.isfinite(value):
            return math.nan
        out = float(bound(value))
        return out if math.isfinite(out) else math.nan

    return apply


register_transform("identity")(lambda value: value)
register_transform("abs")(abs)
register_transform("square")(lambda value: value * value)


@register_transform("indicator", parameters={"threshold": REQUIRED, "direction": ("above", "below")})
def indicator(value: float, *, threshold: float, direction: str) -> float:
    past = value > threshold if direction == "above" else value < threshold
    return 1.0 if past else 0.0


def _clip_bounds(parameters: dict[str, Any]) -> str | None:
    if parameters["min"] == -math.inf and parameters["max"] == math.inf:
        return "the clip transform needs min, max or both"
    if not parameters["min"] < parameters["max"]:
        return f"clip's min {parameters['min']!r} must be below its max {parameters['max']!r}"
    return None


@register_transform("clip", parameters={"min": -math.inf, "max": math.inf}, check=_clip_bounds)
def clip(value: float, *, min: float, max: float) -> float:  # the file's keys
    return min if value < min else max if value > max else value


@register_transform("inverse")
def inverse(value: float) -> float:
    return 1.0 / value if value != 0.0 else math.inf
