"""Policies that play an :class:`~gamma_net_core.atari.env.AtariEnv` and give φ, the Γ-net's input.

A policy is anything with the small :class:`Policy` interface; the recorder, the
evaluation points and the rollouts use nothing else. Randomness comes only from the
``numpy.random.Generator`` passed to :meth:`Policy.act`, so a policy holds no hidden
state and a saved generator state resumes it exactly.

Built in:
- :class:`EpsilonGreedyPolicy` over a :class:`~gamma_net_core.atari.networks.NatureQNetwork`
  (ε = 0.0001 for generating data, the paper's evaluation mode); φ is the network's
  512-unit penultimate layer.
- :class:`RandomPolicy`: uniform actions. Its φ comes from a *fixed, randomly initialised*
  Nature CNN (seeded; MinAtar's reference network for a MinAtar game): a random projection
  of the screen, enough to exercise the pipeline, but not the representation of a trained
  agent that the paper's Γ-nets learned from.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from typing import Any, Protocol, runtime_checkable

import numpy as np

from gamma_net_core.atari import FEATURE_SIZE, MINATAR_FEATURE_SIZE

#: ε of the paper's data generation ("evaluation mode"); agents trained with 0.001.
EVAL_EPSILON = 0.0001


@runtime_checkable
class Policy(Protocol):
    """Chooses actions from stacked observations and gives their features φ.

    The loop that uses it (recording transitions)::

        observation = env.reset()
        action, phi = policy.act_with_features(observation, rng)   # phi = φ(S_t)
        step = env.step(action)                                    # reward = C_{t+1}
    """

    num_actions: int
    feature_size: int

    def act(self, observation: np.ndarray, rng: np.random.Generator) -> int:
        """An action index for uint8 ``observation`` [frame_stack, size, size]."""
        ...

    def features(self, observation: np.ndarray) -> np.ndarray:
        """φ(observation): float32 [feature_size]."""
        ...

    def act_with_features(self, observation: np.ndarray, rng: np.random.Generator) -> tuple[int, np.ndarray]:
        """(act(observation, rng), features(observation)) from one forward pass; same draws as ``act``."""
        ...

    def describe(self) -> dict[str, Any]:
        """What this policy is, as JSON (kind, file and its sha256, ε): recorded with the data."""
        ...


# torch is imported where a network runs: a random policy's rollouts never need it (worker start-up).


def _batch(observation: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(observation))[None]


class EpsilonGreedyPolicy:
    """ε-greedy over a Q-network: with probability ε a uniform action, else argmax Q (first on ties).

    Each call draws one uniform number, then an action index only when exploring, so the
    generator's stream does not depend on the network's output.
    """

    def __init__(self, network, *, epsilon: float = EVAL_EPSILON, description: dict | None = None):
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1]; got {epsilon!r}")
        self.network = network.eval()
        self.epsilon = float(epsilon)
        self.num_actions = network.num_actions
        self.feature_size = int(getattr(network, "feature_size", FEATURE_SIZE))
        self._description = dict(description or {"kind": "q_network"})

    def _explore(self, rng: np.random.Generator) -> int | None:
        if rng.random() < self.epsilon:
            return int(rng.integers(self.num_actions))
        return None

    def act(self, observation, rng):
        import torch

        action = self._explore(rng)
        if action is not None:
            return action
        with torch.inference_mode():
            return int(self.network(_batch(observation))[0].argmax())

    def features(self, observation):
        import torch

        with torch.inference_mode():
            return self.network.features(_batch(observation))[0].numpy().copy()

    def act_with_features(self, observation, rng):
        import torch

        explore = self._explore(rng)
        with torch.inference_mode():
            q, phi = self.network.q_and_features(_batch(observation))
        action = explore if explore is not None else int(q[0].argmax())
        return action, phi[0].numpy().copy()

    def describe(self):
        return {**self._description, "epsilon": self.epsilon}


class RandomPolicy:
    """Uniform random actions; φ from a fixed network initialised from ``feature_seed`` (see module doc).

    Args:
      num_actions: the game's action count.
      feature_seed: seed of the feature network.
      frame_stack, screen_size: an ALE game's observation shape.
      game: the game; a MinAtar game's φ comes from MinAtar's reference network.
    """

    def __init__(
        self,
        num_actions: int,
        *,
        feature_seed: int = 0,
        frame_stack: int = 4,
        screen_size: int = 84,
        game: str | None = None,
    ):
        from gamma_net_core.atari.minatar import is_minatar

        self.num_actions = int(num_actions)
        self.feature_seed = int(feature_seed)
        self._shape = (int(frame_stack), int(screen_size))
        self._game = game or ""
        self.feature_size = MINATAR_FEATURE_SIZE if is_minatar(self._game) else FEATURE_SIZE
        self._network = None

    @property
    def network(self):
        """The fixed feature network, built on first use (acting alone needs no network, nor torch)."""
        if self._network is None:
            from gamma_net_core.atari.domains import feature_network_factory

            stack, size = self._shape
            factory = feature_network_factory(
                self._game, num_actions=self.num_actions, frame_stack=stack, screen_size=size
            )
            self._network = factory(self.feature_seed)
        return self._network

    def act(self, observation, rng):
        return int(rng.integers(self.num_actions))

    def features(self, observation):
        import torch

        with torch.inference_mode():
            return self.network.features(_batch(observation))[0].numpy().copy()

    def act_with_features(self, observation, rng):
        return self.act(observation, rng), self.features(observation)

    def describe(self):
        return {"kind": "random", "feature_seed": self.feature_seed}


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_policy(
    spec: str,
    *,
    num_actions: int,
    game: str | None = None,
    epsilon: float = EVAL_EPSILON,
    feature_seed: int = 0,
    frame_stack: int = 4,
    screen_size: int = 84,
) -> Policy:
    """The policy named by ``spec``: ``"random"``, a Q-network file (ε-greedy), or a user's factory.

    Args:
      spec: ``"random"``; a file accepted by :func:`~gamma_net_core.atari.networks.load_q_network`;
        or ``"py:package.module:factory"``, a callable ``factory(*, num_actions, game, epsilon)``
        returning any :class:`Policy` (for an agent of another architecture, e.g. a
        distributional Rainbow network: see docs/atari.md). The module must be importable
        wherever the policy runs (rollout worker processes, Ray nodes).
      num_actions, game: what the policy will play; a network for another game is refused.
      epsilon: exploration of the ε-greedy policy (default: the paper's 0.0001).
      feature_seed: seed of the random policy's fixed feature network.

    Raises:
      FileNotFoundError: ``spec`` is neither "random", a factory, nor an existing file.
      CheckpointError: the file is not a usable network for this game.
      ValueError: a factory that cannot be imported or does not return a Policy.
    """
    if spec == "random":
        return RandomPolicy(
            num_actions, feature_seed=feature_seed, frame_stack=frame_stack, screen_size=screen_size, game=game
        )
    if spec.startswith("py:"):
        return _from_factory(spec, num_actions=num_actions, game=game, epsilon=epsilon)
    from gamma_net_core.atari.networks import load_q_network

    path = pathlib.Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"policy {spec!r} is neither 'random' nor an existing network file")
    network, _ = load_q_network(path, num_actions=num_actions, game=game)
    description = {"kind": "q_network", "path": str(path.resolve()), "sha256": file_sha256(path)}
    return EpsilonGreedyPolicy(network, epsilon=epsilon, description=description)


def _from_factory(spec: str, *, num_actions: int, game: str | None, epsilon: float) -> Policy:
    import importlib

    module_name, _, attribute = spec[3:].partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"policy factory {spec!r} cannot be loaded: {exc}") from None
    policy = factory(num_actions=num_actions, game=game, epsilon=epsilon)
    if not isinstance(policy, Policy):
        raise ValueError(f"policy factory {spec!r} returned a {type(policy).__name__}, which is not a Policy")
    if policy.num_actions != num_actions:
        raise ValueError(
            f"policy factory {spec!r} made a policy of {policy.num_actions} actions; the game has {num_actions}"
        )
    return _Described(policy, {"kind": "python", "factory": spec[3:]})


class _Described:
    """A user's policy whose description also names the factory that made it (checked on resume)."""

    def __init__(self, policy, description: dict[str, Any]):
        self._policy, self._description = policy, description
        self.num_actions, self.feature_size = policy.num_actions, policy.feature_size

    def act(self, observation, rng):
        return self._policy.act(observation, rng)

    def features(self, observation):
        return self._policy.features(observation)

    def act_with_features(self, observation, rng):
        return self._policy.act_with_features(observation, rng)

    def describe(self):
        return {**self._description, "details": self._policy.describe()}
