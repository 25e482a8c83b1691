"""Dopamine's Atari networks (DQN and Rainbow, as the paper's agents were trained) in torch, exactly.

The paper's φ comes from Dopamine's agents (``atari_lib.nature_dqn_network`` and
``rainbow_network``, TF-Slim, 2018-2019): the Nature CNN torso, but with three things that
:class:`~gamma_net_core.atari.networks.NatureQNetwork` does differently, so Dopamine's weights
cannot be loaded into it:

1. ``slim.conv2d`` pads ``SAME``: 84 -> 21 -> 11 -> 11, so φ's layer takes 64 × 11 × 11 = 7,744
   inputs, not 3,136. TensorFlow's SAME pads ``(out - 1) · stride + kernel - in`` in all,
   the odd one at the bottom/right: (2, 2), (1, 2), (1, 1) here, applied by :func:`same_pad`.
2. Observations are NHWC ([84, 84, 4], newest frame last) and ``slim.flatten`` flattens in
   (row, column, channel) order; the torso below works in NCHW and permutes to NHWC before
   flattening, so φ's weight matrix is used as stored.
3. Rainbow's head is C51: ``fully_connected_1`` gives num_actions × 51 logits, a softmax over
   the 51 atoms per action, Q = Σ_i z_i p_i on the support z = linspace(-10, 10, 51) (vmax 10).

Variables (``Online/`` scope; slim names ``weights``/``biases``, Keras-era names
``kernel``/``bias`` also taken): ``Conv``, ``Conv_1``, ``Conv_2`` (kernels [h, w, in, out]),
``fully_connected`` (φ, [7744, 512]), ``fully_connected_1`` (head, [512, A] or [512, A · 51]).

A policy file of this layout (what ``gamma-net atari import-dopamine`` writes) is a
:func:`~gamma_net_core.checkpoint.save_torch` dict with ``kind: dopamine_q_network``;
:func:`gamma_net_core.atari.networks.load_q_network` reads it like a Nature network's file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gamma_net_core.atari import FEATURE_SIZE
from gamma_net_core.checkpoint import CheckpointError

KIND = "dopamine_q_network"
VERSION = 1
AGENTS = ("dqn", "rainbow")
#: Rainbow's distribution (dopamine/agents/rainbow/configs/rainbow.gin: num_atoms 51, vmax 10).
NUM_ATOMS = 51
VMAX = 10.0
#: (scope, out channels, kernel, stride) of the torso, as atari_lib builds it.
CONVS = (("Conv", 32, 8, 4), ("Conv_1", 64, 4, 2), ("Conv_2", 64, 3, 1))


def same_pad(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's SAME padding (before, after) of one spatial axis: the extra pixel goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class DopamineQNetwork(nn.Module):
    """Dopamine's DQN or Rainbow network: Q(s, ·) and φ (the 512-unit layer) from stacked uint8 frames.

    Args:
      agent: ``dqn`` (a linear Q head) or ``rainbow`` (the C51 head).
      num_actions: the game's action count.
      frame_stack, screen_size: the observation [frame_stack, screen_size, screen_size] (Dopamine: 4, 84).
    """

    def __init__(self, agent: str, num_actions: int, *, frame_stack: int = 4, screen_size: int = 84):
        super().__init__()
        if agent not in AGENTS:
            raise ValueError(f"agent must be one of {list(AGENTS)}; got {agent!r}")
        if num_actions < 1:
            raise ValueError(f"num_actions must be >= 1; got {num_actions}")
        self.agent = agent
        self.num_actions = int(num_actions)
        self.frame_stack = int(frame_stack)
        self.screen_size = int(screen_size)
        self.convs = nn.ModuleList()
        self.pads: list[tuple[int, int, int, int]] = []
        size, channels = self.screen_size, self.frame_stack
        for _, out, kernel, stride in CONVS:
            before, after = same_pad(size, kernel, stride)
            self.pads.append((before, after, before, after))  # F.pad order: left, right, top, bottom
            self.convs.append(nn.Conv2d(channels, out, kernel_size=kernel, stride=stride))
            size, channels = -(-size // stride), out
        self.flat_size = size * size * channels
        self.phi = nn.Linear(self.flat_size, FEATURE_SIZE)
        outputs = self.num_actions * (NUM_ATOMS if agent == "rainbow" else 1)
        self.head = nn.Linear(FEATURE_SIZE, outputs)
        self.register_buffer("support", torch.linspace(-VMAX, VMAX, NUM_ATOMS), persistent=False)

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        """φ: float32 [B, 512] from uint8 observations [B, frame_stack, size, size] (scaled by 1/255)."""
        x = observations.float() / 255.0
        for pad, conv in zip(self.pads, self.convs):
            x = torch.relu(conv(F.pad(x, pad)))
        x = x.permute(0, 2, 3, 1).flatten(1)  # slim.flatten of NHWC: (row, column, channel)
        return torch.relu(self.phi(x))

    def q_values(self, phi: torch.Tensor) -> torch.Tensor:
        """Q [B, A] from φ: the linear head, or C51's expectation over the support."""
        out = self.head(phi)
        if self.agent == "dqn":
            return out
        probabilities = torch.softmax(out.reshape(-1, self.num_actions, NUM_ATOMS), dim=2)
        return (probabilities * self.support).sum(dim=2)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Q-values [B, num_actions]."""
        return self.q_values(self.features(observations))

    def q_and_features(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q [B, A], φ [B, 512]) from one forward pass."""
        phi = self.features(observations)
        return self.q_values(phi), phi


def _variable(variables: dict[str, np.ndarray], scope: str, kinds: tuple[str, ...], prefix: str) -> np.ndarray:
    for kind in kinds:
        name = f"{prefix}{scope}/{kind}"
        if name in variables:
            return np.asarray(variables[name], dtype=np.float32)
    names = " or ".join(f"{prefix}{scope}/{k}" for k in kinds)
    raise CheckpointError(f"the checkpoint has no variable {names}")


def from_tf_variables(
    variables: dict[str, np.ndarray],
    agent: str,
    *,
    prefix: str = "Online/",
    frame_stack: int = 4,
    screen_size: int = 84,
) -> DopamineQNetwork:
    """A :class:`DopamineQNetwork` holding a Dopamine checkpoint's online network.

    Args:
      variables: checkpoint variable name -> array, as TensorFlow stores them.
      agent: ``dqn`` or ``rainbow``.
      prefix: the network's scope (Dopamine: ``Online/``; its target network is ``Target/``).

    Raises:
      CheckpointError: a variable is missing or has another shape than the layout needs (named).
    """
    weights, biases = ("weights", "kernel"), ("biases", "bias")
    head = _variable(variables, "fully_connected_1", weights, prefix)
    atoms = NUM_ATOMS if agent == "rainbow" else 1
    if head.ndim != 2 or head.shape[1] % atoms:
        raise CheckpointError(
            f"{prefix}fully_connected_1 has shape {head.shape}; a {agent} head needs [512, A·{atoms}]"
        )
    network = DopamineQNetwork(agent, head.shape[1] // atoms, frame_stack=frame_stack, screen_size=screen_size)
    layers = [(scope, conv) for (scope, *_), conv in zip(CONVS, network.convs)]
    layers += [("fully_connected", network.phi), ("fully_connected_1", network.head)]
    with torch.no_grad():
        for scope, layer in layers:
            w = _variable(variables, scope, weights, prefix)
            b = _variable(variables, scope, biases, prefix)
            w = w.transpose(3, 2, 0, 1) if w.ndim == 4 else w.T  # TF [h, w, in, out] / [in, out] -> torch
            if w.shape != tuple(layer.weight.shape) or b.shape != tuple(layer.bias.shape):
                raise CheckpointError(
                    f"{prefix}{scope} has weights {w.shape[::-1] if w.ndim == 2 else w.shape} and biases {b.shape}; "
                    f"Dopamine's {agent} layout needs {tuple(layer.weight.shape)} (torch order) and "
                    f"{tuple(layer.bias.shape)}"
                )
            layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(w)))
            layer.bias.copy_(torch.from_numpy(b))
    return network.eval()


def network_file(network: DopamineQNetwork, *, game: str | None, source: dict[str, Any] | None = None) -> dict:
    """The policy file dict of a Dopamine network (``save_torch`` it)."""
    return {
        "kind": KIND,
        "version": VERSION,
        "agent": network.agent,
        "num_actions": network.num_actions,
        "frame_stack": network.frame_stack,
        "screen_size": network.screen_size,
        "game": game,
        "source": source or {},
        "state_dict": {k: v.detach().cpu().clone() for k, v in network.state_dict().items()},
    }


def network_from_file(state: dict, path) -> DopamineQNetwork:
    """Rebuild :func:`network_file`'s network, checking every tensor's name and shape."""
    if state.get("version") != VERSION:
        raise CheckpointError(f"{path} is dopamine_q_network version {state.get('version')}; this reads {VERSION}")
    agent = state.get("agent")
    if agent not in AGENTS:
        raise CheckpointError(f"{path}: agent {agent!r} is not one of {list(AGENTS)}")
    network = DopamineQNetwork(
        agent,
        int(state["num_actions"]),
        frame_stack=int(state.get("frame_stack", 4)),
        screen_size=int(state.get("screen_size", 84)),
    )
    tensors = state.get("state_dict")
    expected = network.state_dict()
    if not isinstance(tensors, dict) or set(tensors) != set(expected):
        raise CheckpointError(
            f"{path}: tensors {sorted(tensors or {})} are not the {agent} layout's {sorted(expected)}"
        )
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{path}: {name} has shape {tuple(tensor.shape)}, expected {tuple(expected[name].shape)}"
            )
    network.load_state_dict(tensors)
    return network.eval()
