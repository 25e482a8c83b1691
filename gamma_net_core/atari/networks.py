"""The Nature-CNN Q-network (Mnih et al. 2015) whose 512-unit penultimate layer is φ.

Dopamine's DQN and Rainbow agents (which generated the paper's data) share this torso:
conv 32x8x8 stride 4, conv 64x4x4 stride 2, conv 64x3x3 stride 1, each ReLU, then a
512-unit fully connected ReLU layer. Its activation is φ(S_t), the Γ-net's input; a
linear head maps φ to one Q-value per action.

A network file is a :func:`gamma_net_core.checkpoint.save_torch` dict::

    {"kind": "nature_q_network", "version": 1, "num_actions": A, "frame_stack": 4,
     "screen_size": 84, "game": "centipede", "state_dict": {...}}

:func:`load_q_network` also takes a bare state dict (a file holding only the tensors),
with the parameter names and shapes of :class:`NatureQNetwork` (see docs/atari.md), and the
files of Dopamine's own layouts (:mod:`gamma_net_core.atari.dopamine`: SAME padding, 7,744
inputs to φ, Rainbow's C51 head), which Dopamine's checkpoints need, and MinAtar's reference
network (:mod:`gamma_net_core.atari.minatar_network`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
from torch import nn

from gamma_net_core.atari import FEATURE_SIZE
from gamma_net_core.checkpoint import CheckpointError, load_torch, save_torch

KIND = "nature_q_network"
VERSION = 1


class NatureQNetwork(nn.Module):
    """Q(s, ·) from a stacked uint8 observation; :meth:`features` is φ, the penultimate layer.

    Args:
      num_actions: size of the game's (minimal) action set.
      frame_stack, screen_size: the observation shape [frame_stack, screen_size, screen_size].
    """

    def __init__(self, num_actions: int, *, frame_stack: int = 4, screen_size: int = 84):
        super().__init__()
        if num_actions < 1:
            raise ValueError(f"num_actions must be >= 1; got {num_actions}")
        self.num_actions = int(num_actions)
        self.frame_stack = int(frame_stack)
        self.screen_size = int(screen_size)
        self.torso = nn.Sequential(
            nn.Conv2d(frame_stack, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.torso(torch.zeros(1, frame_stack, screen_size, screen_size)).shape[1]
        self.phi = nn.Linear(flat, FEATURE_SIZE)
        self.head = nn.Linear(FEATURE_SIZE, num_actions)

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        """φ: float32 [B, 512] from uint8 observations [B, frame_stack, size, size] (scaled by 1/255)."""
        return torch.relu(self.phi(self.torso(observations.float() / 255.0)))

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Q-values [B, num_actions]."""
        return self.head(self.features(observations))

    def q_and_features(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q [B, A], φ [B, 512]) from one forward pass."""
        phi = self.features(observations)
        return self.head(phi), phi


@contextlib.contextmanager
def torch_threads(count: int = 1):
    """Run a block with ``count`` torch threads (one is fastest for batch-1 inference here), then restore."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def random_network(num_actions: int, *, seed: int, frame_stack: int = 4, screen_size: int = 84) -> NatureQNetwork:
    """A network initialised from ``seed`` without touching torch's global generator."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        network = NatureQNetwork(num_actions, frame_stack=frame_stack, screen_size=screen_size)
    return network.eval()


def network_file(network: NatureQNetwork, *, game: str) -> dict[str, Any]:
    """The dict :func:`save_q_network` writes (a MinAtar network's own, for a MinAtar network)."""
    from gamma_net_core.atari import minatar_network

    if isinstance(network, minatar_network.MinAtarQNetwork):
        return minatar_network.network_file(network, game=game)
    return {
        "kind": KIND,
        "version": VERSION,
        "num_actions": network.num_actions,
        "frame_stack": network.frame_stack,
        "screen_size": network.screen_size,
        "game": game,
        "state_dict": {k: v.detach().cpu().clone() for k, v in network.state_dict().items()},
    }


def save_q_network(path: str | os.PathLike, network: NatureQNetwork, *, game: str):
    """Atomically write ``network`` for ``game`` (loadable with ``weights_only``)."""
    return save_torch(path, network_file(network, game=game))


def _check_fits(network, state: dict[str, Any], path, num_actions: int | None, game: str | None) -> None:
    if num_actions is not None and network.num_actions != num_actions:
        raise CheckpointError(f"{path} has {network.num_actions} actions; the game has {num_actions}")
    if game is not None and state.get("game") not in (None, game):
        raise CheckpointError(f"{path} was made for {state.get('game')!r}, not {game!r}")


def load_q_network(path: str | os.PathLike, *, num_actions: int | None = None, game: str | None = None):
    """Read a network file or a bare state dict; validate it against the game it will play.

    Args:
      path: a :func:`save_q_network` file, a DQN checkpoint of ``gamma-net atari train-agent``,
        or a ``torch.save``-d state dict with :class:`NatureQNetwork`'s names and shapes.
      num_actions: the action count of the game it will play (refused if different).
      game: the game it will play (refused if the file names another one).

    Returns:
      (network in eval mode, the file's metadata dict).

    Raises:
      FileNotFoundError, CheckpointError: unreadable file, wrong names or shapes, other game.
    """
    state = load_torch(path)
    if state.get("kind") == "dopamine_q_network":  # gamma-net atari import-dopamine
        from gamma_net_core.atari import dopamine

        network = dopamine.network_from_file(state, path)
        _check_fits(network, state, path, num_actions, game)
        return network, {k: v for k, v in state.items() if k != "state_dict" and not isinstance(v, torch.Tensor)}
    if "online" in state and isinstance(state["online"], dict):  # a DQN trainer checkpoint
        state = state["online"]
    if state.get("kind") == "minatar_q_network":  # MinAtar's reference network
        from gamma_net_core.atari import minatar_network

        network = minatar_network.network_from_file(state, path)
        _check_fits(network, state, path, num_actions, game)
        return network, {k: v for k, v in state.items() if k != "state_dict"}
    tensors = state.get("state_dict", state)
    if not isinstance(tensors, dict) or not all(isinstance(v, torch.Tensor) for v in tensors.values()):
        raise CheckpointError(f"{path} holds no state dict of tensors")
    if "head.weight" not in tensors:
        raise CheckpointError(f"{path}: no 'head.weight' tensor; names found: {sorted(tensors)[:8]}")
    file_actions = int(tensors["head.weight"].shape[0])
    if num_actions is not None and file_actions != num_actions:
        raise CheckpointError(f"{path} has {file_actions} actions; the game has {num_actions}")
    file_game = state.get("game")
    if game is not None and file_game is not None and file_game != game:
        raise CheckpointError(f"{path} was made for {file_game!r}, not {game!r}")
    frame_stack = int(
        state.get("frame_stack", tensors["torso.0.weight"].shape[1] if "torso.0.weight" in tensors else 4)
    )
    network = NatureQNetwork(file_actions, frame_stack=frame_stack, screen_size=int(state.get("screen_size", 84)))
    expected = network.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: missing tensors {missing}, unexpected tensors {unexpected}")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {tuple(tensor.shape)}, expected {tuple(expected[name].shape)}"
            )
    network.load_state_dict(tensors)
    meta = {k: v for k, v in state.items() if k != "state_dict" and not isinstance(v, (dict, torch.Tensor))}
    return network.eval(), meta
