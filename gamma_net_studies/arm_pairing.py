"""The robot-arm study's data: a recording paired into transitions, and their exact returns.

Sample t of the recording gives the normalized joint positions (S_t) and the signal measured in
that message. The transition out of S_t is (S_t, C_{t+1}, S_{t+1}) with C_{t+1} the signal in
message t + 1 (``returns.py``'s convention, ``cumulants[t]`` is C_{t+1}): T samples give T - 1
transitions. Part of `gamma-net arm train` (:mod:`gamma_net_studies.arm_train`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Table 2's evaluation discounts.
EVAL_GAMMAS = (0.9, 0.9666, 0.98333, 0.99)
#: The unscored tail, in units of the largest evaluation tau.
TAIL_TAUS = 5


@dataclass(frozen=True)
class Transitions:
    """A recording as the learners see it: T samples, N = T - 1 transitions.

    Attributes:
      stamps: [N] s, the time stamp of S_t's message (the bag's clock).
      states_t: [N, n_inputs] S_t, inputs normalized to [0, 1].
      cumulants: [N] C_{t+1}, the signal measured in the sample after S_t.
      states_tp1: [N, n_inputs] S_{t+1}.
      episode_ends: [N] bool or None: S_{t+1} is its episode's last sample (the next starts an
        episode), so a true return from S_t stops there.
    """

    stamps: np.ndarray
    states_t: np.ndarray
    cumulants: np.ndarray
    states_tp1: np.ndarray
    episode_ends: np.ndarray | None = None

    @property
    def steps(self) -> int:
        return int(self.cumulants.shape[0])


def transitions(stamps, inputs, cumulants, episode_starts=None) -> Transitions:
    """Pair each sample's inputs with the next sample's cumulant (``JointData`` fields in, C_{t+1} out).

    Args:
      stamps: [T] s; inputs: [T, n] normalized; cumulants: [T], the signal measured in sample t.
      episode_starts: [T] bool or None; no transition is made into a sample that starts an episode
        (after a replay restart or a pause), as the predictor node learns none across it.

    Raises:
      ValueError: fewer than 2 samples, or arrays of different lengths.
    """
    stamps = np.asarray(stamps, dtype=np.float64)
    inputs = np.asarray(inputs, dtype=np.float64)
    cumulants = np.asarray(cumulants, dtype=np.float64)
    T = stamps.shape[0]
    if inputs.ndim != 2 or inputs.shape[0] != T or cumulants.shape != (T,):
        raise ValueError(f"stamps {stamps.shape}, inputs {inputs.shape}, cumulants {cumulants.shape} must share T")
    if T < 2:
        raise ValueError(f"a recording needs at least 2 usable samples for one transition; got {T}")
    keep = np.ones(T - 1, dtype=bool)
    ends = None
    if episode_starts is not None:
        starts = np.asarray(episode_starts, dtype=bool)
        if starts.shape != (T,):
            raise ValueError(f"episode_starts {starts.shape} must have the {T} samples' length")
        keep = ~starts[1:]
        # Transition t -> t+1 ends its episode when sample t+2 starts the next one.
        ends = np.append(starts[2:], False)[keep]
    return Transitions(
        stamps=stamps[:-1][keep],
        states_t=np.ascontiguousarray(inputs[:-1][keep]),
        cumulants=np.ascontiguousarray(cumulants[1:][keep]),
        states_tp1=np.ascontiguousarray(inputs[1:][keep]),
        episode_ends=ends,
    )


def true_returns(cumulants, gammas, episode_ends=None) -> np.ndarray:
    """G_t(gamma) from every transition's S_t, the recording's end as terminal: [N, G].

    ``cumulants[t]`` is C_{t+1}; G_t = C_{t+1} + gamma C_{t+2} + ..., cut after the last sample
    and after each episode's last sample (``episode_ends``, [N] bool, as :func:`transitions` gives).
    """
    from gamma_net_core.returns import discounted_returns

    return discounted_returns(cumulants, gammas, terminals=episode_ends)


def default_tail_steps(gammas=EVAL_GAMMAS) -> int:
    """Steps at the end left unscored: TAIL_TAUS times the largest tau (500 for gamma = 0.99)."""
    return round(TAIL_TAUS / (1.0 - max(gammas)))
