"""The neural learner: a Γ-net (or probe networks) trained from prioritized n-step replay, as in the Atari study.

The loop it runs (the paper, "Training" and appendix): each observed step goes into the
replay; once ``min_replay_history`` steps have been seen, every ``update_period``-th step
triggers one update:

    batch   = replay.sample(32)                       # n-step windows, undiscounted
    Gamma_t = sampler.sample()                        # 8 timescales: τ = 1 and 100, 3 on γ, 3 on integer τ
    G, disc = batch.nstep_returns(Gamma_t), batch.bootstrap_discounts(Gamma_t)   # [32, 8]
    δ       = s(γ) G + disc · target_net(φ_{t+n}, Gamma_t) - net(φ_t, Gamma_t)   # one [32, 8] pass each
              # s(γ): the output's scale (``scaling``): 1 / σ(γ) by default, σ the targets' running RMS
              # per timescale (updated from this batch's targets first; the target net's own σ
              # converts its output); the paper's 1 - γ (``delta``); or 1
    loss    = mean(w_b δ²)  with w the importance weights (a setting); one Adam step
    priority_b = sqrt(max_k δ_{b,k}² + 1e-10)     # the `priority` setting: Dopamine's; or max_k δ² + 1e-10
    every target_sync_period agent steps (transitions): target_net <- net

Probe networks (``network: probes``) are trained as the paper's separate fixed-timescale
networks would be: each probe p samples its own batch by its own priorities (its own sum
tree over the shared records), its loss is the mean over its batch of w δ_p², the probes'
losses add (so each probe's gradient is what its own network would get), and each probe's
priorities follow its own errors only.

The target network is copied every ``target_sync_period`` agent steps, Dopamine's unit for
``target_update_period`` and so the paper's ("sync interval 10000" = 2,500 updates at one
update per 4 steps): a sync falling between two updates takes effect right after the
earlier one, which is the same thing since the network only changes at updates.

Use, online (what a ROS node calls per Transition message) or offline::

    learner = NeuralLearner(NeuralConfig(...))
    learner.observe(phi, cumulant, terminal=False, truncated=False)   # one step; returns the loss if it trained
    learner.observe_many(phis, cumulants, terminals, truncateds)      # a recording, same result as a loop
    values = learner.predict(phis, gammas)                            # [B, G], in the cumulant's units
    learner.save(path); learner = NeuralLearner.load(path)
"""

from __future__ import annotations

import copy
import json
import math
import os
import pathlib
import sys
from dataclasses import dataclass

import numpy as np
import torch

from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_torch, save_torch
from gamma_net_core.config import from_mapping, setting, to_mapping, validate
from gamma_net_core.neural.interpolation import SCALES, interpolate
from gamma_net_core.neural.networks import (
    EMBEDDING_ACTIVATIONS,
    EMBEDDINGS,
    HIDDEN_SIZES,
    SCALINGS,
    TIMESCALE_INPUTS,
    GammaNet,
    ProbeNets,
    TimescaleNormalizer,
    output_scale,
    scale_initial_output_,
)
from gamma_net_core.neural.replay import (
    PRIORITY_RULES,
    NStepBatch,
    PrioritizedReplay,
    importance_weights,
    priorities_from_losses,
)
from gamma_net_core.neural.td import td_errors, weighted_squared_loss
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, gamma_from_tau, validate_gammas

CHECKPOINT_FORMAT = "gamma_net_core.neural.NeuralLearner"
#: 2: the target sync counted in agent steps, one set of priorities per probe network.
CHECKPOINT_VERSION = 2
#: The entries of :meth:`NeuralLearner.state_dict`: a checkpoint missing one is refused by name.
STATE_KEYS = (
    "format", "version", "config", "online", "target", "optimizer", "replay", "timescale_rng", "transitions", "updates"
)  # fmt: skip
#: Settings that may differ between a checkpoint and the learner that loads it.
PORTABLE_SETTINGS = ("device",)
#: γ values predicted per forward pass: bounds memory (the matrix embedding builds a |φ|² matrix per γ).
PREDICT_CHUNK = 64
#: The default Adam step size: 6.25e-5 (the paper's) learns too little in the 10⁴ updates of a small problem; on the
#: zoo 5e-4 had a lower worst error over tau than 2.5e-4 on 10 of 14 problems (docs/choosing-settings.md).
STEP_SIZE = 5e-4
#: The default fully connected layers: the paper's [512, 256, 128, 16] cost a CPU 2 to 3 times as much per update
#: on the zoo's problems and were no more accurate there (docs/zoo.md, "At the defaults").
DEFAULT_HIDDEN_SIZES = (64, 64)
#: The default n of the n-step returns: a long timescale's value is carried n steps per target sync, and the paper's
#: 4 leaves τ 30-100 short of it in 10⁴ updates; on the zoo 32 to 64 had the lowest worst error over tau of 4 to 64,
#: and with the average of the weights 64 the lower of the two (docs/choosing-settings.md, "The neural Γ-net").
DEFAULT_N_STEP = 64
#: The default decay of the predicting network's average of the weights (``average_decay``): an average over about the
#: last 100 updates. A network trained at a constant step size keeps moving about where it settles; on the zoo, fed
#: the linear Γ-net's tiles, the average brought it within 2x the linear Γ-net's error on more problems, and 0.99
#: did as well as 0.995 at half the lag (docs/choosing-settings.md, "The neural Γ-net").
DEFAULT_AVERAGE_DECAY = 0.99
#: Settings a configuration saved before they existed learned with (the saved configuration lacks them).
_BEFORE_SETTINGS = {"average_decay": 0.0}
#: The paper's Atari settings where :class:`NeuralConfig`'s defaults differ (config/atari.yaml spells out all).
PAPER_SETTINGS = {
    "hidden_sizes": HIDDEN_SIZES,
    "scaling": "delta",
    "step_size": 6.25e-5,
    "batch_size": 32,
    "min_replay_history": 20_000,
    "update_period": 4,
    "target_sync_period": 10_000,
    "n_step": 4,
    "average_decay": 0.0,
}


@dataclass(frozen=True)
class NeuralConfig:
    """Settings of a neural learner (sources in each help).

    The defaults hold at every timescale on small problems as on Atari: the paper's Γ_t and
    replay, with the output normalized per timescale, 64-step returns, two hidden layers of 64,
    batches of 64 every 8 steps, the target network synced every 100 steps, training from the
    1,000th step, a larger step size and predictions from an average of the weights, chosen on
    the zoo (docs/zoo.md, "At the defaults"; docs/neural.md, "Defaults", has the measurements).
    :meth:`paper` gives the paper's Atari settings, which the Atari and MinAtar studies use
    (config/atari.yaml, config/minatar.yaml).
    """

    network: str = setting(
        "gamma_net",
        "gamma_net: one network with the timescale as input; probes: one fixed-timescale network per probe_taus "
        "entry (the paper's comparison baseline, Evaluation; predictions between probes by interpolation)",
        choices=("gamma_net", "probes"),
    )
    feature_size: int = setting(512, "|φ|, values per feature vector (appendix table: φ dim 512)", low=1, high=10**6)
    hidden_sizes: tuple[int, ...] = setting(
        DEFAULT_HIDDEN_SIZES,
        "fully connected layers after the embedding, before the output 1 (paper: [512, 256, 128, 16, 1]; the "
        "default's two of 64 learn the zoo's problems as well at a third of the CPU time)",
        low=1,
        high=10**6,
    )
    embedding: str = setting(
        "direct",
        "how φ and the timescale inputs combine (paper, Embedding Comparison; reference: direct)",
        choices=EMBEDDINGS,
    )
    embedding_activation: str = setting(
        "linear",
        "activation of the embedding layer (paper appendix: linear generally better than relu)",
        choices=EMBEDDING_ACTIVATIONS,
    )
    timescale_inputs: str = setting(
        "both",
        "timescale as γ, τ/τ_max, or both (paper, Timescale Input Comparison; reference: both)",
        choices=TIMESCALE_INPUTS,
    )
    n_gamma: int = setting(
        3, "Γ_t: timescales drawn uniformly on the γ scale per update (paper, Training: 3)", low=0, high=4096
    )
    n_tau: int = setting(
        3, "Γ_t: timescales drawn uniformly on the τ scale per update (paper, Training: 3)", low=0, high=4096
    )
    tau_min: float = setting(1.0, "Γ_t lower bound, as τ in steps (paper: 1)", low=1.0, high=1e9)
    tau_max: float = setting(
        100.0, "Γ_t upper bound, as τ in steps; also divides τ inputs (paper: 100)", low=1.0, high=1e9
    )
    include_bounds: bool = setting(True, "Γ_t always holds tau_min and tau_max (paper: always)")
    integer_tau: bool = setting(True, "draw τ-scale timescales from the integers (paper, Training)")
    probe_taus: tuple[float, ...] = setting(
        (1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0),
        "network=probes: the fixed timescales, as τ in steps (paper, Evaluation: the probe timescales)",
        low=1.0,
        high=1e9,
    )
    interpolation_scale: str = setting(
        "tau",
        "network=probes: scale on which predictions between probes are interpolated (paper: both compared)",
        choices=SCALES,
    )
    scaling: str = setting(
        "normalized",
        "normalized: the output is V over a running RMS of the TD targets at its timescale, so every timescale's "
        "error counts relative to its values (holds whether V grows like τ or stays bounded; networks' "
        "TimescaleNormalizer); none; delta: TD error scaled by (1-γ) (paper, Generalizing over Timescale; the "
        "Atari reference and probes: config/atari.yaml), which leaves long timescales unlearned where V stays "
        "bounded; delta_theta: also the output layer's initial weights times (1-γ_max) (appendix, Atari@200M)",
        choices=SCALINGS,
    )
    step_size: float = setting(
        STEP_SIZE, "Adam step size (paper: 6.25e-5, appendix table and sweep, over 1.25M updates)", low=1e-12, high=10.0
    )
    adam_eps: float = setting(
        1e-8,
        "Adam epsilon (appendix table: 1e-8; the published Rainbow agents were trained with 1.5e-4, Dopamine's "
        "rainbow.gin after Hessel et al.; 3.125e-4 is only rainbow_agent.py's unused default argument)",
        low=0.0,
        high=1.0,
    )
    batch_size: int = setting(
        64,
        "sampled transitions per update, each tiled with all of Γ_t (appendix: 32; the default samples as many "
        "transitions a step as the paper's in half the updates, with update_period 8)",
        low=1,
        high=65536,
    )
    n_step: int = setting(
        DEFAULT_N_STEP,
        "n of the n-step returns, in agent steps (appendix table: 4; the default carries long timescales' values "
        "further per target sync)",
        low=1,
        high=1000,
    )
    replay_capacity: int = setting(100_000, "steps held in the replay (appendix table: 100000)", low=2, high=10**9)
    min_replay_history: int = setting(
        1_000, "steps observed before the first update (paper: 20000, appendix table)", low=0, high=10**12
    )
    update_period: int = setting(
        8,
        "one update every this many observed steps (appendix: every 4 steps; the default halves the updates, a "
        "CPU's cost, with batches twice the size)",
        low=1,
        high=10**9,
    )
    target_sync_period: int = setting(
        100,
        "agent steps (transitions observed) between copies of the network into the target network; each copy "
        "carries values n_step steps further, so τ_max needs many (paper: sync interval 10000, appendix table, "
        "Dopamine's target_update_period, counted in agent steps: 2,500 updates at update_period 4)",
        low=1,
        high=10**12,
    )
    priority: str = setting(
        "sqrt_loss",
        "a sample's replay priority from its largest squared TD error across Γ_t: sqrt_loss = sqrt(loss + 1e-10) "
        "(Dopamine Rainbow's rule, which the paper's code builds on; the reference) or loss = loss + 1e-10 (the "
        "paper's text, 'the maximum squared loss across Γ_t')",
        choices=PRIORITY_RULES,
    )
    importance_weights: bool = setting(
        True,
        "weight each sample's loss by 1/sqrt(p) over its maximum (Dopamine Rainbow's β = 1/2; the paper does not "
        "mention them); false: plain mean",
    )
    average_decay: float = setting(
        DEFAULT_AVERAGE_DECAY,
        "predictions come from an exponential moving average of the network's weights, moved this much less than "
        "all the way to them after each update (Polyak averaging: about 1 / (1 - decay) updates; σ is the "
        "network's own); 0: predict with the network as trained (paper)",
        low=0.0,
        high=0.9999,
    )
    seed: int = setting(0, "seeds the initial weights, the replay's sampling and Γ_t", low=0, high=2**63 - 1)
    device: str = setting("cpu", "torch device: cpu, cuda, cuda:1, ... (not part of a checkpoint's identity)")

    def __post_init__(self) -> None:
        validate(self)
        _ = self.sampling  # TimescaleSampling checks tau_min < tau_max and a non-empty Γ_t
        taus = np.asarray(self.probe_taus, dtype=np.float64)
        if np.unique(taus).size != taus.size:
            raise ValueError(f"NeuralConfig.probe_taus must be distinct; got {self.probe_taus!r}")
        if self.replay_capacity <= self.n_step:
            raise ValueError(f"NeuralConfig.replay_capacity {self.replay_capacity} must exceed n_step {self.n_step}")

    @classmethod
    def paper(cls, **changes) -> NeuralConfig:
        """The paper's Atari settings (the reference configuration; :data:`PAPER_SETTINGS`), with ``changes``."""
        return cls(**{**PAPER_SETTINGS, **changes})

    @property
    def sampling(self) -> TimescaleSampling:
        """How Γ_t is drawn (the paper's Atari setting by default: 2 + 3 + 3, integer τ)."""
        return TimescaleSampling(
            n_gamma=self.n_gamma,
            n_tau=self.n_tau,
            tau_min=self.tau_min,
            tau_max=self.tau_max,
            include_bounds=self.include_bounds,
            integer_tau=self.integer_tau,
        )

    @property
    def probe_gammas(self) -> np.ndarray:
        """The probes' timescales as γ, increasing."""
        return np.sort(np.atleast_1d(gamma_from_tau(np.asarray(self.probe_taus, dtype=np.float64))))


def saved_config_mapping(mapping: dict) -> dict:
    """A saved neural learner's configuration as it was meant: a setting it lacks because it was saved before
    the setting existed takes the value it learned with (``average_decay`` 0: it predicted with its network);
    any other missing setting takes its default."""
    return {**_BEFORE_SETTINGS, **mapping}


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite: training stopped, nothing was learned from it, nothing is saved."""


def torch_device(name: str) -> torch.device:
    """The torch device a ``NeuralConfig.device`` names, checked to be usable here (else ValueError naming it)."""
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"NeuralConfig.device {name!r} is not a torch device: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"NeuralConfig.device {name!r} asks for CUDA, but torch.cuda.is_available() is False here")
    return device


def learner_seeds(config: NeuralConfig) -> list[np.random.SeedSequence]:
    """The seeds of a learner's replay sampling, Γ_t draws and initial weights, from ``config.seed``."""
    return np.random.SeedSequence(config.seed).spawn(3)


def build_network(config: NeuralConfig, weight_seed: np.random.SeedSequence) -> GammaNet | ProbeNets:
    """The initial network of a learner (on the CPU), its weights drawn from ``weight_seed``."""
    c = config
    generator = torch.Generator().manual_seed(int(weight_seed.generate_state(1, np.uint64)[0] >> 1))
    if c.network == "gamma_net":
        net = GammaNet(
            feature_size=c.feature_size,
            inputs=c.timescale_inputs,
            tau_max=c.tau_max,
            embedding=c.embedding,
            embedding_activation=c.embedding_activation,
            hidden_sizes=c.hidden_sizes,
            generator=generator,
        )
        theta_factor = 1.0 / c.tau_max  # 1 - γ_max; see networks' docstring
    else:
        gammas = c.probe_gammas
        net = ProbeNets(gammas=gammas, feature_size=c.feature_size, hidden_sizes=c.hidden_sizes, generator=generator)
        theta_factor = 1.0 - gammas
    if c.scaling == "delta_theta":
        scale_initial_output_(net, theta_factor)
    if c.scaling == "normalized":
        # A buffer of the network: the target network keeps the σ of its weights until a sync.
        net.normalizer = (
            TimescaleNormalizer.spanning(c.tau_min, c.tau_max)
            if c.network == "gamma_net"
            else TimescaleNormalizer(np.sort(np.asarray(c.probe_taus, dtype=np.float64)))
        )
    return net


class NeuralLearner:
    """A Γ-net or a set of probe networks, its target network, Adam, the replay and Γ_t sampling.

    Args:
      config: the settings (the paper's defaults); recorded in every checkpoint.
    """

    def __init__(self, config: NeuralConfig | None = None) -> None:
        self.config = config = config if config is not None else NeuralConfig()
        self.device = torch_device(config.device)
        replay_seed, timescale_seed, weight_seed = learner_seeds(config)
        self.is_gamma_net = config.network == "gamma_net"
        self.replay = PrioritizedReplay(
            capacity=config.replay_capacity,
            feature_size=config.feature_size,
            n=config.n_step,
            rng=np.random.default_rng(replay_seed),
            priority_sets=1 if self.is_gamma_net else len(config.probe_taus),
        )
        self.timescale_rng = np.random.default_rng(timescale_seed)
        self.sampler = TimescaleSampler(config.sampling, self.timescale_rng) if self.is_gamma_net else None
        self.probe_gammas = config.probe_gammas
        self.online = build_network(config, weight_seed).to(self.device)
        self.target = copy.deepcopy(self.online)
        self.target.requires_grad_(False)
        #: The average of the network's weights that predicts (``average_decay``), or None: the network predicts.
        self.average = None
        if config.average_decay > 0.0:
            self.average = copy.deepcopy(self.online)
            self.average.requires_grad_(False)
        self.optimizer = torch.optim.Adam(
            self.online.parameters(), lr=config.step_size, eps=config.adam_eps, fused=True
        )
        #: Steps observed so far.
        self.transitions = 0
        #: Learning updates made so far.
        self.updates = 0
        #: Why training stopped (a diverged loss), or None while it runs.
        self.stopped: str | None = None

    # ----------------------------------------------------------------- learning

    def training_gammas(self) -> np.ndarray:
        """The timescales of the next update: a fresh Γ_t for a Γ-net, the probes' γ for probe networks."""
        return self.sampler.sample() if self.is_gamma_net else self.probe_gammas

    def outputs(self, net: GammaNet | ProbeNets, features: torch.Tensor, gammas: torch.Tensor) -> torch.Tensor:
        """The raw network output (s(γ) V, see :meth:`output_scale`) for each state and γ: [B, G]."""
        return net(features, gammas) if self.is_gamma_net else net(features)

    def output_scale(self, net: GammaNet | ProbeNets, gammas: torch.Tensor) -> torch.Tensor:
        """s(γ), the factor from V to ``net``'s output: 1 / σ(γ) of its normalizer (``normalized``), 1 - γ with
        loss scaling, else 1: [G]."""
        if self.config.scaling == "normalized":
            return net.normalizer.output_scale(gammas)
        return output_scale(gammas, self.config.scaling)

    def _td_errors(self, gammas: np.ndarray, out_tm1, returns, discounts, out_t) -> torch.Tensor:
        """δ [B, G] in the online network's output units; with ``normalized``, first folds the batch's targets
        (in the cumulant's units, bootstrapped from the target network at its own σ) into the online network's
        normalizer, so that the targets are normalized by a σ that has seen them."""
        g = torch.as_tensor(gammas, dtype=out_tm1.dtype, device=out_tm1.device)
        if self.config.scaling != "normalized":
            return td_errors(out_tm1, returns, discounts, out_t, output_scale(g, self.config.scaling))
        exact = torch.as_tensor(gammas, dtype=torch.float64)  # σ's interpolation on the float64 γ, as predict's
        bootstrap = out_t / self.target.normalizer.output_scale(exact).to(out_t)
        self.online.normalizer.update(exact, returns + discounts * bootstrap)
        scale = self.online.normalizer.output_scale(exact).to(out_t)
        return td_errors(out_tm1, returns, discounts, bootstrap * scale, scale)

    def _weights(self, probabilities: np.ndarray) -> np.ndarray:
        if self.config.importance_weights:
            return importance_weights(probabilities)
        return np.ones_like(probabilities, dtype=np.float64)

    def loss(self, batch: NStepBatch, gammas: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The (importance-)weighted squared TD loss of a Γ-net's batch tiled with ``gammas``, and δ [B, G]."""
        dev, f32 = self.device, torch.float32
        phi = torch.as_tensor(batch.features, device=dev)
        phi_t = torch.as_tensor(batch.bootstrap_features, device=dev)
        g = torch.as_tensor(gammas, dtype=f32, device=dev)
        returns = torch.as_tensor(batch.nstep_returns(gammas), dtype=f32, device=dev)
        discounts = torch.as_tensor(batch.bootstrap_discounts(gammas), dtype=f32, device=dev)
        weights = torch.as_tensor(self._weights(batch.probabilities), dtype=f32, device=dev)
        with torch.no_grad():
            out_t = self.outputs(self.target, phi_t, g)
        out_tm1 = self.outputs(self.online, phi, g)
        delta = self._td_errors(gammas, out_tm1, returns, discounts, out_t)
        return weighted_squared_loss(delta, weights), delta

    def probe_loss(self, batches: list[NStepBatch]) -> tuple[torch.Tensor, torch.Tensor]:
        """Probe networks' loss, each probe on its own batch: the sum over probes of mean_b w_b δ², and δ [B, P].

        Args:
          batches: one batch per probe (probe p's sampled by its own priorities), in probe order.
        """
        dev, f32 = self.device, torch.float32
        gammas = self.probe_gammas
        phi = torch.as_tensor(np.stack([b.features for b in batches]), device=dev)  # [P, B, D]
        phi_t = torch.as_tensor(np.stack([b.bootstrap_features for b in batches]), device=dev)

        def per_probe(values) -> torch.Tensor:  # [P, B] -> [B, P]
            return torch.as_tensor(np.stack(values, axis=1), dtype=f32, device=dev)

        returns = per_probe([b.nstep_returns(gammas[p : p + 1])[:, 0] for p, b in enumerate(batches)])
        discounts = per_probe([b.bootstrap_discounts(gammas[p : p + 1])[:, 0] for p, b in enumerate(batches)])
        weights = per_probe([self._weights(b.probabilities) for b in batches])
        with torch.no_grad():
            out_t = self.target(phi_t)
        out_tm1 = self.online(phi)
        delta = self._td_errors(gammas, out_tm1, returns, discounts, out_t)
        return (weights * delta.square()).mean(dim=0).sum(), delta

    def update(self) -> float:
        """One learning update from a sampled batch; returns the loss.

        Raises:
          ValueError: the replay holds no complete window yet.
          TrainingDiverged: the loss is NaN or infinite; nothing was applied and training is stopped.
        """
        self._check_running()
        c = self.config
        normalizer = getattr(self.online, "normalizer", None)  # the loss folds its targets in: undone if it diverged
        before = None if normalizer is None else {k: v.clone() for k, v in normalizer.state_dict().items()}
        if self.is_gamma_net:
            batches = [self.replay.sample(c.batch_size)]
            loss, delta = self.loss(batches[0], self.training_gammas())
        else:
            batches = [self.replay.sample(c.batch_size, p) for p in range(self.replay.priority_sets)]
            loss, delta = self.probe_loss(batches)
        value = float(loss.detach())
        if not math.isfinite(value):
            if before is not None:
                normalizer.load_state_dict(before)
            self.stopped = (
                f"the loss became {value} at update {self.updates + 1} (after {self.transitions} steps); training "
                "stopped without applying it, and this learner will not save over the last checkpoint"
            )
            raise TrainingDiverged(self.stopped)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self._move_average()
        squared = delta.detach().square().cpu().numpy()
        if self.is_gamma_net:
            self.replay.update_priorities(batches[0].indices, priorities_from_losses(squared, c.priority))
        else:
            for p, batch in enumerate(batches):
                self.replay.update_priorities(batch.indices, priorities_from_losses(squared[:, p], c.priority), p)
        self.updates += 1
        if self.sync_due():
            self.sync_target()
        return value

    def _move_average(self) -> None:
        """Move the predicting average of the weights toward the network's; its σ is the network's own."""
        if self.average is None:
            return
        with torch.no_grad():
            mine, theirs = list(self.average.parameters()), list(self.online.parameters())
            torch._foreach_lerp_(mine, theirs, 1.0 - self.config.average_decay)
            for kept, current in zip(self.average.buffers(), self.online.buffers()):
                kept.copy_(current)

    @property
    def predicting(self) -> GammaNet | ProbeNets:
        """The network whose outputs are the predictions: the average of the weights, or the network itself."""
        return self.online if self.average is None else self.average

    def sync_due(self) -> bool:
        """Whether a target sync step (a multiple of target_sync_period, in agent steps) falls between the update
        just made at step ``transitions`` (inclusive) and the next one (exclusive)."""
        period, t = self.config.target_sync_period, self.transitions
        return (t + self.config.update_period - 1) // period > (t - 1) // period

    def sync_target(self) -> None:
        """Copy the network's weights into the target network."""
        self.target.load_state_dict(self.online.state_dict())

    def _update_due(self) -> bool:
        c = self.config
        return self.transitions >= c.min_replay_history and self.transitions % c.update_period == 0

    def _steps_to_next_update(self) -> int:
        c = self.config
        first = max(self.transitions + 1, c.min_replay_history)
        return -(-first // c.update_period) * c.update_period - self.transitions

    def _check_running(self) -> None:
        if self.stopped is not None:
            raise TrainingDiverged(f"training has stopped: {self.stopped}")

    def observe(self, features, cumulant: float, *, terminal: bool = False, truncated: bool = False) -> float | None:
        """One step of a stream: φ(S_t), C_{t+1} and whether the episode ended after it; trains when due.

        Args:
          features: φ(S_t), [feature_size].
          cumulant: C_{t+1}, in the signal's units.
          terminal: S_{t+1} is terminal.
          truncated: the episode was cut after this step (S_{t+1} not recorded).

        Returns:
          The loss of the update this step triggered, or None.

        Raises:
          ValueError: wrong feature size, NaN or infinite values (the learner is unchanged).
          TrainingDiverged: see :meth:`update`.
        """
        self._check_running()
        phi = np.asarray(features)
        if phi.ndim != 1:
            raise ValueError(f"observe takes one feature vector [{self.config.feature_size}]; got shape {phi.shape}")
        self.replay.add(phi, [cumulant], [terminal], [truncated])
        self.transitions += 1
        if self._update_due() and self.replay.can_sample:
            return self.update()
        return None

    def observe_many(self, features, cumulants, terminals=None, truncateds=None, *, progress: bool = False):
        """A recording of steps in order: exactly as many ``observe`` calls, with far less overhead.

        Args:
          features: [T, feature_size]; cumulants: [T]; terminals, truncateds: bool [T] (default all False).
          progress: show a progress bar on stderr.

        Returns:
          float64 [U]: the loss of each of the U updates made.

        Raises:
          ValueError: a bad value anywhere in the arrays (named; nothing is added).
          TrainingDiverged: see :meth:`update`; the steps before it are kept.
        """
        self._check_running()
        if np.ndim(features) != 2:
            raise ValueError(f"observe_many takes features [T, {self.config.feature_size}]; got {np.shape(features)}")
        T = np.shape(features)[0]
        terminals = np.zeros(T, dtype=bool) if terminals is None else terminals
        truncateds = np.zeros(T, dtype=bool) if truncateds is None else truncateds
        phi, c, term, trunc = self.replay.validate(features, cumulants, terminals, truncateds)
        from tqdm import tqdm

        losses = []
        with tqdm(total=phi.shape[0], disable=not progress, file=sys.stderr, unit="step", desc="learning") as bar:
            start = 0
            while start < phi.shape[0]:
                stop = min(phi.shape[0], start + self._steps_to_next_update())
                self.replay.add(phi[start:stop], c[start:stop], term[start:stop], trunc[start:stop])
                self.transitions += stop - start
                bar.update(stop - start)
                start = stop
                if self._update_due() and self.replay.can_sample:
                    losses.append(self.update())
        return np.asarray(losses, dtype=np.float64)

    # ---------------------------------------------------------------- predicting

    def predict(self, features, gammas) -> np.ndarray:
        """Predicted discounted return of each state at each γ, in the cumulant's units: float64 [B, G].

        Args:
          features: φ of B states, [B, feature_size] (or one state, [feature_size]).
          gammas: [G], each in [0, 1). Probe networks answer between their lowest and highest probe
            by interpolation (``interpolation_scale``) and refuse γ outside that range.

        Raises:
          ValueError: wrong feature size, NaN features, or a γ outside [0, 1) (or the probes' range).
        """
        g = validate_gammas(gammas)
        phi = np.asarray(features, dtype=np.float32)
        if phi.ndim == 1:
            phi = phi[None, :]
        if phi.ndim != 2 or phi.shape[1] != self.config.feature_size:
            raise ValueError(f"features must be [B, {self.config.feature_size}]; got shape {np.shape(features)}")
        if not np.isfinite(phi).all():
            b, j = np.argwhere(~np.isfinite(phi))[0]
            raise ValueError(f"features must be finite; got {float(phi[b, j])!r} at state {b}, feature {j}")
        if not self.is_gamma_net:
            probe_values = self._values(phi, self.probe_gammas)
            return interpolate(self.probe_gammas, probe_values, g, scale=self.config.interpolation_scale)
        return np.concatenate(
            [self._values(phi, g[i : i + PREDICT_CHUNK]) for i in range(0, g.size, PREDICT_CHUNK)], axis=1
        )

    def _values(self, phi: np.ndarray, gammas: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            g = torch.as_tensor(gammas, dtype=torch.float32, device=self.device)
            out = self.outputs(self.predicting, torch.as_tensor(phi, device=self.device), g)
        scale = self.output_scale(self.predicting, torch.as_tensor(gammas, dtype=torch.float64)).cpu().numpy()
        return out.double().cpu().numpy() / scale[None, :]

    # --------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict:
        """The whole learner as tensors and plain values (loadable with ``torch.load(weights_only=True)``)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "config": json.dumps(to_mapping(self.config), sort_keys=True),
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            **({} if self.average is None else {"average": self.average.state_dict()}),
            "optimizer": self.optimizer.state_dict(),
            "replay": {k: torch.from_numpy(np.array(v)) for k, v in self.replay.to_state_dict().items()},
            "timescale_rng": json.dumps(self.timescale_rng.bit_generator.state),
            "transitions": int(self.transitions),
            "updates": int(self.updates),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (same configuration apart from the device)."""
        saved = saved_config_mapping(json.loads(state["config"]))
        mine = to_mapping(self.config)
        check_same_config(
            "state",
            {k: v for k, v in saved.items() if k not in PORTABLE_SETTINGS},
            {k: v for k, v in mine.items() if k not in PORTABLE_SETTINGS},
        )
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        if self.average is not None:
            if "average" not in state:
                raise CheckpointError(
                    f"the checkpoint has no average of the weights (average_decay {self.config.average_decay})"
                )
            self.average.load_state_dict(state["average"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.from_state_dict({k: v.numpy() for k, v in state["replay"].items()})
        self.timescale_rng.bit_generator.state = json.loads(state["timescale_rng"])
        self.transitions = int(state["transitions"])
        self.updates = int(state["updates"])
        self.stopped = None

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the whole learner (networks, Adam, replay, generators, counters) to ``path``.

        Raises:
          TrainingDiverged: training has stopped on a diverged loss; the file at ``path`` is left as it was.
        """
        if self.stopped is not None:
            raise TrainingDiverged(f"not saving to {path}: {self.stopped}")
        return save_torch(path, self.state_dict())

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | None = None, config: NeuralConfig | None = None):
        """A learner restored from :meth:`save`'s file, ready to continue exactly where it stopped.

        Args:
          device: run it on this device instead of the one it was saved from.
          config: if given, the checkpoint's configuration must equal it (apart from the device).

        Raises:
          FileNotFoundError: no such file.
          CheckpointError: not a learner checkpoint, another version, or another configuration.
        """
        state = load_torch(path)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{path} is not a neural learner checkpoint (format {state.get('format')!r})")
        if state.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"{path} is neural learner version {state.get('version')}; this reads {CHECKPOINT_VERSION}"
            )
        missing = sorted(set(STATE_KEYS) - set(state))
        if missing:
            raise CheckpointError(f"{path} is a neural learner checkpoint without {missing}: damaged or not ours")
        try:
            saved = json.loads(state["config"])
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: its 'config' entry is not a configuration ({exc})") from None
        if not isinstance(saved, dict):
            raise CheckpointError(f"{path}: its 'config' entry is not a configuration (got {type(saved).__name__})")
        saved = saved_config_mapping(saved)
        if config is not None:
            check_same_config(
                path,
                {k: v for k, v in saved.items() if k not in PORTABLE_SETTINGS},
                {k: v for k, v in to_mapping(config).items() if k not in PORTABLE_SETTINGS},
            )
        if device is not None:
            saved["device"] = device
        elif config is not None:
            saved["device"] = config.device
        learner = cls(from_mapping(NeuralConfig, saved, where=str(path)))
        try:
            learner.load_state_dict(state)
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
            # torch's own refusal spans lines; the user reads one.
            raise CheckpointError(f"{path} does not fit this learner: {' '.join(str(exc).split())}") from None
        return learner
