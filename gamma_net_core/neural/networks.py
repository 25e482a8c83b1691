"""Γ-nets and fixed-timescale probe networks (the paper's Atari architecture), and loss scaling.

Architecture (section "Atari Environment", "Training" and "Embedding Comparison"): the
agent's features φ (512 values) are combined with the timescale inputs u(γ) through an
embedding e = e(φ, γ), followed by five fully connected layers of sizes
[512, 256, 128, 16, 1], ReLU on all but the last.

Timescale inputs u(γ) ("Timescale Input Comparison"): ``gamma`` -> [γ]; ``tau`` ->
[τ / τ_max] (τ = 1 / (1 - γ), the paper divides by τ_max = 100); ``both`` -> [γ, τ / τ_max]
(the reference configuration).

Embeddings:
- ``direct``: e = [φ, u], a concatenation.
- ``l_embed`` (Xu et al.): a learned 16-vector ξ = act(W u + b), e = [φ, ξ].
- ``h_l_embed``: a learned vector ξ = act(W u + b) of φ's size, e = φ ⊙ ξ (Hadamard).
- ``matrix`` (appendix, "Matrix Embedding"): a layer whose output is a |φ| × |φ| matrix
  Ξ = act(W u + b), e = φᵀ Ξ. The paper does not give its initialization; ours starts Ξ at
  the identity plus noise (bias = I, weights of variance 1 / (|u| |φ|)), so e ≈ φ at first
  instead of a sum of 512 products that would swamp the next layer.
``act`` is linear or ReLU ("Linear and ReLU Embedding Activations"); ``direct`` has no
embedding layer, so it has no activation to choose.

One call predicts a batch of states at a set of timescales: ``net(features [B, D], gammas
[G]) -> [B, G]``. This is the paper's tiling of a batch of 32 with |Γ_t| = 8 timescales
into one batch of 256, without copying φ 8 times where the algebra allows: for the
concatenating embeddings the first layer W [φ, ξ] + b is computed as W_φ φ (B rows) plus
W_ξ ξ + b (G rows), broadcast to [B, G] — the same function and the same parameters as the
concatenation (:func:`gamma_net_core.neural.reference.reference_forward` is the plain
version, and the tests hold the two equal); the matrix embedding builds Ξ once per distinct
γ, not once per sample.

Loss scaling ("Generalizing over Timescale"): with scaling, the network's output is the
value of the scaled cumulant, f(s, γ) = (1 - γ) V(s, γ), so the TD error of f is
(1 - γ) times the TD error of V (the paper's n-step derivation; see
:mod:`gamma_net_core.neural.td`), and a prediction is V = f / (1 - γ). :func:`output_scale`
gives the factor.

"Scaled δ and θ" (appendix, Atari@200M scaling figure) — how we read it. The paper: the
error at initialization is larger with scaling "due to the division by (1 - γ) ... which
has the effect of amplifying the noise in the initialization. To counter this we tried
reducing the initial network weights, θ, by multiplying by (1 - γ)". We read:
1. θ means the output layer's weights and bias, not every layer: the output is linear in
   that layer, so multiplying it by c multiplies f at initialization by exactly c, and
   V = f / (1 - γ) then carries no more initial noise than an unscaled network when
   c = 1 - γ; multiplying all five layers would shrink f by about c⁵ and starve the lower
   layers of gradient.
2. For a probe network (one fixed γ) c = 1 - γ, literally the paper's words.
3. For a Γ-net, γ is an input, so no single weight multiplier equals (1 - γ) for every γ.
   We use c = 1 - γ_max = 1 / τ_max, the largest γ trained on: the amplification 1 / (1 - γ)
   is largest there, and with this c the initial |V(s, γ)| = |g(s, γ)| (1 - γ_max) / (1 - γ)
   is at most what an unscaled network g would output, at every γ in the training range.
   (A probe network is the special case γ_max = γ.) The scaling of δ stays per γ.
It changes only the initial weights; learning is the same as ``delta``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gamma_net_core.timescales import validate_gammas

EMBEDDINGS = ("direct", "l_embed", "h_l_embed", "matrix")
TIMESCALE_INPUTS = ("gamma", "tau", "both")
EMBEDDING_ACTIVATIONS = ("linear", "relu")
SCALINGS = ("none", "delta", "delta_theta", "normalized")
#: Timescales on which a normalizer keeps its running mean square (``normalized``), spread on log τ.
NORMALIZER_POINTS = 16
#: How fast a normalizer forgets: its mean squares weigh about the last 1 / rate updates (all of them, bias-corrected,
#: in a shorter run). Slow on purpose: σ is fed by bootstrapped targets, which scale with σ, so it must move slower
#: than the network fits them; at 1e-3 and 1e-2 a raw-feature chain's long timescales drifted (docs/neural.md).
NORMALIZER_RATE = 1e-4
#: The paper's fully connected layers after the embedding, without the final 1.
HIDDEN_SIZES = (512, 256, 128, 16)
#: Xu et al.'s learned timescale vector, as the paper uses it (l_embed).
L_EMBED_SIZE = 16


def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {value!r}")


def timescale_inputs(gammas: torch.Tensor, inputs: str, tau_max: float) -> torch.Tensor:
    """u(γ): the timescale as the network sees it, [G, 1] or [G, 2] (γ and/or τ / τ_max)."""
    gammas = gammas.reshape(-1, 1)
    if inputs == "gamma":
        return gammas
    scaled_tau = 1.0 / ((1.0 - gammas) * tau_max)
    if inputs == "tau":
        return scaled_tau
    return torch.cat([gammas, scaled_tau], dim=1)


def _uniform_(tensor: torch.Tensor, bound: float, generator: torch.Generator | None) -> None:
    with torch.no_grad():
        tensor.uniform_(-bound, bound, generator=generator)


def _linear(fan_in: int, fan_out: int, generator: torch.Generator | None) -> nn.Linear:
    """nn.Linear with PyTorch's default initialization (U(±1/sqrt(fan_in))), drawn from ``generator``."""
    layer = torch.nn.utils.skip_init(nn.Linear, fan_in, fan_out)
    _uniform_(layer.weight, 1.0 / math.sqrt(fan_in), generator)
    _uniform_(layer.bias, 1.0 / math.sqrt(fan_in), generator)
    return layer


class GammaNet(nn.Module):
    """A Γ-net: V(s, γ) (or f(s, γ) with loss scaling) for any γ, from φ(s) and u(γ).

    Args:
      feature_size: |φ| (the paper: 512).
      inputs: ``gamma``, ``tau`` or ``both`` (see the module docstring).
      tau_max: the τ that τ inputs are divided by (the paper: 100).
      embedding: ``direct``, ``l_embed``, ``h_l_embed`` or ``matrix``.
      embedding_activation: ``linear`` or ``relu``, for the embedding layer.
      hidden_sizes: the layers after the embedding, before the final 1 (the paper: 512, 256, 128, 16).
      generator: the torch generator the initial weights are drawn from (seeded by the caller).
    """

    def __init__(
        self,
        *,
        feature_size: int = 512,
        inputs: str = "both",
        tau_max: float = 100.0,
        embedding: str = "direct",
        embedding_activation: str = "linear",
        hidden_sizes: Sequence[int] = HIDDEN_SIZES,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        _check_choice("inputs", inputs, TIMESCALE_INPUTS)
        _check_choice("embedding", embedding, EMBEDDINGS)
        _check_choice("embedding_activation", embedding_activation, EMBEDDING_ACTIVATIONS)
        if embedding == "direct" and embedding_activation != "linear":
            raise ValueError("the direct embedding has no embedding layer, so no activation: use 'linear'")
        if not tau_max >= 1.0:
            raise ValueError(f"tau_max must be >= 1; got {tau_max!r}")
        if feature_size < 1 or not hidden_sizes or min(hidden_sizes) < 1:
            raise ValueError(f"feature_size {feature_size!r} and hidden_sizes {hidden_sizes!r} must be positive")
        self.feature_size = int(feature_size)
        self.inputs = inputs
        self.tau_max = float(tau_max)
        self.embedding_kind = embedding
        self.embedding_activation = embedding_activation
        n_inputs = 2 if inputs == "both" else 1
        D = self.feature_size
        if embedding == "direct":
            self.embed_layer = None
            embedded = D + n_inputs
        elif embedding == "l_embed":
            self.embed_layer = _linear(n_inputs, L_EMBED_SIZE, generator)
            embedded = D + L_EMBED_SIZE
        elif embedding == "h_l_embed":
            self.embed_layer = _linear(n_inputs, D, generator)
            embedded = D
        else:
            self.embed_layer = torch.nn.utils.skip_init(nn.Linear, n_inputs, D * D)
            _uniform_(self.embed_layer.weight, math.sqrt(3.0 / (n_inputs * D)), generator)
            with torch.no_grad():
                self.embed_layer.bias.copy_(torch.eye(D).reshape(-1))
            embedded = D
        sizes = [embedded, *hidden_sizes, 1]
        self.layers = nn.ModuleList(_linear(a, b, generator) for a, b in itertools.pairwise(sizes))

    @property
    def output_layer(self) -> nn.Linear:
        return self.layers[-1]

    def _activate(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x) if self.embedding_activation == "relu" else x

    def timescale_embedding(self, gammas: torch.Tensor) -> torch.Tensor:
        """What the timescale contributes: u [G, k] (direct), ξ [G, 16] or [G, D], or Ξ [G, D, D]."""
        u = timescale_inputs(gammas, self.inputs, self.tau_max)
        if self.embed_layer is None:
            return u
        xi = self._activate(self.embed_layer(u))
        if self.embedding_kind == "matrix":
            return xi.reshape(-1, self.feature_size, self.feature_size)
        return xi

    def embedding(self, features: torch.Tensor, gammas: torch.Tensor) -> torch.Tensor:
        """e(φ, γ) for every state and timescale, materialized: [B, G, E]."""
        xi = self.timescale_embedding(gammas)
        B, G = features.shape[0], xi.shape[0]
        if self.embedding_kind in ("direct", "l_embed"):
            return torch.cat([features[:, None, :].expand(B, G, -1), xi[None, :, :].expand(B, G, -1)], dim=2)
        if self.embedding_kind == "h_l_embed":
            return features[:, None, :] * xi[None, :, :]
        return torch.einsum("bd,gde->bge", features, xi)

    def forward(self, features: torch.Tensor, gammas: torch.Tensor) -> torch.Tensor:
        """The network's output for each state and each γ: features [B, D], gammas [G] -> [B, G]."""
        first = self.layers[0]
        if self.embedding_kind in ("direct", "l_embed"):
            xi = self.timescale_embedding(gammas)
            D = self.feature_size
            from_state = F.linear(features, first.weight[:, :D])  # [B, H]
            from_timescale = F.linear(xi, first.weight[:, D:], first.bias)  # [G, H]
            h = F.relu(from_state[:, None, :] + from_timescale[None, :, :])
        else:
            h = F.relu(first(self.embedding(features, gammas)))
        for layer in self.layers[1:-1]:
            h = F.relu(layer(h))
        return self.layers[-1](h).squeeze(-1)


class ProbeNets(nn.Module):
    """Fixed-timescale probe networks: P independent networks, each the Γ-net's layers without timescale input.

    The paper trains one such network per probe timescale. They are stored stacked
    (weights [P, in, out]) so that all P run in one batched pass; probe p's parameters
    and gradients never mix with another's. With P = 1 this is the paper's single network.

    Args:
      gammas: the fixed timescale of each probe, [P], in [0, 1).
      feature_size, hidden_sizes, generator: as :class:`GammaNet`.
    """

    def __init__(
        self,
        *,
        gammas: Sequence[float],
        feature_size: int = 512,
        hidden_sizes: Sequence[int] = HIDDEN_SIZES,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        g = validate_gammas(gammas, name="probe gamma")
        if np.unique(g).size != g.size:
            raise ValueError(f"probe gammas must be distinct; got {g.tolist()}")
        if feature_size < 1 or not hidden_sizes or min(hidden_sizes) < 1:
            raise ValueError(f"feature_size {feature_size!r} and hidden_sizes {hidden_sizes!r} must be positive")
        self.feature_size = int(feature_size)
        self.register_buffer("gammas", torch.as_tensor(g, dtype=torch.float32))
        P = g.size
        sizes = [self.feature_size, *hidden_sizes, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in itertools.pairwise(sizes):
            bound = 1.0 / math.sqrt(fan_in)
            w = torch.empty(P, fan_in, fan_out)
            b = torch.empty(P, 1, fan_out)
            for p in range(P):  # each probe drawn as its own nn.Linear would be
                _uniform_(w[p], bound, generator)
                _uniform_(b[p], bound, generator)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(b))

    @property
    def n_probes(self) -> int:
        return int(self.gammas.shape[0])

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Every probe's output, probe p at its own γ: features [B, D] (the same states for every probe) or
        [P, B, D] (probe p's own states, as when each probe samples its own batch) -> [B, P]."""
        if features.dim() == 2:
            features = features[None].expand(self.n_probes, -1, -1)
        h = torch.baddbmm(self.biases[0], features, self.weights[0])
        # Indexed, not sliced: a sliced ParameterList re-wraps its tensors as new leaves, which would cut the
        # gradient when torch.func.functional_call substitutes them (the learner ensemble).
        for i in range(1, len(self.weights)):
            h = torch.baddbmm(self.biases[i], F.relu(h), self.weights[i])
        return h.squeeze(-1).transpose(0, 1)


def output_scale(gammas: torch.Tensor, scaling: str) -> torch.Tensor:
    """The factor between the network's output and V: (1 - γ) with loss scaling, else 1. Same shape as gammas.

    ``normalized`` has no fixed factor: a network's :class:`TimescaleNormalizer` gives it.
    """
    _check_choice("scaling", scaling, SCALINGS)
    if scaling == "normalized":
        raise ValueError("scaling 'normalized' has no fixed output scale: use the network's normalizer")
    return 1.0 - gammas if scaling != "none" else torch.ones_like(gammas)


def _interpolation(x: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Weights [N, K] that interpolate linearly at each x [N] between ``points`` [K] (increasing), constant
    beyond the ends: row n holds 1 - f and f at the two points around x_n."""
    K = points.shape[0]
    if K == 1:
        return torch.ones(x.shape[0], 1, dtype=torch.float64, device=x.device)
    x = x.clamp(points[0], points[-1])
    right = torch.searchsorted(points, x, right=True).clamp(1, K - 1)
    left = right - 1
    frac = (x - points[left]) / (points[right] - points[left])
    weights = torch.zeros(x.shape[0], K, dtype=torch.float64, device=x.device)
    weights.scatter_add_(1, left[:, None], (1.0 - frac)[:, None])
    weights.scatter_add_(1, right[:, None], frac[:, None])
    return weights


class TimescaleNormalizer(nn.Module):
    """σ(γ), the running RMS of the TD targets at each timescale: the output is V / σ(γ) (``normalized``).

    The loss scaling ``delta`` fixes the output's scale to (1 - γ): right when V grows like τ
    (a cumulant of one sign), but where V stays bounded (cumulants of both signs, episodes
    ending) it divides the long timescales' errors by τ in the loss and multiplies them by τ
    in the prediction, so they are barely learned. Normalizing each timescale by the size of
    its own targets fits both: every timescale's error counts relative to its values.

    The mean square of the targets (in the cumulant's units) is kept at ``points`` timescales
    spread evenly on log τ between ``tau_min`` and ``tau_max``; a target at γ updates the two
    points around its log τ by their linear-interpolation weights, and log σ(γ) interpolates
    the points' logs on log τ the same way (constant beyond the ends; a power of τ, such as
    V ∝ τ, exactly). Each point is an exponential average at ``rate`` per unit of weight,
    divided by its accumulated weight (Adam's bias correction), so the first update already
    gives the targets' scale; a point no target reached takes its neighbours' (interpolated),
    and σ = 1 before any target. It lives in the network's buffers, so the target network
    keeps the σ of its weights until a sync and a checkpoint holds it.

    Args:
      taus: the timescales of the points, as τ, increasing (probe networks: their own τ).
      rate: the averages' step per unit of weight (:data:`NORMALIZER_RATE`).
    """

    def __init__(self, taus: Sequence[float], rate: float = NORMALIZER_RATE) -> None:
        super().__init__()
        taus = np.asarray(taus, dtype=np.float64)
        if taus.ndim != 1 or taus.size < 1 or not (np.diff(taus) > 0).all() or not (taus >= 1.0).all():
            raise ValueError(f"normalizer taus must be increasing values >= 1; got {taus.tolist()}")
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"normalizer rate must be in (0, 1]; got {rate!r}")
        self.rate = float(rate)
        self.register_buffer("log_taus", torch.as_tensor(np.log(taus), dtype=torch.float64))
        self.register_buffer("mean_square", torch.zeros(taus.size, dtype=torch.float64))
        self.register_buffer("weight", torch.zeros(taus.size, dtype=torch.float64))

    @classmethod
    def spanning(cls, tau_min: float, tau_max: float, points: int = NORMALIZER_POINTS) -> TimescaleNormalizer:
        """A normalizer with ``points`` timescales evenly on log τ from ``tau_min`` to ``tau_max``."""
        return cls(np.geomspace(tau_min, tau_max, points) if tau_max > tau_min else [tau_min])

    def interpolation(self, gammas: torch.Tensor, log_taus: torch.Tensor | None = None) -> torch.Tensor:
        """Each γ's weights on the points (or on ``log_taus``, increasing), [G, K]: linear on log τ, all on the
        end point beyond the ends."""
        log_taus = self.log_taus if log_taus is None else log_taus
        g = gammas.detach().to(device=log_taus.device, dtype=torch.float64).reshape(-1)
        return _interpolation(-torch.log1p(-g), log_taus)

    def log_mean_squares(self) -> torch.Tensor:
        """Each point's log mean square of the targets, [K]. A point no target has reached yet (only integer
        τ drawn, or early on) takes the interpolation of the points that have; all 0 (σ = 1) while none has."""
        seen = self.weight > 0
        if not bool(seen.any()):
            return torch.zeros_like(self.mean_square)
        estimate = (self.mean_square[seen] / self.weight[seen]).clamp_min(1e-24).log()
        return _interpolation(self.log_taus, self.log_taus[seen]) @ estimate

    def sigma(self, gammas: torch.Tensor) -> torch.Tensor:
        """σ(γ) for each γ, float64 [G]: the RMS of the targets, interpolated between the points log-log (a
        power of τ, as V ∝ τ for a cumulant of one sign, exactly)."""
        return (0.5 * (self.interpolation(gammas) @ self.log_mean_squares())).exp()

    def output_scale(self, gammas: torch.Tensor) -> torch.Tensor:
        """The factor between the output and V, 1 / σ(γ), in gammas' dtype and device: [G]."""
        return (1.0 / self.sigma(gammas)).to(dtype=gammas.dtype, device=gammas.device)

    @torch.no_grad()
    def update(self, gammas: torch.Tensor, targets: torch.Tensor) -> None:
        """Fold in one batch of TD targets in the cumulant's units, [B, G] at ``gammas`` [G]."""
        step = self.rate * self.interpolation(gammas)  # [G, K]
        batch_mean_square = targets.detach().to(torch.float64).square().mean(dim=0).to(self.mean_square.device)
        # Γ_t's timescales in order, each one exponential-average step (the reference loops): the k-th's
        # contribution decays by the steps after it, so later[k] = prod_{j > k} (1 - step_j).
        keep = 1.0 - step
        later = torch.cat([keep.flip(0).cumprod(0).flip(0)[1:], torch.ones_like(keep[:1])])
        decay = keep.prod(dim=0)
        self.mean_square.mul_(decay).add_((step * later * batch_mean_square[:, None]).sum(dim=0))
        self.weight.mul_(decay).add_((step * later).sum(dim=0))


def scale_initial_output_(net: GammaNet | ProbeNets, factor) -> None:
    """Multiply the output layer's weights and bias by ``factor`` (the "scaled θ" reading above).

    Args:
      factor: a float for a Γ-net (1 - γ_max); [P] for probe networks (1 - γ_p each).
    """
    with torch.no_grad():
        if isinstance(net, ProbeNets):
            f = torch.as_tensor(np.broadcast_to(np.asarray(factor, dtype=np.float32), (net.n_probes,)).copy())
            net.weights[-1].mul_(f[:, None, None])
            net.biases[-1].mul_(f[:, None, None])
        else:
            net.output_layer.weight.mul_(float(factor))
            net.output_layer.bias.mul_(float(factor))
