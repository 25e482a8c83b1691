"""Monte-Carlo returns from evaluation points, per probe τ, on local processes or a Ray cluster.

From each point, K rollouts restore the point's exact state and follow the policy; each
rollout's rewards give its discounted return at every probe γ
(:func:`gamma_net_core.returns.monte_carlo_return`), and the K returns are averaged.
The paper's probe timescales are τ = 1, 2, 5, 10, 20, 40, 60, 80, 100 (γ = 1 - 1/τ).

Where a rollout stops. The paper ran each rollout to termination. Here a rollout stops
at termination, at the 27,000-step episode cut, or after ``horizon`` steps, by default
the step after which the largest probe γ's weight falls below 1e-4
(:func:`gamma_net_core.returns.truncation_horizon`: 917 steps for γ = 0.99). Why: the
part left out is γ^H · G_{t+H} with G_{t+H} <= R_max / (1 - γ), so it is below 1e-4 of the
largest possible return, far below the Monte-Carlo standard error of K rollouts; while a
good agent's episodes can run 27,000 steps, about 30 times the emulation. ``horizon=None``
runs to the end of the episode as the paper did.

Seeding. Rollout k of point i draws its sticky actions and policy choices from
``SeedSequence([seed, i, k])`` (in MinAtar, the game's own randomness too: one generator
serves both), so its result does not depend on which worker, process or machine runs it:
local processes and Ray give identical returns.

File (``returns.npz``, :func:`gamma_net_core.checkpoint.save_npz`, kind ``atari_mc_returns``):

================  ==================  ===============================================
array             dtype, shape        meaning
================  ==================  ===============================================
taus, gammas      float64 [G]         probe timescales (γ = 1 - 1/τ)
returns           float64 [P, G]      mean Monte-Carlo return of point i at gammas[g]
standard_errors   float64 [P, G]      its standard error (std over rollouts / sqrt K)
rollout_returns   float64 [P, K, G]   every rollout's return
rollout_lengths   int64 [P, K]        steps each rollout ran
rollout_ends      int8 [P, K]         0: horizon reached, 1: terminal, 2: episode cut
================  ==================  ===============================================

The header's ``config`` names the game, policy, K, horizon, seed and the points file's
SHA-256; ``returns.json`` beside it repeats taus, gammas and ``returns`` as plain JSON.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from gamma_net_core.checkpoint import load_npz, save_npz
from gamma_net_core.data.shards import clip_reward
from gamma_net_core.returns import monte_carlo_return, truncation_horizon
from gamma_net_core.timescales import PROBE_TAUS, gamma_from_tau

KIND = "atari_mc_returns"
VERSION = 1
#: The paper's probe timescales, as τ in steps.
#: Weight of the largest probe γ below which a rollout may stop.
HORIZON_TOLERANCE = 1e-4
END_HORIZON, END_TERMINAL, END_TRUNCATED = 0, 1, 2


def default_horizon(taus: Iterable[float] = PROBE_TAUS, tolerance: float = HORIZON_TOLERANCE) -> int:
    """Steps after which the largest probe γ's weight γ^k is below ``tolerance`` (917 for τ = 100)."""
    return truncation_horizon(float(np.max(gamma_from_tau(np.asarray(list(taus), dtype=np.float64)))), tolerance)


def rollout_seeds(seed: int, point: int, rollout: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """(sticky-action seed, policy seed) of rollout ``rollout`` from point ``point``."""
    sticky, policy = np.random.SeedSequence([int(seed), int(point), int(rollout)]).spawn(2)
    return sticky, policy


def rollout(env, policy, state, *, seed: int, point: int, index: int, horizon: int | None) -> tuple[np.ndarray, int]:
    """One rollout from ``state``: its rewards (rewards[0] = C_{t+1}) and how it ended.

    Args:
      env: an :class:`~gamma_net_core.atari.env.AtariEnv` (or MinAtarEnv) of the point's game and settings.
      policy: a :class:`~gamma_net_core.atari.policies.Policy`.
      state: the point's :class:`~gamma_net_core.atari.env.EnvState`.
      seed, point, index: select the rollout's random streams (:func:`rollout_seeds`).
      horizon: at most this many steps; None runs to the end of the episode.
    """
    sticky_seed, policy_seed = rollout_seeds(seed, point, index)
    observation = env.set_state(state)
    env.reseed(sticky_seed)
    rng = np.random.default_rng(policy_seed)
    rewards: list[float] = []
    if state.episode_over:
        return np.zeros(0), END_TERMINAL
    limit = math.inf if horizon is None else horizon
    while len(rewards) < limit:
        step = env.step(policy.act(observation, rng))
        rewards.append(step.reward)
        observation = step.observation
        if step.terminal:
            return np.array(rewards), END_TERMINAL
        if step.truncated:
            return np.array(rewards), END_TRUNCATED
    return np.array(rewards), END_HORIZON


#: The cumulants a study can predict (the two columns of a version 2 recording).
CUMULANTS = ("raw", "clipped")


@dataclasses.dataclass(frozen=True)
class RolloutSpec:
    """What a worker needs to rebuild the environment and policy (plain, picklable values)."""

    env: dict[str, Any]  # AtariConfig or MinAtarConfig fields
    policy: str  # "random" or a network file path
    epsilon: float
    feature_seed: int
    gammas: tuple[float, ...]
    horizon: int | None
    seed: int
    #: the network file's bytes, shipped to workers that may not see the file (Ray nodes)
    policy_bytes: bytes | None = None
    #: "raw": the game's reward; "clipped": Dopamine's reward clipped to [-1, 1] (the recordings' two cumulants)
    cumulant: str = "raw"


class RolloutWorker:
    """Holds one environment and policy; runs chunks of rollouts. One per process or Ray actor.

    Args:
      spec: what to build.
      policy: use this policy instead of the one ``spec`` names (tests; in this process only).
      own_process: the worker owns its process (a pool process or a Ray actor), so it may
        set torch to one thread: parallelism comes from the workers.
    """

    def __init__(self, spec: RolloutSpec, policy=None, own_process: bool = False):
        from gamma_net_core.atari.domains import config_from_mapping, make_env
        from gamma_net_core.atari.policies import load_policy

        self.spec = spec
        config = config_from_mapping(spec.env)
        self.env = make_env(config, seed=0)  # reseeded for every rollout
        policy_spec = spec.policy
        if policy is None and spec.policy_bytes is not None:
            self._policy_file = tempfile.NamedTemporaryFile(suffix=".pt")  # removed with the worker
            self._policy_file.write(spec.policy_bytes)
            self._policy_file.flush()
            policy_spec = self._policy_file.name
        self.policy = policy or load_policy(
            policy_spec,
            num_actions=self.env.num_actions,
            game=self.env.game,
            epsilon=spec.epsilon,
            feature_seed=spec.feature_seed,
            frame_stack=getattr(config, "frame_stack", 4),
            screen_size=getattr(config, "screen_size", 84),
        )
        self.gammas = np.asarray(spec.gammas, dtype=np.float64)
        if own_process and "torch" in sys.modules:  # imported by a network policy
            sys.modules["torch"].set_num_threads(1)

    def run(self, point: int, state, indices: list[int]):
        """Rollouts ``indices`` of ``point``: (point, indices, returns [k, G], lengths [k], ends [k])."""
        returns = np.zeros((len(indices), self.gammas.size))
        lengths = np.zeros(len(indices), dtype=np.int64)
        ends = np.zeros(len(indices), dtype=np.int8)
        for j, k in enumerate(indices):
            rewards, end = rollout(
                self.env, self.policy, state, seed=self.spec.seed, point=point, index=k, horizon=self.spec.horizon
            )
            if self.spec.cumulant == "clipped":
                rewards = clip_reward(rewards)
            returns[j] = monte_carlo_return(rewards, self.gammas)
            lengths[j] = rewards.size
            ends[j] = end
        return point, indices, returns, lengths, ends


_WORKER: RolloutWorker | None = None


def init_process(spec: RolloutSpec) -> None:
    """A process pool's initializer: this worker process's :class:`RolloutWorker` of ``spec``."""
    global _WORKER
    _WORKER = RolloutWorker(spec, own_process=True)


def run_in_process(point: int, state, indices: list[int]):
    """Rollouts in a pool's worker process (after :func:`init_process`): :meth:`RolloutWorker.run`."""
    assert _WORKER is not None, "worker process not initialised"
    return _WORKER.run(point, state, indices)


@dataclasses.dataclass
class MonteCarloReturns:
    """Monte-Carlo returns of every point (see the module docstring for the file)."""

    config: dict[str, Any]
    taus: np.ndarray
    gammas: np.ndarray
    rollout_returns: np.ndarray  # [P, K, G]
    rollout_lengths: np.ndarray  # [P, K]
    rollout_ends: np.ndarray  # [P, K]

    @property
    def returns(self) -> np.ndarray:
        """Mean over rollouts: [P, G]."""
        return self.rollout_returns.mean(axis=1)

    @property
    def standard_errors(self) -> np.ndarray:
        k = self.rollout_returns.shape[1]
        if k < 2:
            return np.full(self.returns.shape, np.nan)
        return self.rollout_returns.std(axis=1, ddof=1) / math.sqrt(k)

    def save(self, path: str | os.PathLike):
        arrays = {
            "taus": self.taus,
            "gammas": self.gammas,
            "returns": self.returns,
            "standard_errors": self.standard_errors,
            "rollout_returns": self.rollout_returns,
            "rollout_lengths": self.rollout_lengths,
            "rollout_ends": self.rollout_ends,
        }
        return save_npz(path, kind=KIND, version=VERSION, config=self.config, arrays=arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> MonteCarloReturns:
        config, arrays, _ = load_npz(path, kind=KIND, version=VERSION)
        return cls(
            config=config,
            taus=arrays["taus"],
            gammas=arrays["gammas"],
            rollout_returns=arrays["rollout_returns"],
            rollout_lengths=arrays["rollout_lengths"],
            rollout_ends=arrays["rollout_ends"],
        )


def _policy_identity(policy: str, epsilon: float) -> dict[str, Any]:
    """What played the rollouts: "random", a factory, or a network file's SHA-256 (not its path)."""
    if policy == "random" or policy.startswith("py:"):
        return {"spec": policy, "epsilon": epsilon}
    from gamma_net_core.atari.policies import file_sha256

    return {"sha256": file_sha256(policy), "epsilon": epsilon}


def _tasks(num_points: int, rollouts: int, chunk: int) -> list[tuple[int, list[int]]]:
    return [(p, list(range(s, min(s + chunk, rollouts)))) for p in range(num_points) for s in range(0, rollouts, chunk)]


def _run_local(spec, states, tasks, workers: int) -> Iterator[tuple]:
    if workers == 0:  # in this process: no start-up cost (tests, tiny jobs)
        worker = RolloutWorker(spec)
        for point, indices in tasks:
            yield worker.run(point, states[point], indices)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: the parent may hold torch's thread pools, which do not survive a fork.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=init_process, initargs=(spec,)
    ) as pool:
        futures = [pool.submit(run_in_process, point, states[point], indices) for point, indices in tasks]
        for future in as_completed(futures):
            yield future.result()


def _run_ray(spec, states, tasks, workers: int, address: str | None) -> Iterator[tuple]:
    import ray
    from ray.util import ActorPool

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    if spec.policy != "random" and not spec.policy.startswith("py:"):
        # Cluster nodes may not see this machine's files: ship the network itself.
        spec = dataclasses.replace(spec, policy_bytes=pathlib.Path(spec.policy).read_bytes())
    actor = ray.remote(num_cpus=1)(RolloutWorker)
    actors = [actor.remote(spec, None, True) for _ in range(workers)]
    state_refs = {p: ray.put(states[p]) for p in sorted({p for p, _ in tasks})}
    try:
        pool = ActorPool(actors)
        yield from pool.map_unordered(lambda a, task: a.run.remote(task[0], state_refs[task[0]], task[1]), tasks)
    finally:
        for a in actors:  # give the cluster's CPUs back
            ray.kill(a)


def run_rollouts(
    states,
    spec: RolloutSpec,
    *,
    rollouts: int,
    workers: int = 0,
    ray_address: str | None = None,
    use_ray: bool = False,
    chunk: int = 8,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K rollouts from every state, in parallel; results are independent of how they are spread.

    Args:
      states: the points' :class:`~gamma_net_core.atari.env.EnvState` list.
      spec: environment, policy, gammas, horizon and seed.
      rollouts: K per point.
      workers: local processes (0: in this process); with Ray, the number of actors (>= 1).
      ray_address: a Ray cluster address (``ray.init(address=...)``); implies ``use_ray``.
      use_ray: run on Ray (the already-initialised instance, or a new local one).
      chunk: rollouts of one point per task.
      progress: a tqdm bar on stderr, counting rollouts.

    Returns:
      (returns [P, K, G], lengths [P, K], ends [P, K]).
    """
    from tqdm import tqdm

    if rollouts < 1 or chunk < 1 or workers < 0:
        raise ValueError(f"need rollouts >= 1, chunk >= 1, workers >= 0; got {rollouts}, {chunk}, {workers}")
    tasks = _tasks(len(states), rollouts, chunk)
    returns = np.zeros((len(states), rollouts, len(spec.gammas)))
    lengths = np.zeros((len(states), rollouts), dtype=np.int64)
    ends = np.zeros((len(states), rollouts), dtype=np.int8)
    if use_ray or ray_address is not None:
        results = _run_ray(spec, states, tasks, max(1, workers), ray_address)
    else:
        results = _run_local(spec, states, tasks, workers)
    with tqdm(total=len(states) * rollouts, unit="rollout", file=sys.stderr, disable=not progress) as bar:
        for point, indices, r, n, e in results:
            returns[point, indices] = r
            lengths[point, indices] = n
            ends[point, indices] = e
            bar.update(len(indices))
    return returns, lengths, ends


def monte_carlo_returns(
    points,
    *,
    policy: str,
    rollouts: int,
    taus=PROBE_TAUS,
    horizon: int | str | None = "auto",
    seed: int = 0,
    epsilon: float | None = None,
    feature_seed: int = 0,
    workers: int = 0,
    ray_address: str | None = None,
    use_ray: bool = False,
    chunk: int = 8,
    progress: bool = False,
    points_sha256: str | None = None,
    cumulant: str = "raw",
) -> MonteCarloReturns:
    """Monte-Carlo returns of :class:`~gamma_net_core.atari.evaluation_points.EvaluationPoints`.

    Args:
      points: the evaluation points (their config names the game and settings).
      policy: "random" or a network file: the policy that made the points.
      rollouts: K per point (the paper: 1000).
      taus: probe timescales τ (steps).
      horizon: "auto" (:func:`default_horizon` of ``taus``), a step count, or None (to the episode's end).
      seed: the rollouts' base seed (see :func:`rollout_seeds`).
      epsilon, feature_seed: as for :func:`~gamma_net_core.atari.policies.load_policy`.
      workers, ray_address, use_ray, chunk, progress: see :func:`run_rollouts`.
      cumulant: ``raw`` (the game's reward) or ``clipped`` (to [-1, 1], as Dopamine's agents see it):
        the cumulant whose returns are estimated; a study trained on one is evaluated on the same.
    """
    if cumulant not in CUMULANTS:
        raise ValueError(f"cumulant must be one of {list(CUMULANTS)}; got {cumulant!r}")
    from gamma_net_core.atari.policies import EVAL_EPSILON

    taus = np.asarray(taus, dtype=np.float64)
    gammas = np.atleast_1d(gamma_from_tau(taus))
    if horizon == "auto":
        horizon = default_horizon(taus)
    if horizon is not None and (not isinstance(horizon, int) or horizon < 1):
        raise ValueError(f"horizon must be 'auto', None or an int >= 1; got {horizon!r}")
    spec = RolloutSpec(
        env=dict(points.config["env"]),
        policy=policy,
        epsilon=EVAL_EPSILON if epsilon is None else float(epsilon),
        feature_seed=int(feature_seed),
        gammas=tuple(float(g) for g in gammas),
        horizon=horizon,
        seed=int(seed),
        cumulant=cumulant,
    )
    returns, lengths, ends = run_rollouts(
        points.states,
        spec,
        rollouts=rollouts,
        workers=workers,
        ray_address=ray_address,
        use_ray=use_ray,
        chunk=chunk,
        progress=progress,
    )
    config = {
        "game": points.config["game"],
        "policy": points.config["policy"],
        "rollout_policy": _policy_identity(policy, spec.epsilon),
        "rollouts": int(rollouts),
        "horizon": horizon,
        "seed": int(seed),
        "taus": [float(t) for t in taus],
        "points_sha256": points_sha256,
        "cumulant": cumulant,
    }
    return MonteCarloReturns(config, taus, gammas, returns, lengths, ends)
