"""Online learning from a stream of joint readings: what the predictor node runs per message.

:class:`OnlineGammaNet` joins the pieces a robot's stream needs and that a recording read
offline does not: joint selection and validation per message, pairing each reading with
the previous one into a transition (S_{t-1}, C_t, S_t), a fresh Gamma_t per step (with TD(lambda),
``learner.lam`` > 0, the sampling's fixed ladder then a draw, the traces cut at every episode start), episode
boundaries when time jumps back by more than ``max_gap`` (a bag played again) or stalls
longer than ``max_gap`` (a robot paused), a smaller step back skipped as a bad message (the
rule is :class:`~gamma_net_core.data.joints.JointSelector`'s, which the offline reader of
bags applies too), and a checkpoint that records every setting that gives the
weights their meaning (the joint normalization as well as the learner's).

Usage (the predictor node's callback, minus the messages)::

    online = OnlineGammaNet(joints=..., learner=..., timescales=..., rng=np.random.default_rng(seed))
    step = online.observe(stamp=t, names=msg.name, position=msg.position, velocity=msg.velocity, effort=msg.effort)
    if isinstance(step, Skip): ...             # counted in online.skips, never learned from
    values = online.predict(gammas)            # at the latest state, cumulant units

Checkpoint format: an ``.npz`` via :func:`gamma_net_core.checkpoint.save_npz`, kind
``"online_linear_gamma_net"``, version :data:`VERSION`; its configuration holds the
``joints``, ``learner``, ``timescales`` and ``max_gap`` settings; its arrays are the
learner's (see :mod:`gamma_net_core.linear`); its meta the counters.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numpy as np

from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_npz, save_npz
from gamma_net_core.config import from_mapping, to_mapping
from gamma_net_core.data.joints import DEFAULT_MAX_GAP, JointSample, JointsConfig, JointSelector, Skip
from gamma_net_core.linear import GammaNetConfig, LinearGammaNet, knots, uses_ladder
from gamma_net_core.linear.settings import saved_learner_mapping
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, validate_gammas

KIND = "online_linear_gamma_net"
#: 2: the learner's weights follow :mod:`gamma_net_core.linear` version 2 (f = (1 - gamma) V with loss scaling).
VERSION = 2


@dataclass(frozen=True)
class Step:
    """One accepted reading: the state it gave and whether a TD update was made from it."""

    sample: JointSample
    learned: bool  # False on the first reading of an episode (no previous state to pair with)
    new_episode: bool


class OnlineGammaNet:
    """A linear Γ-net learning online from joint readings, one message at a time.

    Args:
      joints: which joints are inputs and which signal is the cumulant.
      learner: the Γ-net's settings (state inputs already normalized to [0, 1] by ``joints``).
      timescales: how Gamma_t is drawn each step.
      rng: seeds the tile offsets and the Gamma_t draws.
      max_gap: seconds between readings, forward or back, beyond which the stream is treated as
        restarted (a new episode: nothing is learned across the gap); a step back of no more
        than this is a bad reading, skipped.
      learn: False to only predict (e.g. a frozen, deployed predictor).
    """

    def __init__(
        self,
        *,
        joints: JointsConfig,
        learner: GammaNetConfig,
        timescales: TimescaleSampling,
        rng: np.random.Generator,
        max_gap: float = DEFAULT_MAX_GAP,
        learn: bool = True,
        _net: LinearGammaNet | None = None,
    ) -> None:
        if len(joints.input_joints) != learner.n_state:
            raise ValueError(
                f"joints name {len(joints.input_joints)} inputs {list(joints.input_joints)} but the learner "
                f"expects {learner.n_state} state inputs"
            )
        if not max_gap > 0:
            raise ValueError(f"max_gap must be positive; got {max_gap!r}")
        knots.check_sampling(learner, timescales)
        self.joints = joints
        self.learner_config = learner
        self.timescales = timescales
        self.max_gap = float(max_gap)
        self.learning = learn
        self.selector = JointSelector(joints, max_gap=self.max_gap)
        self.net = _net if _net is not None else LinearGammaNet(learner, rng=rng)
        # In TD(lambda)'s backward view traces belong to fixed timescales: the ladder, then a draw (linear/traces.py).
        self.sampler = TimescaleSampler(timescales, rng, fixed=uses_ladder(learner))
        self.latest: JointSample | None = None
        self.episodes = 0
        self.td_errors: np.ndarray | None = None

    @property
    def cumulant_name(self) -> str:
        return self.joints.cumulant_name

    @property
    def update_count(self) -> int:
        return self.net.update_count

    @property
    def skips(self):
        return self.selector.skips

    @property
    def accepted(self) -> int:
        return self.selector.accepted

    def start_episode(self) -> None:
        """Forget the previous reading: the next one starts an episode (nothing learned across)."""
        self.latest = None
        self.selector.reset()
        self.net.reset_traces()

    def observe(self, *, stamp: float, names, position=(), velocity=(), effort=()) -> Step | Skip:
        """Take one reading: validate it, learn from the transition it completes, keep it as the state.

        A stamp more than ``max_gap`` before or after the last starts a new episode (a bag
        restarted, a robot paused); a smaller step back is a bad message. Every unusable reading
        is skipped, counted in :attr:`skips`, and never reaches the learner.
        """
        result = self.selector.select(stamp=stamp, names=names, position=position, velocity=velocity, effort=effort)
        if isinstance(result, Skip):
            return result
        new_episode = self.latest is None or result.episode_start
        learned = False
        if not new_episode and self.learning:
            # The transition S_{t-1} -> S_t carries C_t, the signal measured at the new reading.
            self.td_errors = self.net.learn(
                self.latest.inputs, result.cumulant, result.inputs, False, self.sampler.sample()
            )
            learned = True
        if new_episode:
            self.episodes += 1
            self.net.reset_traces()  # no TD error reaches back across a gap
        self.latest = result
        return Step(sample=result, learned=learned, new_episode=new_episode)

    def learn_recording(self, *, stamps, inputs, cumulants) -> int:
        """Learn from a whole recording of accepted readings at numba speed (e.g. a bag, offline).

        The same transitions, Gamma_t draws and episode boundaries as feeding the readings to
        :meth:`observe` one by one: so a predictor can start from what it learned on a bag.

        Args:
          stamps: [T] s, of readings that passed selection (e.g. ``JointData.stamps``).
          inputs: [T, n_inputs] normalized inputs; cumulants: [T], the signal measured at each reading.

        Returns:
          The number of updates made.
        """
        stamps = np.asarray(stamps, dtype=np.float64)
        inputs = np.asarray(inputs, dtype=np.float64)
        cumulants = np.asarray(cumulants, dtype=np.float64)
        if not (stamps.shape[0] == inputs.shape[0] == cumulants.shape[0]):
            raise ValueError(
                f"stamps {stamps.shape}, inputs {inputs.shape}, cumulants {cumulants.shape} differ in length"
            )
        breaks = np.flatnonzero((np.diff(stamps) < 0) | (np.diff(stamps) > self.max_gap)) + 1
        before = self.net.update_count
        for episode in np.split(np.arange(stamps.shape[0]), breaks):
            if episode.size and self.learning and episode.size > 1:
                self.net.reset_traces()
                self.net.learn_recording(
                    states_t=inputs[episode[:-1]],
                    cumulants=cumulants[episode[1:]],
                    states_tp1=inputs[episode[1:]],
                    timescales=self.sampler,
                )
            self.episodes += int(episode.size > 0)
        self.start_episode()
        return self.net.update_count - before

    def predict(self, gammas) -> np.ndarray:
        """Predicted returns at the latest state for each gamma [G], in the cumulant's units.

        Raises:
          ValueError: a gamma outside [0, 1) (naming it), or no reading accepted yet.
        """
        g = validate_gammas(gammas, name="gamma")
        if self.latest is None:
            raise ValueError("no joint reading accepted yet: nothing to predict from")
        return self.net.predict(self.latest.inputs, g)

    # -- checkpoints

    def _config_mapping(self) -> dict:
        return {
            "joints": to_mapping(self.joints),
            "learner": to_mapping(self.learner_config),
            "timescales": to_mapping(self.timescales),
            "max_gap": self.max_gap,
        }

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the learner and the settings that give its weights their meaning."""
        meta = {"update_count": int(self.net.update_count), "episodes": self.episodes, "accepted": self.accepted}
        return save_npz(
            path, kind=KIND, version=VERSION, config=self._config_mapping(), arrays=self.net.to_state_dict(), meta=meta
        )

    def resume(self, path: str | os.PathLike) -> None:
        """Replace the learner with the one saved at ``path``, which must have been made with these settings.

        Raises:
          FileNotFoundError: no file at ``path``.
          CheckpointError: not such a checkpoint, or made with other settings (every difference is listed).
        """
        saved, arrays, meta = load_npz(path, kind=KIND, version=VERSION)
        try:
            # Defaults filled in: a file from before a setting existed (e.g. lam) has its default.
            saved_learner = saved_learner_mapping(saved.get("learner", {}))
            learner = to_mapping(from_mapping(GammaNetConfig, saved_learner, where=str(path)))
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: unusable learner configuration: {exc}") from None
        check_same_config(path, {**saved, "learner": learner}, self._config_mapping())
        net = LinearGammaNet.from_arrays(
            from_mapping(GammaNetConfig, to_mapping(self.learner_config)),
            arrays,
            update_count=meta.get("update_count"),
            source=str(path),
        )
        episodes = meta.get("episodes", 0)
        if not isinstance(episodes, int) or episodes < 0:
            raise CheckpointError(f"{path}: bad episodes count {episodes!r}")
        self.net, self.episodes = net, episodes
        self.start_episode()
