"""Questions (GVFs) of a Horde, from YAML: what each predicts, on which state, with which learner.

A question's cumulant is a numeric field of a topic, transformed; its optional termination is a
condition on a signal that stops the return where it holds (the paper's state-dependent
continuation: gamma_t = 0 there), so "how much, until when". All questions share the state
inputs and one tile coder. The file::

    rate_hz: 10.0                 # ticks per second: the node's clock (or its tick_topic's expected rate)
    stale_after_s: 0.5            # a topic whose latest message is older than this is stale (default limit)
    topics:                       # optional, per topic: its own limit, or its expected rate (limit 3 / rate_hz)
      /battery: {stale_after_s: 3.0}
    seed: 0                       # draws the tile offsets
    publish_taus: [1, 10, 100]    # timescales the node publishes (besides the readouts)
    state:                        # inputs, normalized to [0, 1] by their declared range
      - {topic: /joint_states, type: sensor_msgs/msg/JointState, field: "position[shoulder]", low: -2.6, high: 2.6}
      - {topic: /scan, type: sensor_msgs/msg/LaserScan, field: "min(ranges[0:5])", transform: clip, max: 4.0,
         low: 0.0, high: 4.0}     # the nearest of the first five beams; inf (open space) reads as range_max
    extensions: [my_robot.signals]  # optional: modules registering their own transforms or readout kinds
    learner: {tilings: [100], memory_size: 2048, step_size: 0.1}     # GammaNetConfig, less the state ranges
    timescales: {n_gamma: 1, n_tau: 29, tau_max: 100}                # TimescaleSampling: drawn, so the learner's
                                                                     # timescale_input is both unless it says
                                                                     # (without draws: 16 knots, tau 1 to tau_max)
    adaptation: {method: autostep, meta_step_size: 0.01}             # AdaptationConfig (optional)
    readouts:                     # weightings over timescales, published like a timescale
      - {name: hyperbolic, kind: hyperbolic, k: 0.1}
      - {name: next_2s, kind: window, seconds: 2.0}
      - {name: in_1s, kind: forecast, seconds: 1.0}   # E[C] about 1 s ahead
    questions:
      - name: shoulder_speed
        cumulant: {topic: /joint_states, type: sensor_msgs/msg/JointState, field: "velocity[shoulder]", transform: abs}
      - name: until_elbow_passes
        cumulant: {topic: /joint_states, type: sensor_msgs/msg/JointState, field: "velocity[elbow]", transform: abs}
        termination: {topic: /joint_states, type: sensor_msgs/msg/JointState, field: "position[elbow]",
                      threshold: 1.2, direction: above}
      - name: shoulder_speed_if_up  # off-policy: a target policy (gamma_net_core.horde.policies, docs/off-policy.md)
        cumulant: {topic: /joint_states, type: sensor_msgs/msg/JointState, field: "velocity[shoulder]", transform: abs}
        policy:
          action: {topic: /joint_commands, type: sensor_msgs/msg/JointState, field: "velocity[shoulder]"}
          target: {kind: sign, sign: positive}    # or interval, fixed, equals (another field), bins
          behaviour: {kind: matching}             # or field (b published), counts
          rho_max: 10.0                           # rho = pi / b clipped to [0, rho_max]

Field paths index, slice and aggregate (``min(ranges[0:5])``) and read a range's infinities per
REP 117 (:mod:`gamma_net_core.horde.fields`); a signal's ``inf_as`` / ``minus_inf_as`` name what
``+inf`` / ``-inf`` read as instead. A cumulant or a state input takes a ``transform`` with the
keys it takes beside it (:mod:`gamma_net_core.horde.transforms`: ``identity``, ``abs``,
``square``, ``indicator`` with ``threshold`` and ``direction``, ``clip`` with ``min``/``max``,
``inverse``); a state input is transformed before it is normalized over [low, high]. Readout
kinds are a registry too (:mod:`gamma_net_core.horde.readouts`); ``extensions: [module, ...]``
imports modules that register more (docs/extending.md). Unknown keys and names are refused,
naming them; every error names the question (or section) and the key. :meth:`HordeSpec.topics`
gives {topic: type} to subscribe to.

Staleness is judged per topic (:meth:`HordeSpec.stale_after`): a topic's own ``stale_after_s``,
else three periods of its declared ``rate_hz`` (two messages missed in a row), else the file's
``stale_after_s``. A stale or silent topic stops only the questions that read it: its cumulant or
termination stops that question; a state input on it stops every question, since all questions
share the one state (:meth:`HordeSpec.question_topics`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gamma_net_core import config as config_lib
from gamma_net_core.horde.fields import FieldPath, parse_field
from gamma_net_core.horde.policies import Policy, parse_policy
from gamma_net_core.horde.transforms import TRANSFORMS, transform_function, transform_parameters
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.timescales import TimescaleSampling

DIRECTIONS = ("above", "below")
ADAPTATION_METHODS = ("constant", "autostep")
_TYPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*/(msg/)?[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class Signal:
    """A numeric field of a topic's messages: ``type`` e.g. ``sensor_msgs/msg/JointState``.

    Attributes:
      topic: the topic, absolute.
      type: its message type, ``pkg/msg/Type``.
      field: the field path (:mod:`gamma_net_core.horde.fields`: indexes, slices, aggregates).
      inf_as: what ``+inf`` reads as; None: REP 117's range maximum where the message has one.
      minus_inf_as: what ``-inf`` reads as; None: REP 117's range minimum where the message has one.
    """

    topic: str
    type: str
    field: str
    inf_as: float | None = None
    minus_inf_as: float | None = None

    @property
    def path(self) -> FieldPath:
        return parse_field(self.field)

    @property
    def source(self) -> tuple:
        """What the field reads: two signals of one source read the same number from a message."""
        return (self.topic, self.field, self.inf_as, self.minus_inf_as)

    def resolve(self, message) -> float:
        """The field's value in ``message``, infinities read per REP 117 (see :meth:`FieldPath.resolve`)."""
        return self.path.resolve(message, inf_as=self.inf_as, minus_inf_as=self.minus_inf_as)


@dataclass(frozen=True)
class Transformed(Signal):
    """A signal read through a registered transform (:mod:`gamma_net_core.horde.transforms`).

    Attributes:
      transform: the transform's name in :data:`~gamma_net_core.horde.transforms.TRANSFORMS`.
      parameters: its parameters, ((key, value), ...), as :func:`transform_parameters` gives them.
    """

    transform: str = "identity"
    parameters: tuple[tuple[str, float | str], ...] = ()

    @functools.cached_property
    def _function(self):
        return transform_function(self.transform, self.parameters)

    def apply(self, value: float) -> float:
        """The transformed value of a field's value; NaN where either is not finite."""
        return self._function(value)

    def read(self, message) -> float:
        """The signal's value in ``message``: the field read per REP 117, then transformed.

        The one reading of a question's signal: the Horde (its rows, the offline sampler) and the
        reflex's present-signal rules all come here, so they cannot disagree. NaN: no value.
        """
        return self._function(self.resolve(message))

    @property
    def threshold(self) -> float | None:
        """The indicator's threshold (None for another transform)."""
        return dict(self.parameters).get("threshold")

    @property
    def direction(self) -> str | None:
        """The indicator's direction (None for another transform)."""
        return dict(self.parameters).get("direction")


@dataclass(frozen=True)
class Cumulant(Transformed):
    """The signal a question predicts the discounted sum of, after ``transform``."""


@dataclass(frozen=True)
class Termination(Signal):
    """Where the signal is ``above``/``below`` ``threshold``, the return stops (continuation 0)."""

    threshold: float = 0.0
    direction: str = "above"

    def holds(self, value: float) -> bool:
        return value > self.threshold if self.direction == "above" else value < self.threshold

    def continuation(self, value: float) -> float:
        """0.0 where the termination holds, else 1.0."""
        return 0.0 if self.holds(value) else 1.0


@dataclass(frozen=True)
class StateInput(Transformed):
    """A state input: the field, transformed, then normalized to [0, 1] over [low, high] (clipped)."""

    low: float = 0.0
    high: float = 1.0


@dataclass(frozen=True)
class Question:
    """One GVF: a cumulant, an optional termination and an optional target policy (None: the behaviour's own)."""

    name: str
    cumulant: Cumulant
    termination: Termination | None = None
    policy: Policy | None = None

    def signals(self) -> list[Signal]:
        """What the question reads per step: its cumulant, termination and policy's signals."""
        own = [self.cumulant] + ([self.termination] if self.termination is not None else [])
        return own + (self.policy.signals() if self.policy is not None else [])


@dataclass(frozen=True)
class Readout:
    """A weighting over timescales read from each question's Γ-net (see :mod:`gamma_net_core.horde.readouts`).

    ``hyperbolic``: sum_t C_{t+1} gamma_max^t / (1 + k t) (Fedus et al. 2019, cut at the longest
    trained gamma), k per step; ``window``: about the sum of the cumulants over the next ``seconds``
    (``seconds * rate_hz`` steps); ``forecast``: the expected cumulant about ``seconds`` ahead,
    E[C_{t+k}] with k = round(seconds * rate_hz), averaged over a kernel about k steps wide.
    """

    name: str
    kind: str
    k: float = 0.1
    seconds: float = 1.0
    n_gammas: int = 32


@dataclass(frozen=True)
class AdaptationConfig:
    """Step sizes: the learner's constant alpha, or Autostep (Mahmood et al. 2012) per question and feature."""

    method: str = config_lib.setting("constant", "constant alpha, or autostep", choices=ADAPTATION_METHODS)
    meta_step_size: float = config_lib.setting(0.01, "Autostep's mu, the step size of log alpha", low=0.0, high=1.0)
    trace_tau: float = config_lib.setting(
        10_000.0, "Autostep's tau: steps over which its normalizer v decays", low=1.0, high=1e12
    )


@dataclass(frozen=True)
class HordeSpec:
    """Everything a Horde learner and its node need, from :func:`load_questions`."""

    questions: tuple[Question, ...]
    state: tuple[StateInput, ...]
    learner: GammaNetConfig
    timescales: TimescaleSampling
    adaptation: AdaptationConfig = AdaptationConfig()
    readouts: tuple[Readout, ...] = ()
    rate_hz: float = 10.0
    stale_after_s: float = 0.5
    seed: int = 0
    publish_taus: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
    topic_stale_after_s: Mapping[str, float] = dataclasses.field(default_factory=dict)  # the topics: section

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.questions)

    def topics(self) -> dict[str, str]:
        """{topic: message type} of every signal (state, cumulants, terminations)."""
        out: dict[str, str] = {}
        for s in self.signals():
            out.setdefault(s.topic, s.type)
        return out

    def stale_after(self, topic: str) -> float:
        """Seconds after which ``topic``'s latest message is stale: its own limit, else the file's."""
        return self.topic_stale_after_s.get(topic, self.stale_after_s)

    def state_topics(self) -> set[str]:
        """The topics of the state inputs: one of them stale stops every question (they share the state)."""
        return {s.topic for s in self.state}

    def question_topics(self) -> list[set[str]]:
        """Per question, the topics its cumulant, termination and policy read (the state's are everyone's)."""
        return [{s.topic for s in q.signals()} for q in self.questions]

    def signals(self) -> list[Signal]:
        """Every signal read per step: the state inputs, then each question's cumulant, termination and policy's."""
        out: list[Signal] = list(self.state)
        for q in self.questions:
            out.extend(q.signals())
        return out

    @property
    def policies(self) -> tuple[Policy | None, ...]:
        """Each question's target policy (None: on-policy)."""
        return tuple(q.policy for q in self.questions)

    def readout(self, name: str) -> Readout:
        for r in self.readouts:
            if r.name == name:
                return r
        raise ValueError(f"no readout {name!r}; readouts: {[r.name for r in self.readouts]}")


_TOP = {
    "questions",
    "state",
    "learner",
    "timescales",
    "adaptation",
    "readouts",
    "rate_hz",
    "stale_after_s",
    "seed",
    "publish_taus",
    "topics",
    "extensions",
}


def load_questions(source: str | pathlib.Path | Mapping[str, Any]) -> HordeSpec:
    """A :class:`HordeSpec` from a YAML file or an already-parsed mapping.

    Raises:
      FileNotFoundError: no such file.
      ValueError: one line naming the file, the question or section, and the key at fault.
    """
    doc, where = config_lib.read_document(source, kind="questions")
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: expected a mapping with 'questions' and 'state'; got {type(doc).__name__}")
    try:
        return _spec(doc)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _spec(doc: Mapping[str, Any]) -> HordeSpec:
    _known(doc, _TOP, "top level")
    _import_extensions(doc.get("extensions", []))
    for key in ("questions", "state"):
        if not isinstance(doc.get(key), list) or not doc[key]:
            raise ValueError(f"{key}: a non-empty list is required")
    state = tuple(_state_input(i, m) for i, m in enumerate(doc["state"]))
    learner_map = _mapping(doc.get("learner", {}), "learner")
    for key in ("state_low", "state_high"):
        if key in learner_map:
            raise ValueError(f"learner.{key}: state ranges come from each state input's low and high")
    # A Horde's kernels have only the bias of the scaled output f = (1 - gamma) V, which a short timescale's noise
    # moves the long timescales' values by up to tau times (docs/choosing-settings.md): no bias unit unless the
    # file asks for one, and that one is the scaled output's.
    defaults = {"bias": False} if "bias" not in learner_map else {"bias_unit": "scaled"}
    timescales_map = _mapping(doc.get("timescales", {}), "timescales")
    timescales = _config(TimescaleSampling, timescales_map, "timescales")
    if "timescale_input" not in learner_map:
        defaults.update(_coding_for(timescales_map, learner_map, timescales))
    learner = _config(
        GammaNetConfig,
        {
            **defaults,
            **learner_map,
            "state_low": [s.low for s in state],
            "state_high": [s.high for s in state],
        },
        "learner",
    )
    adaptation = _config(AdaptationConfig, _mapping(doc.get("adaptation", {}), "adaptation"), "adaptation")
    questions = tuple(_question(i, m) for i, m in enumerate(doc["questions"]))
    _unique([q.name for q in questions], "questions")
    rate_hz = _number(doc.get("rate_hz", 10.0), "rate_hz", low=1e-3, high=1e4)
    readouts_doc = doc.get("readouts", [])
    if not isinstance(readouts_doc, list):
        raise ValueError("readouts: must be a list")
    readouts = tuple(_readout(i, m, rate_hz, timescales) for i, m in enumerate(readouts_doc))
    _unique([r.name for r in readouts], "readouts")
    taus = doc.get("publish_taus", list(HordeSpec.publish_taus))
    if not isinstance(taus, list) or not taus:
        raise ValueError(f"publish_taus: must be a non-empty list of taus >= 1; got {taus!r}")
    stale_after_s = _number(doc.get("stale_after_s", 0.5), "stale_after_s", low=1e-6, high=1e6)
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: must be an integer >= 0; got {seed!r}")
    return HordeSpec(
        questions=questions,
        state=state,
        learner=learner,
        timescales=timescales,
        adaptation=adaptation,
        readouts=readouts,
        rate_hz=rate_hz,
        stale_after_s=stale_after_s,
        seed=seed,
        publish_taus=tuple(_number(t, "publish_taus", low=1.0, high=1e9) for t in taus),
        topic_stale_after_s=_topic_limits(doc.get("topics", {}), {s.topic for s in (*state, *_signals(questions))}),
    )


def _import_extensions(names: Any) -> None:
    """Import the modules that register the file's own transforms, aggregates or readout kinds (docs/extending.md)."""
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError(f"extensions: must be a list of module names; got {names!r}")
    for name in names:
        try:
            importlib.import_module(name.strip())
        except Exception as exc:  # an extension's own error, whatever it is, refuses the file in one line
            raise ValueError(f"extensions: cannot import {name!r} ({type(exc).__name__}: {exc})") from None


def _signals(questions: tuple[Question, ...]) -> list[Signal]:
    return [s for q in questions for s in q.signals()]


def _topic_limits(m: Any, read: set[str]) -> dict[str, float]:
    """{topic: stale_after_s} from the ``topics:`` section, each a topic the questions read."""
    limits = {}
    for topic, entry in _mapping(m, "topics").items():
        label = f"topics.{topic}"
        if topic not in read:
            raise ValueError(f"{label}: no signal reads topic {topic!r}; the questions read {sorted(read)}")
        entry = _mapping(entry, label)
        _known(entry, {"stale_after_s", "rate_hz"}, label)
        if "stale_after_s" in entry:
            limits[topic] = _number(entry["stale_after_s"], f"{label}.stale_after_s", low=1e-6, high=1e6)
        elif "rate_hz" in entry:
            limits[topic] = 3.0 / _number(entry["rate_hz"], f"{label}.rate_hz", low=1e-6, high=1e6)
    return limits


def _question(i: int, m: Any) -> Question:
    label = f"questions[{i}]"
    m = _mapping(m, label)
    name = m.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{label}.name: a name of letters, digits, _ . - is required; got {name!r}")
    label = f"question {name!r}"
    _known(m, {"name", "cumulant", "termination", "policy"}, label)
    if "cumulant" not in m:
        raise ValueError(f"{label}: cumulant is required")
    cumulant = Cumulant(**_transformed(m["cumulant"], f"{label}.cumulant", set()))
    termination = None
    if m.get("termination") is not None:
        t = _signal_fields(m["termination"], f"{label}.termination", {"threshold", "direction"})
        if "threshold" not in t:
            raise ValueError(f"{label}.termination.threshold: required")
        termination = Termination(**_threshold(t, f"{label}.termination"))
    policy = None
    if m.get("policy") is not None:
        policy = parse_policy(m["policy"], f"{label}.policy", lambda s, at: Transformed(**_transformed(s, at, set())))
    return Question(name=name, cumulant=cumulant, termination=termination, policy=policy)


def _threshold(m: dict[str, Any], label: str) -> dict[str, Any]:
    if "threshold" in m:
        m["threshold"] = _number(m["threshold"], f"{label}.threshold")
    direction = m.setdefault("direction", "above")
    if direction not in DIRECTIONS:
        raise ValueError(f"{label}.direction: must be one of {list(DIRECTIONS)}; got {direction!r}")
    return m


def _state_input(i: int, m: Any) -> StateInput:
    label = f"state[{i}]"
    s = _transformed(m, label, {"low", "high"})
    for key in ("low", "high"):
        if key not in s:
            raise ValueError(f"{label} ({s['field']}).{key}: required (the input's range, for normalization)")
        s[key] = _number(s[key], f"{label}.{key}")
    if not s["low"] < s["high"]:
        raise ValueError(f"{label} ({s['field']}): low {s['low']!r} must be below high {s['high']!r}")
    return StateInput(**s)


def _transformed(m: Any, label: str, extra: set[str]) -> dict[str, Any]:
    """A signal's keys with its transform's: ``transform`` and the parameters it takes, checked."""
    name = _mapping(m, label).get("transform", "identity")
    keys = TRANSFORMS.check(name, f"{label}.transform").keys
    s = _signal_fields(m, label, extra | {"transform", *keys})
    given = {key: s.pop(key) for key in keys if key in s}
    s["transform"] = name
    s["parameters"] = transform_parameters(name, given, label)
    return s


def _signal_fields(m: Any, label: str, extra: set[str]) -> dict[str, Any]:
    m = dict(_mapping(m, label))
    _known(m, {"topic", "type", "field", "inf_as", "minus_inf_as"} | extra, label)
    for key in ("topic", "type", "field"):
        if not isinstance(m.get(key), str) or not m[key].strip():
            raise ValueError(f"{label}.{key}: a non-empty string is required; got {m.get(key)!r}")
    if not m["topic"].startswith("/"):
        raise ValueError(f"{label}.topic: must be absolute (start with '/'); got {m['topic']!r}")
    if not _TYPE_NAME.match(m["type"]):
        raise ValueError(f"{label}.type: expected pkg/msg/Type; got {m['type']!r}")
    if "/msg/" not in m["type"]:
        pkg, name = m["type"].split("/")
        m["type"] = f"{pkg}/msg/{name}"
    try:
        parse_field(m["field"])
    except ValueError as exc:
        raise ValueError(f"{label}.field: {exc}") from None
    for key in ("inf_as", "minus_inf_as"):
        if key in m:
            m[key] = _number(m[key], f"{label}.{key}")
    return m


def _coding_for(timescales: dict, learner: dict, sampling: TimescaleSampling) -> dict:
    """How the timescale enters where the file's learner does not say, from its timescales: tiles over gamma and
    tau where Gamma_t is drawn (n_gamma or n_tau given, as every file did before knots were the default), else
    the knots, whose last is the file's tau_max unless the learner names its tau_scale (linear/knots.py)."""
    drawn = ("n_gamma" in timescales or "n_tau" in timescales) and timescales.get("knots", -1) in (-1, 0)
    if drawn or timescales.get("knots") == 0:
        return {"timescale_input": "both"}
    if "tau_scale" in learner or "tau_max" not in timescales:
        return {}
    return {"tau_scale": sampling.tau_max}


def _readout(i: int, m: Any, rate_hz: float, timescales: TimescaleSampling) -> Readout:
    # the kinds live with their weights; imported here, as readouts imports this module's Readout
    from gamma_net_core.horde.readouts import READOUT_KINDS

    label = f"readouts[{i}]"
    m = dict(_mapping(m, label))
    name = m.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{label}.name: a name of letters, digits, _ . - is required; got {name!r}")
    label = f"readout {name!r}"
    _known(m, {"name", "kind", "k", "seconds", "n_gammas"}, label)
    kind = READOUT_KINDS.check(m.get("kind"), f"{label}.kind")
    # A key of another kind would be ignored: its user would believe it set something.
    for key in ("k", "seconds"):
        if key in m and key not in kind.keys:
            why = kind.refusals.get(key, f"the {kind.name} readout takes {list(kind.keys)}, not {key!r}")
            raise ValueError(f"{label}.{key}: {why}")
    for key in kind.required:
        if key not in m:
            raise ValueError(f"{label}.{key}: required by a {kind.name} readout")
    values: dict[str, Any] = {"name": name, "kind": kind.name}
    if "k" in m:
        values["k"] = _number(m["k"], f"{label}.k", low=1e-6, high=1e6)
    if "seconds" in m:
        values["seconds"] = _number(m["seconds"], f"{label}.seconds", low=1e-6, high=1e9)
    if "n_gammas" in m:
        n = m["n_gammas"]
        if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 1024:
            raise ValueError(f"{label}.n_gammas: must be an integer in [2, 1024]; got {n!r}")
        values["n_gammas"] = n
    readout = Readout(**values)
    if kind.horizon and readout.seconds * rate_hz > timescales.tau_max:
        raise ValueError(
            f"{label}.seconds: {readout.seconds} s is {readout.seconds * rate_hz:g} steps at {rate_hz} Hz, beyond "
            f"timescales.tau_max {timescales.tau_max:g}: train longer timescales or shorten {kind.horizon}"
        )
    if kind.check is not None and (wrong := kind.check(readout, rate_hz)):
        raise ValueError(f"{label}.{wrong}")
    return readout


def _config(cls, mapping: Mapping[str, Any], label: str):
    try:
        return config_lib.from_mapping(cls, mapping)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{label}: {exc}") from None


def _mapping(m: Any, label: str) -> Mapping[str, Any]:
    if not isinstance(m, Mapping):
        raise ValueError(f"{label}: must be a mapping; got {m!r}")
    return m


def _known(m: Mapping[str, Any], known: set[str], label: str) -> None:
    unknown = sorted(set(m) - known)
    if unknown:
        raise ValueError(f"{label}: unknown keys {unknown}; known: {sorted(known)}")


def _unique(names: list[str], label: str) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise ValueError(f"{label}: name {n!r} appears twice")
        seen.add(n)


def _number(value: Any, label: str, *, low: float = -math.inf, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{label}: must be a finite number; got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{label}: must be in [{low:g}, {high:g}]; got {value!r}")
    return float(value)


def replace_learner(spec: HordeSpec, **changes: Any) -> HordeSpec:
    """``spec`` with learner settings changed (e.g. a study's step size)."""
    return dataclasses.replace(spec, learner=dataclasses.replace(spec.learner, **changes))
