"""Plain versions of the neural core, written for clarity: the oracles of the fast ones.

- :func:`reference_forward`: a Γ-net evaluated one (state, γ) pair at a time, with the
  embedding e(φ, γ) built exactly as the paper writes it (concatenation, Hadamard, φᵀΞ).
- :func:`reference_update`: the update with a Python loop over Γ_t, one forward and one
  backward pass per timescale (the benchmark's baseline; the tests hold its gradients equal
  to the tiled batch's), every scaling included.
- :func:`reference_sigma` and :func:`reference_normalizer_update`: the ``normalized``
  scaling's running RMS per timescale, one γ and one point at a time in Python floats.
- :class:`ReferenceSumTree`: a sum tree as a list of per-level lists, one item at a time.
- :func:`reference_window`: an n-step window read off a list of records by walking it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from gamma_net_core.neural.networks import GammaNet, output_scale, timescale_inputs
from gamma_net_core.neural.replay import NStepBatch, importance_weights, priorities_from_losses


def reference_forward(net: GammaNet, features: torch.Tensor, gammas: torch.Tensor) -> torch.Tensor:
    """The Γ-net's output [B, G], built pair by pair from the embedding as the paper defines it."""
    out = torch.empty(features.shape[0], gammas.shape[0], dtype=features.dtype)
    for k in range(gammas.shape[0]):
        u = timescale_inputs(gammas[k : k + 1], net.inputs, net.tau_max)[0]  # [1] or [2]
        for b in range(features.shape[0]):
            phi = features[b]
            if net.embedding_kind == "direct":
                e = torch.cat([phi, u])
            else:
                xi = net.embed_layer(u)
                xi = F.relu(xi) if net.embedding_activation == "relu" else xi
                if net.embedding_kind == "l_embed":
                    e = torch.cat([phi, xi])
                elif net.embedding_kind == "h_l_embed":
                    e = phi * xi
                else:
                    e = phi @ xi.reshape(net.feature_size, net.feature_size)
            h = e
            for layer in net.layers[:-1]:
                h = F.relu(layer(h))
            out[b, k] = net.layers[-1](h)[0]
    return out


def _point_weights(log_taus: list[float], gamma: float) -> list[float]:
    """One γ's weights on a normalizer's points: linear on log τ between the two around it, the end beyond."""
    x = -math.log1p(-gamma)
    weights = [0.0] * len(log_taus)
    if x <= log_taus[0] or len(log_taus) == 1:
        weights[0] = 1.0
    elif x >= log_taus[-1]:
        weights[-1] = 1.0
    else:
        j = max(i for i in range(len(log_taus) - 1) if log_taus[i] <= x)
        frac = (x - log_taus[j]) / (log_taus[j + 1] - log_taus[j])
        weights[j], weights[j + 1] = 1.0 - frac, frac
    return weights


def _interpolate(x: float, xs: list[float], ys: list[float]) -> float:
    """y at x, linear between the (xs, ys) around it, the end's beyond the ends."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    j = max(i for i in range(len(xs) - 1) if xs[i] <= x)
    frac = (x - xs[j]) / (xs[j + 1] - xs[j])
    return (1.0 - frac) * ys[j] + frac * ys[j + 1]


def reference_sigma(normalizer, gamma: float) -> float:
    """σ(γ) of a :class:`~gamma_net_core.neural.networks.TimescaleNormalizer`, in Python floats: each point's
    bias-corrected log mean square (a point no target reached: its reached neighbours', on log τ; 0 before
    any), then interpolated at γ's log τ."""
    log_taus = normalizer.log_taus.tolist()
    mean_square, weight = normalizer.mean_square.tolist(), normalizer.weight.tolist()
    seen = [j for j in range(len(log_taus)) if weight[j] > 0]
    if seen:
        xs = [log_taus[j] for j in seen]
        ys = [math.log(max(mean_square[j] / weight[j], 1e-24)) for j in seen]
        points = [_interpolate(x, xs, ys) for x in log_taus]
    else:
        points = [0.0] * len(log_taus)
    return math.exp(0.5 * _interpolate(-math.log1p(-float(gamma)), log_taus, points))


def reference_normalizer_update(normalizer, gammas, targets: np.ndarray) -> None:
    """Fold a batch of TD targets [B, G] (cumulant units) into ``normalizer``: each γ of Γ_t in order, one
    exponential-average step per point at ``rate`` times the point's weight."""
    log_taus = normalizer.log_taus.tolist()
    mean_square, weight = normalizer.mean_square.tolist(), normalizer.weight.tolist()
    for k, gamma in enumerate(gammas):
        batch_mean_square = float(np.mean(np.square(np.asarray(targets, dtype=np.float64)[:, k])))
        for j, w in enumerate(_point_weights(log_taus, float(gamma))):
            step = normalizer.rate * w
            mean_square[j] = (1.0 - step) * mean_square[j] + step * batch_mean_square
            weight[j] = (1.0 - step) * weight[j] + step
    with torch.no_grad():
        normalizer.mean_square.copy_(torch.as_tensor(mean_square, dtype=torch.float64))
        normalizer.weight.copy_(torch.as_tensor(weight, dtype=torch.float64))


def _scale(learner, net, gamma: float) -> float:
    """s(γ): 1 / σ(γ) of ``net``'s normalizer (``normalized``), 1 - γ (loss scaling) or 1."""
    if learner.config.scaling == "normalized":
        return 1.0 / reference_sigma(net.normalizer, gamma)
    return float(output_scale(torch.tensor([gamma], dtype=torch.float64), learner.config.scaling)[0])


def reference_gradients(learner, batch: NStepBatch, gammas: np.ndarray) -> tuple[float, np.ndarray]:
    """Accumulate into ``learner.online``'s .grad the loss of a batch, one γ at a time.

    With ``normalized`` scaling the targets (cumulant units, the target network at its own σ)
    first update the online network's normalizer, as in the learner.

    Returns:
      (loss, δ [B, G]) — the same loss as the tiled batch: the mean over the B·G pairs of w_b δ².
    """
    dev = learner.device
    phi = torch.as_tensor(batch.features, device=dev)
    phi_t = torch.as_tensor(batch.bootstrap_features, device=dev)
    returns = batch.nstep_returns(gammas)
    discounts = batch.bootstrap_discounts(gammas)
    w = importance_weights(batch.probabilities) if learner.config.importance_weights else np.ones(len(batch.indices))
    weights = torch.as_tensor(w, dtype=torch.float32, device=dev)
    G = len(gammas)
    bootstrap = []  # V(S_{t+n}, γ) of the target network, in the cumulant's units
    for k in range(G):
        g = torch.tensor([gammas[k]], dtype=torch.float32, device=dev)
        with torch.no_grad():
            v_t = learner.target(phi_t, g)[:, 0].double().cpu().numpy()
        bootstrap.append(v_t / _scale(learner, learner.target, float(gammas[k])))
    if learner.config.scaling == "normalized":
        targets = np.stack([returns[:, k] + discounts[:, k] * bootstrap[k] for k in range(G)], axis=1)
        reference_normalizer_update(learner.online.normalizer, gammas, targets)
    total, deltas = 0.0, []
    for k in range(G):
        g = torch.tensor([gammas[k]], dtype=torch.float32, device=dev)
        scale = _scale(learner, learner.online, float(gammas[k]))
        v_tm1 = learner.online(phi, g)[:, 0]
        target = scale * (returns[:, k] + discounts[:, k] * bootstrap[k])
        delta = torch.as_tensor(target, dtype=torch.float32, device=dev) - v_tm1
        loss = (weights * delta.square()).mean() / G
        loss.backward()
        total += float(loss.detach())
        deltas.append(delta.detach().cpu().numpy())
    return total, np.stack(deltas, axis=1)


def reference_update(learner) -> float:
    """One update of a Γ-net learner the straightforward way: sample, loop over Γ_t, one Adam step."""
    batch = learner.replay.sample(learner.config.batch_size)
    gammas = learner.training_gammas()
    learner.optimizer.zero_grad(set_to_none=True)
    loss, delta = reference_gradients(learner, batch, gammas)
    if not math.isfinite(loss):
        raise RuntimeError(f"reference update: loss {loss}")
    learner.optimizer.step()
    learner.replay.update_priorities(batch.indices, priorities_from_losses(delta**2, learner.config.priority))
    learner.updates += 1
    if learner.sync_due():
        learner.sync_target()
    return loss


class ReferenceSumTree:
    """A sum tree kept as per-level Python lists, one item per call (Dopamine's original layout)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        depth = max(1, math.ceil(math.log2(capacity))) if capacity > 1 else 0
        self.levels = [[0.0] * (2**d) for d in range(depth + 1)]

    @property
    def total(self) -> float:
        return self.levels[0][0]

    def set(self, index: int, value: float) -> None:
        self.levels[-1][index] = float(value)
        for d in range(len(self.levels) - 2, -1, -1):
            index //= 2
            below = self.levels[d + 1]
            self.levels[d][index] = below[2 * index] + below[2 * index + 1]

    def get(self, index: int) -> float:
        return self.levels[-1][index]

    def query(self, target: float) -> int:
        index = 0
        for below in self.levels[1:]:
            left = below[2 * index]
            if target >= left and below[2 * index + 1] > 0.0:
                target -= left
                index = 2 * index + 1
            else:
                index = 2 * index
        return index


def reference_window(cumulants, terminals, truncateds, start: int, n: int):
    """The n-step window at record ``start`` of a whole recording, by walking it step by step.

    Returns:
      None if no target can be formed there, else (cumulants list, bootstrap record index or None).
    """
    window = []
    for j in range(n):
        t = start + j
        if t >= len(cumulants):
            return None  # the recording stops before the window closes
        if truncateds[t] and not terminals[t]:
            # S_{t+1} was never recorded: stop at S_t, the last state seen.
            return (window, t) if j >= 1 else None
        window.append(float(cumulants[t]))
        if terminals[t]:
            return window, None
    return (window, start + n) if start + n < len(cumulants) else None
