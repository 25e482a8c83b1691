"""MinAtar's reference Q-network (Young and Tian 2019), whose 128-unit hidden layer is φ.

The MinAtar paper's DQN: one convolution of 16 3x3 filters, stride 1, no padding, ReLU
(10x10 -> 8x8), then a 128-unit fully connected ReLU layer, then one Q-value per action.
The 128-unit layer plays the role of the Nature CNN's 512-unit layer: its activation is
φ(S_t), the Γ-nets' input.

A network file is a :func:`gamma_net_core.checkpoint.save_torch` dict::

    {"kind": "minatar_q_network", "version": 1, "num_actions": 6, "in_channels": 4,
     "game": "minatar-breakout", "state_dict": {...}}

read by :func:`gamma_net_core.atari.networks.load_q_network` like a Nature network's file.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gamma_net_core.atari import MINATAR_FEATURE_SIZE
from gamma_net_core.checkpoint import CheckpointError

KIND = "minatar_q_network"
VERSION = 1
#: Size of φ: the reference network's hidden layer (MinAtar paper: 128 units).
FEATURE_SIZE = MINATAR_FEATURE_SIZE
#: Filters of the one convolution (MinAtar paper: 16, 3x3, stride 1).
FILTERS = 16


class MinAtarQNetwork(nn.Module):
    """Q(s, ·) from a uint8 MinAtar observation [B, channels, 10, 10]; :meth:`features` is φ.

    Args:
      num_actions: MinAtar's six actions (or fewer, for a minimal action set).
      in_channels: the game's channel count (Breakout 4, Freeway 7, Seaquest 10, ...).
    """

    feature_size = FEATURE_SIZE

    def __init__(self, num_actions: int, *, in_channels: int, grid: int = 10):
        super().__init__()
        if num_actions < 1 or in_channels < 1:
            raise ValueError(f"num_actions and in_channels must be >= 1; got {num_actions}, {in_channels}")
        self.num_actions = int(num_actions)
        self.in_channels = int(in_channels)
        self.grid = int(grid)
        self.torso = nn.Sequential(nn.Conv2d(in_channels, FILTERS, kernel_size=3, stride=1), nn.ReLU(), nn.Flatten())
        self.phi = nn.Linear(FILTERS * (grid - 2) ** 2, FEATURE_SIZE)
        self.head = nn.Linear(FEATURE_SIZE, num_actions)

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        """φ: float32 [B, 128] from 0/1 observations [B, channels, 10, 10] (not rescaled: already in [0, 1])."""
        return torch.relu(self.phi(self.torso(observations.float())))

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Q-values [B, num_actions]."""
        return self.head(self.features(observations))

    def q_and_features(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q [B, A], φ [B, 128]) from one forward pass."""
        phi = self.features(observations)
        return self.head(phi), phi


def random_network(num_actions: int, *, in_channels: int, seed: int) -> MinAtarQNetwork:
    """A network initialised from ``seed`` without touching torch's global generator."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        network = MinAtarQNetwork(num_actions, in_channels=in_channels)
    return network.eval()


def network_file(network: MinAtarQNetwork, *, game: str) -> dict[str, Any]:
    """The dict :func:`gamma_net_core.atari.networks.save_q_network` writes for a MinAtar network."""
    return {
        "kind": KIND,
        "version": VERSION,
        "num_actions": network.num_actions,
        "in_channels": network.in_channels,
        "game": game,
        "state_dict": {k: v.detach().cpu().clone() for k, v in network.state_dict().items()},
    }


def network_from_file(state: dict[str, Any], path) -> MinAtarQNetwork:
    """The network of a :func:`network_file` dict, its tensors' names and shapes checked.

    Raises:
      CheckpointError: another version, missing or unexpected tensors, or other shapes.
    """
    if state.get("version") != VERSION:
        raise CheckpointError(f"{path} is a {KIND} of version {state.get('version')}, not {VERSION}")
    tensors = state.get("state_dict")
    if not isinstance(tensors, dict):
        raise CheckpointError(f"{path} holds no state dict of tensors")
    network = MinAtarQNetwork(int(state["num_actions"]), in_channels=int(state["in_channels"]))
    expected = network.state_dict()
    if sorted(tensors) != sorted(expected):
        raise CheckpointError(f"{path}: tensors {sorted(tensors)}, expected {sorted(expected)}")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {tuple(tensor.shape)}, expected {tuple(expected[name].shape)}"
            )
    network.load_state_dict(tensors)
    return network.eval()
