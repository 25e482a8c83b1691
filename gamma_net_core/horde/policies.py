"""Target policies as data: a question's ``policy:`` and the importance ratio rho_t it gives each step.

A question with a policy is off-policy: it predicts what the cumulant would add up to if the
robot took the target's actions, from data the behaviour made. Each step the action A_t is read
from a topic field exactly as a cumulant is (field path, REP 117, transform), and

    rho_t = pi(A_t | S_t) / b(A_t | S_t),   clipped to [0, rho_max]

goes to the learner (TDC, :mod:`gamma_net_core.horde.gradient_td_kernels`). In the file::

    policy:
      action: {topic: /cmd, type: geometry_msgs/msg/Twist, field: angular.z}
      target: {kind: sign, sign: positive}          # pi: 1 where the action is > 0, else 0
      behaviour: {kind: matching}                   # b: how often the behaviour matches, counted
      rho_max: 10.0                                 # default 10
      secondary_step_size: 0.1                      # TDC's beta, divided by the active features like alpha
      secondary_regularization: 1.0                 # kappa, h's ridge (TDRC's); 0: TDC exactly

Target kinds (:data:`TARGETS`): deterministic ``sign`` (``sign: positive|negative``),
``interval`` (``low``, ``high``: low <= A <= high), ``fixed`` (``value``, ``within``: |A - value|
<= within), ``equals`` (``signal``: another field, e.g. the operator's command; ``within``), and
stochastic ``bins`` (``edges`` e_0 < ... < e_n, ``probabilities`` p_1..p_n summing to 1: pi of the
bin [e_i, e_{i+1}) the action falls in; actions below e_0 or above e_n count in the end bins).

Behaviour kinds (:data:`BEHAVIOURS`): ``field`` (``signal``: b(A_t | S_t) published by the behaviour
itself, in (0, 1]), ``matching`` (deterministic targets: b is the fraction of steps whose action
matched, so rho = 1 / b on a match and 0 otherwise) and ``counts`` (any target: b of each of the
target's bins, counted). Both counted estimates add one to every bin (Laplace), so b is never 0,
and count the step's own action before rho is formed. They estimate the behaviour's marginal
b(a), not b(a | s): exact where the behaviour chooses whatever the state (a random exploration),
biased towards the average where it does not; a behaviour that knows its probability should
publish it (``field``). The counts are the learner's state: checkpointed with its weights.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from gamma_net_core.horde.registry import Registry
from gamma_net_core.linear.settings import DEFAULT_SECONDARY_REGULARIZATION, check_ridge

#: rho_max when the file gives none: OffPolicyConfig's default.
RHO_MAX = 10.0
#: TDC's beta when the file gives none: OffPolicyConfig's default.
SECONDARY_STEP_SIZE = 0.1
#: kappa of h's ridge when the file gives none: OffPolicyConfig's default (its reasons there).
SECONDARY_REGULARIZATION = DEFAULT_SECONDARY_REGULARIZATION


class TargetKind(NamedTuple):
    """A target policy's kind: how its keys are read and what pi gives an action.

    Attributes:
      keys: the keys it takes beside ``kind``.
      parse: (mapping, label) -> parameters ((key, value), ...), one-line ValueError naming a bad key.
      n_bins: parameters -> how many bins the behaviour's counts keep (2 for a deterministic target: no, yes).
      bin_of: (parameters, action, reference) -> the action's bin.
      probability: (parameters, bin) -> pi of that bin.
      deterministic: pi is 0 or 1.
    """

    keys: frozenset
    parse: Callable[[Mapping[str, Any], str], tuple]
    n_bins: Callable[[dict], int]
    bin_of: Callable[[dict, float, float], int]
    probability: Callable[[dict, int], float]
    deterministic: bool = True


class BehaviourKind(NamedTuple):
    """A behaviour's kind: ``counted`` estimates b by counting the target's bins; else b is read from ``signal``."""

    counted: bool
    deterministic_only: bool = False


TARGETS: Registry[TargetKind] = Registry("target policy kind")
BEHAVIOURS: Registry[BehaviourKind] = Registry("behaviour kind")


def _number(value: Any, label: str, *, low: float = -math.inf, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{label}: must be a finite number; got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{label}: must be in [{low:g}, {high:g}]; got {value!r}")
    return float(value)


def _matched(parameters: dict, action: float, reference: float) -> int:
    return int(abs(action - parameters.get("value", reference)) <= parameters["within"])


def _within(m: Mapping[str, Any], label: str) -> float:
    return _number(m.get("within", 0.0), f"{label}.within", low=0.0)


def _sign(m, label):
    if m.get("sign") not in ("positive", "negative"):
        raise ValueError(f"{label}.sign: must be 'positive' or 'negative'; got {m.get('sign')!r}")
    return (("sign", m["sign"]),)


def _interval(m, label):
    low, high = (_number(m.get(k), f"{label}.{k}") for k in ("low", "high"))
    if not low <= high:
        raise ValueError(f"{label}: low {low!r} must not be above high {high!r}")
    return (("low", low), ("high", high))


def _bins(m, label):
    edges, probabilities = m.get("edges"), m.get("probabilities")
    if not isinstance(edges, list) or len(edges) < 3:
        raise ValueError(f"{label}.edges: a list of at least 3 increasing numbers is required; got {edges!r}")
    edges = [_number(e, f"{label}.edges") for e in edges]
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise ValueError(f"{label}.edges: must increase; got {edges!r}")
    if not isinstance(probabilities, list) or len(probabilities) != len(edges) - 1:
        raise ValueError(f"{label}.probabilities: one per bin ({len(edges) - 1}) is required; got {probabilities!r}")
    p = [_number(x, f"{label}.probabilities", low=0.0, high=1.0) for x in probabilities]
    if abs(sum(p) - 1.0) > 1e-6:
        raise ValueError(f"{label}.probabilities: must sum to 1; got {probabilities!r} (sum {sum(p):g})")
    return (("edges", tuple(edges)), ("probabilities", tuple(p)))


def _bin(parameters: dict, action: float, reference: float) -> int:
    edges = parameters["edges"]
    return int(min(max(np.searchsorted(edges, action, side="right") - 1, 0), len(edges) - 2))


def _fixed(m, label):
    return (("value", _number(m.get("value"), f"{label}.value")), ("within", _within(m, label)))


def _equals(m, label):
    return (("within", _within(m, label)),)  # the signal itself is read by parse_policy


def deterministic(keys, parse, matches) -> TargetKind:
    """A target that takes an action or not: bin 1 (pi 1) where ``matches(parameters, action, reference)``, else
    bin 0 (pi 0). An extension registers its own with ``TARGETS.add(name, deterministic(...))``."""
    return TargetKind(frozenset(keys), parse, lambda p: 2, lambda p, a, r: int(matches(p, a, r)), lambda p, b: float(b))


TARGETS.add("sign", deterministic({"sign"}, _sign, lambda p, a, r: a > 0.0 if p["sign"] == "positive" else a < 0.0))
TARGETS.add("interval", deterministic({"low", "high"}, _interval, lambda p, a, r: p["low"] <= a <= p["high"]))
TARGETS.add("fixed", deterministic({"value", "within"}, _fixed, _matched))
TARGETS.add("equals", deterministic({"signal", "within"}, _equals, _matched))
TARGETS.add("bins", TargetKind(frozenset({"edges", "probabilities"}), _bins, lambda p: len(p["probabilities"]), _bin,
                               lambda p, b: p["probabilities"][b], deterministic=False))  # fmt: skip
BEHAVIOURS.add("field", BehaviourKind(counted=False))
BEHAVIOURS.add("matching", BehaviourKind(counted=True, deterministic_only=True))
BEHAVIOURS.add("counts", BehaviourKind(counted=True))


@dataclass(frozen=True)
class Policy:
    """A question's target policy, and how the behaviour's probability of each action is known.

    Attributes:
      action: the signal A_t is read from (a :class:`~gamma_net_core.horde.questions.Transformed`).
      target: the target's kind in :data:`TARGETS`.
      parameters: the target's parameters, ((key, value), ...).
      behaviour: the behaviour's kind in :data:`BEHAVIOURS`.
      reference: the ``equals`` target's other signal (the action must equal it within ``within``), else None.
      probability: the ``field`` behaviour's signal b(A_t | S_t), else None.
      rho_max: rho is clipped to [0, rho_max] (a rare target action behind a small b would move the weights by
        rho normal steps; the clip bounds that at a bias towards b).
      secondary_step_size: TDC's beta for the question's secondary weights, divided by the active features and
        decayed like alpha.
      secondary_regularization: kappa, the ridge of the secondary weights on their active tiles (TDRC's, as
        :attr:`~gamma_net_core.linear.OffPolicyConfig.secondary_regularization`); 0 is TDC exactly.
    """

    action: Any
    target: str
    parameters: tuple
    behaviour: str
    reference: Any = None
    probability: Any = None
    rho_max: float = RHO_MAX
    secondary_step_size: float = SECONDARY_STEP_SIZE
    secondary_regularization: float = SECONDARY_REGULARIZATION

    @property
    def n_bins(self) -> int:
        return TARGETS[self.target].n_bins(dict(self.parameters))

    def signals(self) -> list:
        """The signals read per step: the action, then the reference and the behaviour's probability if any."""
        return [s for s in (self.action, self.reference, self.probability) if s is not None]


def parse_policy(m: Any, label: str, signal: Callable[[Any, str], Any]) -> Policy:
    """A :class:`Policy` from a question's ``policy:`` mapping; ``signal(mapping, label)`` reads a signal's keys.

    Raises:
      ValueError: one line naming ``label``'s key at fault (an unknown kind names the kinds there are).
    """
    if not isinstance(m, Mapping):
        raise ValueError(f"{label}: must be a mapping; got {m!r}")
    _known(m, {"action", "target", "behaviour", "rho_max", "secondary_step_size", "secondary_regularization"}, label)
    for key in ("action", "target", "behaviour"):
        if key not in m:
            raise ValueError(f"{label}.{key}: required")
    target_m, behaviour_m = _mapping(m["target"], f"{label}.target"), _mapping(m["behaviour"], f"{label}.behaviour")
    target = TARGETS.check(target_m.get("kind"), f"{label}.target.kind")
    _known(target_m, {"kind", *target.keys}, f"{label}.target")
    behaviour = BEHAVIOURS.check(behaviour_m.get("kind"), f"{label}.behaviour.kind")
    _known(behaviour_m, {"kind"} if behaviour.counted else {"kind", "signal"}, f"{label}.behaviour")
    if behaviour.deterministic_only and not target.deterministic:
        raise ValueError(f"{label}.behaviour.kind: 'matching' needs a deterministic target; a {target_m['kind']} "
                         "target's behaviour is 'counts' or 'field'")  # fmt: skip
    reference = probability = None
    if target_m["kind"] == "equals":
        if "signal" not in target_m:
            raise ValueError(f"{label}.target.signal: required by an equals target (the field to equal)")
        reference = signal(target_m["signal"], f"{label}.target.signal")
    if not behaviour.counted:
        if "signal" not in behaviour_m:
            raise ValueError(f"{label}.behaviour.signal: required by a field behaviour (b(A_t | S_t) in (0, 1])")
        probability = signal(behaviour_m["signal"], f"{label}.behaviour.signal")
    policy = Policy(
        action=signal(m["action"], f"{label}.action"),
        target=target_m["kind"],
        parameters=target.parse(target_m, f"{label}.target"),
        behaviour=behaviour_m["kind"],
        reference=reference,
        probability=probability,
        rho_max=_number(m.get("rho_max", RHO_MAX), f"{label}.rho_max", low=1.0, high=1e9),
        secondary_step_size=_number(
            m.get("secondary_step_size", SECONDARY_STEP_SIZE), f"{label}.secondary_step_size", low=0.0, high=1e3
        ),
        secondary_regularization=_number(
            m.get("secondary_regularization", SECONDARY_REGULARIZATION),
            f"{label}.secondary_regularization",
            low=0.0,
            high=10.0,
        ),
    )
    check_ridge(policy.secondary_step_size, policy.secondary_regularization, f"{label}.")
    return policy


def _mapping(m: Any, label: str) -> Mapping[str, Any]:
    if not isinstance(m, Mapping):
        raise ValueError(f"{label}: must be a mapping; got {m!r}")
    return m


def _known(m: Mapping[str, Any], known: set, label: str) -> None:
    unknown = sorted(set(m) - set(known))
    if unknown:
        raise ValueError(f"{label}: unknown keys {unknown}; known: {sorted(known)}")


class PolicyReadings(NamedTuple):
    """One step's readings per question [Q]: the action, the ``equals`` reference and the behaviour's
    probability (NaN where a question has none of that, or it could not be read)."""

    actions: np.ndarray
    references: np.ndarray
    probabilities: np.ndarray


class ImportanceRatios:
    """rho_t of every question from its policy and the step's readings; the counted behaviour estimates.

    Args:
      policies: one per question, None for an on-policy question (its rho is 1).

    Usage::

        ratios = ImportanceRatios([q.policy for q in spec.questions])
        rho = ratios(readings)          # [Q], counting the step's actions first
    """

    def __init__(self, policies: Sequence[Policy | None]) -> None:
        self.policies = tuple(policies)
        self.off_policy = np.array([p is not None for p in self.policies])
        self._kinds = [None if p is None else (TARGETS[p.target], dict(p.parameters)) for p in self.policies]
        n_bins = max([p.n_bins for p in self.policies if p is not None] + [2])
        #: [Q, n_bins] each question's count of actions per bin of its target (Laplace's one included).
        self.counts = np.zeros((len(self.policies), n_bins))
        for q, p in enumerate(self.policies):
            if p is not None and BEHAVIOURS[p.behaviour].counted:
                self.counts[q, : p.n_bins] = 1.0

    def __call__(self, readings: PolicyReadings, *, count: bool = True) -> np.ndarray:
        """[Q] rho of each question's action (1 on-policy; NaN where a reading it needs is not finite).

        Args:
          readings: the step's :class:`PolicyReadings`.
          count: add the step's actions to the counted estimates first (False: read only).
        """
        rho = np.ones(len(self.policies))
        for q, p in enumerate(self.policies):
            if p is None:
                continue
            rho[q] = self._rho(q, p, float(readings.actions[q]), float(readings.references[q]),
                               float(readings.probabilities[q]), count)  # fmt: skip
        return rho

    def _rho(self, q: int, p: Policy, action: float, reference: float, probability: float, count: bool) -> float:
        kind, parameters = self._kinds[q]
        if not math.isfinite(action) or (p.reference is not None and not math.isfinite(reference)):
            return math.nan
        b_bin = kind.bin_of(parameters, action, reference)
        pi = kind.probability(parameters, b_bin)
        if BEHAVIOURS[p.behaviour].counted:
            if count:
                self.counts[q, b_bin] += 1.0
            b = self.counts[q, b_bin] / self.counts[q, : p.n_bins].sum()
        elif not (math.isfinite(probability) and 0.0 < probability <= 1.0):
            return math.nan  # a behaviour that says it could not have taken its action: no step is learned from it
        else:
            b = probability
        return min(pi / b, p.rho_max)

    def behaviour_estimates(self) -> np.ndarray:
        """[Q, n_bins] the counted b of each bin (NaN for questions whose b is not counted, and beyond their bins)."""
        out = np.full(self.counts.shape, np.nan)
        for q, p in enumerate(self.policies):
            if p is not None and BEHAVIOURS[p.behaviour].counted:
                out[q, : p.n_bins] = self.counts[q, : p.n_bins] / self.counts[q, : p.n_bins].sum()
        return out


def policy_mapping(policy: Policy | None) -> dict | None:
    """A checkpoint's plain mapping of ``policy`` (None stays None): :func:`policy_from_mapping` reads it back."""
    return None if policy is None else dataclasses.asdict(policy)


def policy_from_mapping(m: Mapping[str, Any] | None) -> Policy | None:
    """The :class:`Policy` of :func:`policy_mapping`'s mapping (its lists read back as tuples)."""
    if m is None:
        return None
    from gamma_net_core.horde.questions import Transformed  # questions imports this module

    def signal(s):
        return None if s is None else Transformed(**{**s, "parameters": _tuples(s["parameters"])})

    return Policy(
        action=signal(m["action"]),
        target=m["target"],
        parameters=_tuples(m["parameters"]),
        behaviour=m["behaviour"],
        reference=signal(m.get("reference")),
        probability=signal(m.get("probability")),
        rho_max=float(m["rho_max"]),
        secondary_step_size=float(m["secondary_step_size"]),
        secondary_regularization=float(m.get("secondary_regularization", 0.0)),  # before the ridge: none
    )


def _tuples(x):
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x
