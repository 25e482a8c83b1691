"""The reflex study's "if the command passes" question: an off-policy Horde stepped in simulated time, and
what the long runs report of it (contact per window against the reactive rule, the prediction while a
rule holds).

A question of ``config/reflex_questions_if_passed.yaml`` asks for contact ahead *if the operator's
command passed unchanged*: its action is the command the reflex sent (``/joint_commands``), its target
"equal to what teleop sent" (``/joint_commands_in``), its behaviour counted (``matching``) and
clipped at ``rho_max: 1``. So rho = 1 on a step the command passed and 0 on a step the reflex
changed it: the rule's own holds teach that question nothing, where they teach the on-policy
question that contact stops coming.

The study's loop measures S_t, learns S_{t-1} -> S_t, lets the rules read the predictions at S_t, and
then sends A_t. ``HordeLearner.step`` takes the action read with the state (the node's tick reads the
latest command), which here is decided only after the prediction; :class:`OffPolicyLearning` therefore
forms rho_t once A_t is sent and weighs with it the transition A_t drives, S_t -> S_{t+1}.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.policies import PolicyReadings
from gamma_net_core.horde.questions import HordeSpec
from gamma_net_studies.reflex_realtime_stats import bootstrap_ratio

#: The topics the study simulates, which a question's policy may read: the arm's state, what the
#: operator's teleop sent (the reflex's input) and what the reflex sent on (the arm's command).
STATE_TOPIC, GIVEN_TOPIC, SENT_TOPIC = "/joint_states", "/joint_commands_in", "/joint_commands"


class OnPolicyLearning:
    """A Horde without target policies, stepped as the Horde node steps it."""

    off_policy = False

    def __init__(self, learner: HordeLearner) -> None:
        self.learner = learner
        self.rhos = None

    def learn(self, inputs, cumulants, continuations) -> None:
        """Learn the transition into ``inputs`` (S_t), then remember them."""
        self.learner.step(inputs, cumulants, continuations)

    def sent(self, state, given, command) -> None:
        """Nothing: an on-policy question's rho is 1 whatever was sent."""


class OffPolicyLearning:
    """A Horde with target policies: each transition learned with rho of the command that drove it.

    Args:
      learner: a Horde some of whose questions have a ``policy:``.
      spec: its questions.
      names: the joints, in the order of the commands :meth:`sent` takes.

    Raises:
      ValueError: one line naming a question whose policy reads a topic the study does not simulate.
    """

    off_policy = True

    def __init__(self, learner: HordeLearner, spec: HordeSpec, names) -> None:
        simulated = (STATE_TOPIC, GIVEN_TOPIC, SENT_TOPIC)
        for q in spec.questions:
            for signal in q.policy.signals() if q.policy is not None else ():
                if signal.topic not in simulated:
                    raise ValueError(
                        f"question {q.name!r}: its policy reads {signal.topic}; the study simulates {list(simulated)}"
                    )
        self.learner, self.spec, self.names = learner, spec, list(names)
        self.previous = None
        #: [Q] rho of the command sent at the latest state: it weighs the transition out of that state.
        self.rhos = None

    def learn(self, inputs, cumulants, continuations) -> None:
        """Learn S_{t-1} -> S_t (``inputs``) with rho of the command sent at S_{t-1}, then remember S_t."""
        if self.previous is not None and self.rhos is not None:
            self.learner.learn(self.previous, cumulants, inputs, continuations, rhos=self.rhos)
        self.previous = np.asarray(inputs, dtype=np.float64)
        self.rhos = None  # until a command is sent from this state, nothing may be learned out of it

    def sent(self, state, given, command) -> None:
        """The command ``command`` went out at the latest state, where the operator gave ``given``: its rho.

        Args:
          state: the latest state's message (``/joint_states``).
          given: the operator's joint velocities (``/joint_commands_in``).
          command: the reflex's (``/joint_commands``), the arm's command until the next step.
        """
        messages = {
            STATE_TOPIC: state,
            GIVEN_TOPIC: _command(self.names, given),
            SENT_TOPIC: _command(self.names, command),
        }
        out = np.full((3, len(self.spec.questions)), math.nan)
        for q, question in enumerate(self.spec.questions):
            if question.policy is None:
                continue
            signals = (question.policy.action, question.policy.reference, question.policy.probability)
            for i, signal in enumerate(signals):
                if signal is not None:
                    out[i, q] = signal.apply(signal.resolve(messages[signal.topic]))
        rhos = self.learner.ratios(PolicyReadings(*out))
        if not np.isfinite(rhos).all():
            q = int(np.flatnonzero(~np.isfinite(rhos))[0])
            raise ValueError(
                f"question {self.spec.names[q]!r}: rho not finite (an action or its reference is {out[:, q]})"
            )
        self.rhos = rhos


class Probe:
    """What a run traces of a prediction rule beyond its value: the watched question's, rho, and both at the
    state where the present intervention began.

    An intervention is a stretch of steps whose command the reflex changed. Its first state's
    prediction, recomputed each step with the weights as they are, shows what the intervention taught
    the question about that state, whatever the arm did meanwhile: the on-policy question learns that
    contact does not come (the reflex stops it), the "if the command passes" one learns nothing (rho 0).

    Args:
      learning: how the learner is stepped (:func:`learning_for`).
      rule: the prediction rule.
      spec: the learner's questions.
      watch: another question traced beside the rule's (None: none).
      joint: the joint whose command is compared.
    """

    #: The trace's keys, in the order :meth:`__call__` returns them.
    KEYS = ("watched", "rho", "anchored", "watched_anchored")

    def __init__(self, learning, rule, spec: HordeSpec, watch: str | None, joint: int) -> None:
        self.learning, self.tau, self.joint = learning, rule.tau, joint
        self.q = spec.names.index(rule.question)
        self.watched = None if watch is None else spec.names.index(watch)
        self.anchor = None

    def __call__(self, inputs, given, command) -> tuple[float, float, float, float]:
        """(watched, rho of the command sent, the rule's and the watched prediction at the intervention's start)."""
        learner, rhos = self.learning.learner, self.learning.rhos
        questions = [self.q] if self.watched is None else [self.q, self.watched]
        now = learner.predict(inputs, taus=[self.tau])[questions, 0] / self.tau
        rho = math.nan if rhos is None else float(rhos[self.q])
        if abs(given[self.joint] - command[self.joint]) <= 1e-9:
            self.anchor = None
            anchored = (math.nan, math.nan)
        else:
            self.anchor = inputs if self.anchor is None else self.anchor
            at = learner.predict(self.anchor, taus=[self.tau])[questions, 0] / self.tau
            anchored = (float(at[0]), float(at[1]) if self.watched is not None else math.nan)
        watched = float(now[1]) if self.watched is not None else math.nan
        return watched, rho, *anchored


def learning_for(learner: HordeLearner | None, spec: HordeSpec, names):
    """How the study steps ``learner``: :class:`OffPolicyLearning` where a question has a policy, else on-policy."""
    if learner is None:
        return None
    return OffPolicyLearning(learner, spec, names) if learner.off_policy else OnPolicyLearning(learner)


def _command(names, velocity) -> SimpleNamespace:
    """A JointState-like command, as teleop and the reflex publish one."""
    return SimpleNamespace(name=list(names), velocity=[float(v) for v in velocity], position=[], effort=[])


def holds(trace: dict, rate_hz: float, *, min_s: float = 0.2) -> dict:
    """What the first rule did in one run, and what its prediction did while the reflex changed the command.

    An intervention is a stretch of steps whose command the reflex changed (the operator pushing on
    while the rule holds). The on-policy question learns there that contact does not come (the rule
    stops it) and its prediction falls towards the release; the "if the command passes" question has
    rho 0 there and learns nothing.

    Args:
      trace: :func:`~gamma_net_studies.reflex_study.run_condition`'s.
      min_s: interventions shorter than this are left out of the ratios (too short to fall).

    Returns:
      ``on_fraction`` (of the run's time the rule was on), ``holds`` (stretches on) and ``hold_s`` (their
      mean length); ``changed_fraction`` (steps whose command the reflex changed) and ``interventions``
      (stretches of them at least ``min_s`` long); for the rule's prediction ``in_interventions`` (its
      mean over changed steps) and ``end_over_start`` (the median over interventions of its value at the
      intervention's first state, with the weights of its last step over those of its first:
      :class:`Probe`); with a watched question the same two with ``watched_`` before them.
    """
    on = np.asarray(trace["on"], dtype=bool)
    changed = np.abs(np.asarray(trace["given"]) - np.asarray(trace["command"])) > 1e-9
    on_starts, on_ends = _stretches(on)
    starts, ends = _stretches(changed)
    long = ends - starts + 1 >= max(1, round(min_s * rate_hz))
    starts, ends = starts[long], ends[long]
    out = {
        "on_fraction": float(on.mean()) if on.size else 0.0,
        "holds": int(on_starts.size),
        "hold_s": float((on_ends - on_starts + 1).mean() / rate_hz) if on_starts.size else 0.0,
        "changed_fraction": float(changed.mean()) if changed.size else 0.0,
        "interventions": int(starts.size),
    }
    for key, name in (("prediction", ""), ("watched", "watched_")):
        values = np.asarray(trace.get(key, []), dtype=float)
        anchored = np.asarray(trace.get(f"{name}anchored", []), dtype=float)
        if values.size == 0 or not np.isfinite(values).any():
            continue
        out[f"{name}in_interventions"] = float(values[changed].mean()) if changed.any() else math.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = anchored[ends] / anchored[starts]
        ratio = ratio[np.isfinite(ratio)]
        out[f"{name}end_over_start"] = float(np.median(ratio)) if ratio.size else math.nan
    return out


def _stretches(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last step of each run of True in ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return edges[::2], edges[1::2] - 1


def window_ratios(
    contact: dict[str, list[list[float]]], *, reference: str = "reactive", resamples: int = 10_000
) -> dict[str, dict]:
    """Contact per window against ``reference``'s: mean over seeds and a bootstrap 95 % interval of the ratio.

    Args:
      contact: {condition: [per seed: contact seconds in each window]}, every run the same windows.
      reference: the condition the others are divided by.

    Returns:
      {condition: {"mean": [s per window], "ratio": [bootstrap_ratio per window], "after_first":
      bootstrap_ratio of the contact summed over every window after the first}}; the interval is over
      seeds, unpaired (a seed's path differs between conditions once a reflex acts).
    """
    base = np.asarray(contact[reference], dtype=float)
    out = {}
    for condition, rows in contact.items():
        runs = np.asarray(rows, dtype=float)
        entry = {"mean": runs.mean(axis=0).round(4).tolist()}
        if condition != reference:
            entry["ratio"] = [
                bootstrap_ratio(runs[:, w], base[:, w], resamples=resamples) for w in range(runs.shape[1])
            ]
            entry["after_first"] = bootstrap_ratio(
                runs[:, 1:].sum(axis=1), base[:, 1:].sum(axis=1), resamples=resamples
            )
        out[condition] = entry
    return out


def describe(ratio: dict) -> str:
    """``0.18 (0.05 .. 0.40)``, or why the ratio is undefined."""
    if ratio["ratio"] is None:
        return f"- ({ratio['undefined']})"
    return f"{ratio['ratio']:.2f} ({ratio['low']:.2f} .. {ratio['high']:.2f})"


def plot_windows(path, windows: dict, window_s: float) -> None:
    """Each condition's contact per window over the reactive rule's, with its bootstrap 95 % interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    shown = [(c, e) for c, e in windows.items() if "ratio" in e and c != "none"]
    width = 0.8 / max(1, len(shown))
    for i, (condition, entry) in enumerate(shown):
        defined = [(w, r) for w, r in enumerate(entry["ratio"]) if r["ratio"] is not None]
        if not defined:
            continue
        x = np.array([w for w, _ in defined]) + (i - (len(shown) - 1) / 2) * width
        y = np.array([r["ratio"] for _, r in defined])
        low = y - np.array([r["low"] for _, r in defined])
        high = np.minimum(np.array([r["high"] for _, r in defined]), 10.0) - y
        ax.errorbar(x, y, yerr=[low, np.maximum(high, 0.0)], fmt="o", capsize=3, label=condition)
    n = len(next(iter(windows.values()))["mean"])
    ax.set_xticks(range(n), [f"{w * window_s / 60:g}-{(w + 1) * window_s / 60:g}" for w in range(n)])
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xlabel("window (simulated minutes)")
    ax.set_ylabel("contact / the reactive rule's")
    ax.legend(fontsize=8)
    ax.set_title("Contact per window against the reactive rule (mean over seeds, bootstrap 95 %)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
