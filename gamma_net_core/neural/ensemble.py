"""A learner ensemble: K Γ-net learners trained on one transition stream with one batched pass per update.

Each member is a :class:`~gamma_net_core.neural.learner.NeuralLearner` in everything but
storage: its own initial weights, Γ_t draws, replay sampling generator and priorities,
target network and Adam state, all seeded from its own configuration exactly as the
single learner seeds them. What is shared is only what would be identical anyway: the
records of the stream (one copy of φ instead of K) and the update schedule. The K
networks' parameters are stacked (``torch.func.stack_module_state``) and every update
runs one forward pass over the K online and K target networks, one backward pass and one
Adam step over the stacked tensors; Adam is elementwise, so one Adam on the stack is K
Adams. The members' losses add, so each member's gradient is the one its own learner would
compute. Off the CPU the forward pass is one ``vmap`` over the members (one set of kernels
for all K); on the CPU, where a batched matmul does the same arithmetic as K matmuls and
vmap's dispatch costs 10-25% of an update, each member runs its own module on views of its
slice of the stacked tensors (:attr:`StackedGroup.batched`). The equivalence test holds an
ensemble's members equal (to float tolerance) to the same learners trained one by one, both
ways.

Members of one stacked group (:class:`StackedGroup`) share the network's shape and differ
only in ``seed``, ``scaling``, the Γ_t distribution (``n_gamma``/``n_tau`` with the same
|Γ_t|, ``tau_min``, ``integer_tau``), ``priority`` and ``importance_weights``
(:data:`FREE_SETTINGS`). Probe networks stack too (with the same probe timescales): each
member's P probes keep their own priorities, K × P sets over the shared records. An
ensemble holds any mix of the series (embeddings, timescale inputs, probes, ...): one
stacked group per network shape (:func:`stack_key`), all stepped together on the same
stream, with one replay of the records and one set of priorities per member (per probe),
so members must share only the stream's settings (:data:`STREAM_SETTINGS`).

A member whose loss becomes NaN or infinite stops there, as a single learner does: that
update is not applied to it (its slice is restored after the shared Adam step), it learns
nothing more, and the others go on.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pathlib
import sys

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_torch, save_torch
from gamma_net_core.config import to_mapping
from gamma_net_core.neural.interpolation import interpolate
from gamma_net_core.neural.learner import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    PORTABLE_SETTINGS,
    NeuralConfig,
    NeuralLearner,
    build_network,
    learner_seeds,
    torch_device,
)
from gamma_net_core.neural.networks import output_scale
from gamma_net_core.neural.replay import PrioritizedReplay, importance_weights, priorities_from_losses, rng_to_array
from gamma_net_core.timescales import TimescaleSampler, validate_gammas

#: Settings in which the members of one ensemble may differ (everything else must be equal).
FREE_SETTINGS = (
    "seed",
    "scaling",
    "n_gamma",
    "n_tau",
    "tau_min",
    "include_bounds",
    "integer_tau",
    "priority",
    "importance_weights",
    "probe_taus",
    "interpolation_scale",
)


#: Settings every member of an ensemble shares: the replay's records and the update schedule.
STREAM_SETTINGS = ("feature_size", "replay_capacity", "n_step", "min_replay_history", "update_period", "device")


def stack_key(config: NeuralConfig) -> tuple:
    """What members of one ensemble must share: the network's shape, |Γ_t| (or the probes' τ), Adam and the
    stream's schedule."""
    fixed = tuple((f.name, getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in FREE_SETTINGS)
    if config.network == "probes":
        return (*fixed, ("probe_taus", tuple(sorted(config.probe_taus))))
    return (*fixed, ("gamma_t_size", config.sampling.size))


def can_stack(config: NeuralConfig) -> bool:
    """Whether a learner of this configuration can be an ensemble member (every network kind can; a learner
    whose scaling is ``normalized`` keeps a running σ per timescale, and one with ``average_decay`` an average
    of its weights, which the ensemble's update does not: the paper's settings stack)."""
    return config.network in ("gamma_net", "probes") and config.scaling != "normalized" and config.average_decay == 0.0


def check_member(i: int, config: NeuralConfig) -> None:
    """Raise ValueError naming member ``i``'s settings unless it can be an ensemble member (:func:`can_stack`)."""
    if not can_stack(config):
        raise ValueError(
            f"ensemble member {i}: network {config.network!r}, scaling {config.scaling!r}, "
            f"average_decay {config.average_decay!r} cannot be stacked"
        )


def check_stackable(configs: list[NeuralConfig]) -> None:
    """Raise ValueError (naming the member and setting) unless these configurations stack as one group."""
    if not configs:
        raise ValueError("an ensemble needs at least one learner configuration")
    for i, c in enumerate(configs):
        check_member(i, c)
    first = dict(stack_key(configs[0]))
    for i, c in enumerate(configs[1:], start=1):
        for name, value in stack_key(c):
            if first[name] != value:
                raise ValueError(
                    f"ensemble member {i} has {name} = {value!r}, member 0 {first[name]!r}; "
                    f"members may differ only in {', '.join(FREE_SETTINGS)}"
                )


def _stacked(outputs: list[torch.Tensor]) -> torch.Tensor:
    return outputs[0][None] if len(outputs) == 1 else torch.stack(outputs)


class _MemberModules:
    """K copies of a network, member k's computing with its slice of stacked tensors (views, not copies).

    The slices come from one ``unbind`` per tensor, so the members' gradients reach the stacked tensor in
    one stack, not K scatters into zeros. Views from ``unbind`` may not outlive an in-place change of
    their base, so they are taken again whenever a stacked tensor's version moved (a target sync, a
    load, a stopped member's restore).
    """

    def __init__(self, network: torch.nn.Module, stacked: dict[str, torch.Tensor], K: int) -> None:
        self.stacked = stacked
        self.modules = [copy.deepcopy(network) for _ in range(K)]
        #: Per stacked tensor, the (module, attribute) pairs it is bound to, one per member.
        self.slots: dict[str, list[tuple[torch.nn.Module, str]]] = {}
        for name in stacked:
            path, _, leaf = name.rpartition(".")
            self.slots[name] = [(module.get_submodule(path), leaf) for module in self.modules]
            for owner, _ in self.slots[name]:
                delattr(owner, leaf)  # a parameter or buffer no more: a plain attribute, set by _bind
        self.versions: tuple[int, ...] | None = None

    def __call__(self) -> list[torch.nn.Module]:
        versions = tuple(t._version for t in self.stacked.values())
        if versions != self.versions:
            self._bind()
            self.versions = versions
        return self.modules

    def _bind(self) -> None:
        with torch.enable_grad():  # views taken under no_grad would carry no gradient to the stacked tensor
            for name, stacked in self.stacked.items():
                # One member: a plain view, whose gradient needs not even the stack.
                parts = stacked.unbind(0) if len(self.modules) > 1 else [stacked.view(stacked.shape[1:])]
                for (owner, leaf), part in zip(self.slots[name], parts):
                    owner.__dict__[leaf] = part


class StackedGroup:
    """K learners of one network shape (Γ-nets, or probe networks) with stacked parameters.

    The group learns from a replay it shares with the rest of its ensemble: its members'
    priorities are the replay's sets ``first`` ... ``first + K·P - 1``.

    Args:
      configs: one configuration per member; they may differ only in :data:`FREE_SETTINGS`.
      replay: the ensemble's replay of the stream (None: the group keeps its own, one set per member per probe).
      first: the group's first priority set in ``replay``.
      batched: one vmap-ed pass for all members (None: off the CPU; see :attr:`batched`).

    Raises:
      ValueError: no configs, or members that differ in a stacked setting (named).
    """

    def __init__(
        self,
        configs: list[NeuralConfig],
        replay: PrioritizedReplay | None = None,
        first: int = 0,
        *,
        batched: bool | None = None,
    ) -> None:
        check_stackable(configs)
        self.configs = list(configs)
        c = self.config = configs[0]
        self.device = torch_device(c.device)
        self.K = len(configs)
        self.is_gamma_net = c.network == "gamma_net"
        #: Priority sets per member: 1 for a Γ-net, one per probe (member k's are k·P ... k·P + P - 1).
        self.P = 1 if self.is_gamma_net else len(c.probe_taus)
        self.probe_gammas = c.probe_gammas
        seeds = [learner_seeds(config) for config in configs]
        if replay is None:
            replay = PrioritizedReplay(
                capacity=c.replay_capacity, feature_size=c.feature_size, n=c.n_step, rng=np.random.default_rng(0),
                priority_sets=self.K * self.P,
            )  # fmt: skip
        self.replay = replay
        self.first = first
        #: φ of every replay slot on the device (set by the ensemble), or None: φ comes with each batch from the host.
        self.device_features: torch.Tensor | None = None
        #: Each member's replay-sampling generator (the buffer's own is unused).
        self.replay_rngs = [np.random.default_rng(s[0]) for s in seeds]
        self.timescale_rngs = [np.random.default_rng(s[1]) for s in seeds]
        self.samplers = (
            [TimescaleSampler(cfg.sampling, rng) for cfg, rng in zip(configs, self.timescale_rngs)]
            if self.is_gamma_net
            else []
        )
        nets = [build_network(cfg, s[2]).to(self.device) for cfg, s in zip(configs, seeds)]
        self._base = copy.deepcopy(nets[0]).to("meta")
        params, buffers = stack_module_state(nets)
        self.params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        self.buffers = buffers
        self.target_params = {k: v.detach().clone() for k, v in self.params.items()}
        self.optimizer = torch.optim.Adam(list(self.params.values()), lr=c.step_size, eps=c.adam_eps, fused=True)
        self._scalings = [cfg.scaling for cfg in configs]
        self._weighted = np.array([cfg.importance_weights for cfg in configs])
        #: Steps observed so far (shared: one stream; the ensemble sets it).
        self.transitions = 0
        #: Updates made so far.
        self.updates = 0
        #: Per member: why it stopped (a diverged loss), or None while it trains.
        self.stopped: list[str | None] = [None] * self.K
        #: One vmap-ed pass for all members (off the CPU), or each member's own module in turn (on the CPU).
        self.batched = self.device.type != "cpu" if batched is None else bool(batched)
        if self.batched:
            self._forward = vmap(self._member_forward, in_dims=(0, 0, 0, 0))
            self._probe_forward = vmap(self._member_probe_forward, in_dims=(0, 0, 0))
        else:
            # On a CPU a batched matmul over K members does the same arithmetic as K matmuls, and vmap's
            # dispatch (with functional_call's swapping of tensors at every call) costs 10-25% of an
            # update: there each member runs a plain module whose weights are views of its slice of the
            # stacked tensors. The members' losses still add into one backward pass and one Adam step.
            # Copies of the weightless (meta) module: K full copies of the weights would be made only to be dropped.
            self._members = {
                id(self.params): _MemberModules(self._base, self.params | self.buffers, self.K),
                id(self.target_params): _MemberModules(self._base, self.target_params | self.buffers, self.K),
            }
            self._forward = self._looped_forward
            self._probe_forward = self._looped_probe_forward

    def _member_forward(self, params, buffers, features, gammas):
        return functional_call(self._base, (params, buffers), (features, gammas))

    def _member_probe_forward(self, params, buffers, features):
        return functional_call(self._base, (params, buffers), (features,))

    def _looped_forward(self, params, buffers, features, gammas):
        return _stacked([net(features[k], gammas[k]) for k, net in enumerate(self._members[id(params)]())])

    def _looped_probe_forward(self, params, buffers, features):
        return _stacked([net(features[k]) for k, net in enumerate(self._members[id(params)]())])

    # ----------------------------------------------------------------- learning

    def _scale(self, gammas: torch.Tensor) -> torch.Tensor:
        return torch.stack([output_scale(gammas[k], s) for k, s in enumerate(self._scalings)])

    def update(self) -> np.ndarray:
        """One update of every member still training; returns each member's loss (NaN for a stopped one)."""
        if not self.is_gamma_net:
            return self._update_probes()
        c, dev, f32 = self.config, self.device, torch.float32
        on_host = self.device_features is None
        batches = [
            self.replay.sample(c.batch_size, self.first + k, rng, features=on_host)
            for k, rng in enumerate(self.replay_rngs)
        ]
        gammas = np.stack([sampler.sample() for sampler in self.samplers])  # [K, G]
        phi, phi_t = self._features(batches)
        returns = np.stack([b.nstep_returns(g) for b, g in zip(batches, gammas)])
        discounts = np.stack([b.bootstrap_discounts(g) for b, g in zip(batches, gammas)])
        weights = np.stack(
            [
                importance_weights(b.probabilities) if w else np.ones(c.batch_size)
                for b, w in zip(batches, self._weighted)
            ]
        )
        g = torch.as_tensor(gammas, dtype=f32, device=dev)
        returns_t = torch.as_tensor(returns, dtype=f32, device=dev)
        discounts_t = torch.as_tensor(discounts, dtype=f32, device=dev)
        weights_t = torch.as_tensor(weights, dtype=f32, device=dev)
        with torch.no_grad():
            out_t = self._forward(self.target_params, self.buffers, phi_t, g)
        out = self._forward(self.params, self.buffers, phi, g)  # [K, B, G]
        delta = self._scale(g)[:, None, :] * returns_t + discounts_t * out_t - out
        losses = (weights_t[:, :, None] * delta.square()).mean(dim=(1, 2))  # [K]
        values, squared = self._to_host(losses, delta)
        self._step(losses, values)
        for k, batch in enumerate(batches):
            if self.stopped[k] is None:
                rule = self.configs[k].priority
                self.replay.update_priorities(batch.indices, priorities_from_losses(squared[k], rule), self.first + k)
        self.updates += 1
        if self._sync_due():
            self.sync_target()
        values[[s is not None for s in self.stopped]] = np.nan
        return values

    def _features(self, batches) -> tuple[torch.Tensor, torch.Tensor]:
        """φ and bootstrap φ of nested lists of batches, stacked on the device ([K, B, D] or [K, P, B, D]).

        With :attr:`device_features`, only the slots go to the device (a few hundred integers) and φ is
        gathered there; otherwise φ itself is copied from the host batches.
        """
        nested = isinstance(batches[0], list)  # probe networks: [K][P] batches
        flat = [b for mine in batches for b in mine] if nested else list(batches)
        lead = (len(batches), len(batches[0])) if nested else (len(batches),)
        if self.device_features is None:
            phi = np.stack([b.features for b in flat])
            phi_t = np.stack([b.bootstrap_features for b in flat])
            shape = (*lead, *phi.shape[1:])
            return (
                torch.as_tensor(phi.reshape(shape), device=self.device),
                torch.as_tensor(phi_t.reshape(shape), device=self.device),
            )
        slots = np.stack([np.stack([b.indices for b in flat]), np.stack([b.bootstrap_indices for b in flat])])
        slots = torch.as_tensor(slots, device=self.device)
        shape = (*lead, slots.shape[-1], self.device_features.shape[1])
        return self.device_features[slots[0]].reshape(shape), self.device_features[slots[1]].reshape(shape)

    def _to_host(self, losses: torch.Tensor, delta: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """The members' losses (float64 [K]) and squared TD errors (float32, delta's shape) in one copy to the host.

        The update's only wait for the device: the losses decide who stops, the squared errors are the
        host sum trees' new priorities.
        """
        K = losses.shape[0]
        both = torch.cat([losses.detach().reshape(K, 1), delta.detach().square().reshape(K, -1)], dim=1).cpu()
        return both[:, 0].double().numpy(), both[:, 1:].reshape(delta.shape).numpy()

    def _step(self, losses: torch.Tensor, values: np.ndarray) -> None:
        """Stop the members whose loss is not finite, then one Adam step for the others (the stopped unchanged)."""
        for k in np.flatnonzero(np.array([s is None for s in self.stopped]) & ~np.isfinite(values)):
            self.stopped[k] = (
                f"the loss became {values[k]} at update {self.updates + 1} (after {self.transitions} steps); "
                "training stopped without applying it"
            )
        frozen = [k for k in range(self.K) if self.stopped[k] is not None]
        keep = torch.as_tensor([s is None for s in self.stopped], device=self.device)
        saved = {name: p.detach()[frozen].clone() for name, p in self.params.items()} if frozen else None
        self.optimizer.zero_grad(set_to_none=True)
        (torch.where(keep, losses, torch.zeros_like(losses)).sum() if frozen else losses.sum()).backward()
        self.optimizer.step()
        if saved is not None:
            with torch.no_grad():
                for name, p in self.params.items():
                    p[frozen] = saved[name]

    def _update_probes(self) -> np.ndarray:
        """One update of probe-network members: each probe of each member on its own batch (its own priorities)."""
        c, dev, f32, P = self.config, self.device, torch.float32, self.P
        gammas = self.probe_gammas
        # Member k draws its P batches in probe order with its own generator, as its single learner does.
        on_host = self.device_features is None
        batches = [
            [self.replay.sample(c.batch_size, self.first + k * P + p, rng, features=on_host) for p in range(P)]
            for k, rng in enumerate(self.replay_rngs)
        ]
        phi, phi_t = self._features(batches)  # [K, P, B, D]

        def per_probe(fn) -> torch.Tensor:  # [K, B, P]
            return torch.as_tensor(
                np.stack([np.stack([fn(b, p) for p, b in enumerate(mine)], axis=1) for mine in batches]),
                dtype=f32,
                device=dev,
            )

        returns = per_probe(lambda b, p: b.nstep_returns(gammas[p : p + 1])[:, 0])
        discounts = per_probe(lambda b, p: b.bootstrap_discounts(gammas[p : p + 1])[:, 0])

        def member_weights(k: int, batch) -> np.ndarray:
            return importance_weights(batch.probabilities) if self._weighted[k] else np.ones(c.batch_size)

        weights = torch.as_tensor(
            np.stack([np.stack([member_weights(k, b) for b in mine], axis=1) for k, mine in enumerate(batches)]),
            dtype=f32,
            device=dev,
        )
        g = torch.as_tensor(gammas, dtype=f32, device=dev)[None].expand(self.K, -1)
        with torch.no_grad():
            out_t = self._probe_forward(self.target_params, self.buffers, phi_t)
        out = self._probe_forward(self.params, self.buffers, phi)  # [K, B, P]
        delta = self._scale(g)[:, None, :] * returns + discounts * out_t - out
        losses = (weights * delta.square()).mean(dim=1).sum(dim=1)  # [K]: the probes' losses add
        values, squared = self._to_host(losses, delta)
        self._step(losses, values)
        for k, mine in enumerate(batches):
            if self.stopped[k] is None:
                rule = self.configs[k].priority
                for p, batch in enumerate(mine):
                    priorities = priorities_from_losses(squared[k, :, p], rule)
                    self.replay.update_priorities(batch.indices, priorities, self.first + k * P + p)
        self.updates += 1
        if self._sync_due():
            self.sync_target()
        values[[s is not None for s in self.stopped]] = np.nan
        return values

    def _sync_due(self) -> bool:
        period, t = self.config.target_sync_period, self.transitions
        return (t + self.config.update_period - 1) // period > (t - 1) // period

    def sync_target(self) -> None:
        """Copy every member's network into its target network."""
        with torch.no_grad():
            for name, p in self.params.items():
                self.target_params[name].copy_(p)

    # ---------------------------------------------------------------- predicting

    def predict(self, features, gammas) -> np.ndarray:
        """Every member's predicted discounted return at each state and γ: float64 [K, B, G] (cumulant's units).

        Raises:
          ValueError: wrong feature size, NaN features, or a γ outside [0, 1).
        """
        g = validate_gammas(gammas)
        phi = np.asarray(features, dtype=np.float32)
        if phi.ndim == 1:
            phi = phi[None, :]
        if phi.ndim != 2 or phi.shape[1] != self.config.feature_size or not np.isfinite(phi).all():
            raise ValueError(f"features must be finite [B, {self.config.feature_size}]; got shape {np.shape(features)}")
        x = torch.as_tensor(phi, device=self.device)[None].expand(self.K, -1, -1)
        if not self.is_gamma_net:
            with torch.no_grad():
                out = self._probe_forward(self.params, self.buffers, x).double().cpu().numpy()  # [K, B, P]
            pg = self.probe_gammas
            values = [
                out[k] / output_scale(torch.as_tensor(pg), cfg.scaling).numpy()[None, :]
                for k, cfg in enumerate(self.configs)
            ]
            return np.stack(
                [interpolate(pg, v, g, scale=cfg.interpolation_scale) for v, cfg in zip(values, self.configs)]
            )
        parts = []
        for i in range(0, g.size, 64):  # bounds memory as the single learner's PREDICT_CHUNK does
            chunk = torch.as_tensor(g[i : i + 64], dtype=torch.float32, device=self.device)
            with torch.no_grad():
                out = self._forward(self.params, self.buffers, x, chunk[None].expand(self.K, -1))
            # The scale from the float64 γ, as the single learner divides: 1 - float32(γ) differs by
            # up to 2.6e-6 relative for γ near 1, so members would not equal the learners they stand for.
            exact = torch.as_tensor(g[i : i + 64], dtype=torch.float64)
            scale = torch.stack([output_scale(exact, s) for s in self._scalings])  # [K, G]
            parts.append(out.double() / scale[:, None, :].to(out.device))
        return torch.cat(parts, dim=2).cpu().numpy()

    # --------------------------------------------------------------- checkpoints

    def member_state_dict(self, k: int) -> dict:
        """Member ``k`` as a single learner's checkpoint (:meth:`NeuralLearner.load_state_dict` takes it)."""
        names = list(self.params)
        optimizer = self.optimizer.state_dict()
        state = {}
        for i in range(len(names)):
            slot = optimizer["state"].get(i)
            if slot is not None:
                state[i] = {key: (v.clone() if key == "step" else v[k].clone()) for key, v in slot.items()}
        replay = self.replay.to_state_dict()
        replay = {key: v for key, v in replay.items() if not key.startswith("tree")}
        for p in range(self.P):
            prefix = "tree_" if p == 0 else f"tree{p}_"  # the single learner's layout of its P sets
            replay.update(
                {
                    f"{prefix}{key}": v
                    for key, v in self.replay.trees[self.first + k * self.P + p].to_state_dict().items()
                }
            )
        replay["rng"] = rng_to_array(self.replay_rngs[k])
        return {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "config": json.dumps(to_mapping(self.configs[k]), sort_keys=True),
            "online": {name: self.params[name].detach()[k].clone() for name in names}
            | {name: b[k].clone() for name, b in self.buffers.items()},
            "target": {name: self.target_params[name][k].clone() for name in names}
            | {name: b[k].clone() for name, b in self.buffers.items()},
            "optimizer": {"state": state, "param_groups": copy.deepcopy(optimizer["param_groups"])},
            "replay": {key: torch.from_numpy(np.array(v)) for key, v in replay.items()},
            "timescale_rng": json.dumps(self.timescale_rngs[k].bit_generator.state),
            "transitions": int(self.transitions),
            "updates": int(self.updates),
        }

    def state_dict(self) -> dict:
        """The group's own state (stacked networks, Adam, generators, counters), without the shared replay."""
        return {
            "online": {name: p.detach().clone() for name, p in self.params.items()},
            "target": {name: p.clone() for name, p in self.target_params.items()},
            "buffers": {name: b.clone() for name, b in self.buffers.items()},
            "optimizer": self.optimizer.state_dict(),
            "replay_rngs": [json.dumps(r.bit_generator.state) for r in self.replay_rngs],
            "timescale_rngs": [json.dumps(r.bit_generator.state) for r in self.timescale_rngs],
            "stopped": json.dumps(self.stopped),
            "updates": int(self.updates),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (the ensemble checks the configurations).

        Raises:
          ValueError: the state holds other parameter names or shapes (named).
        """
        for key in ("online", "target", "buffers"):
            mine = self.params if key == "online" else self.target_params if key == "target" else self.buffers
            saved = state[key]
            if set(saved) != set(mine):
                raise ValueError(f"ensemble state: {key} holds {sorted(saved)}, this group {sorted(mine)}")
            for name, value in saved.items():
                if tuple(value.shape) != tuple(mine[name].shape):
                    raise ValueError(
                        f"ensemble state: {key} {name} is {tuple(value.shape)}, expected {tuple(mine[name].shape)}"
                    )
        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(state["online"][name])
            for name, p in self.target_params.items():
                p.copy_(state["target"][name])
            for name, b in self.buffers.items():
                b.copy_(state["buffers"][name])
        self.optimizer.load_state_dict(state["optimizer"])
        for rng, saved in zip(self.replay_rngs + self.timescale_rngs, state["replay_rngs"] + state["timescale_rngs"]):
            rng.bit_generator.state = json.loads(saved)
        self.stopped = list(json.loads(state["stopped"]))
        self.updates = int(state["updates"])

    def member(self, k: int) -> NeuralLearner:
        """Member ``k`` as a standalone :class:`NeuralLearner` (a copy; allocates its own replay)."""
        learner = NeuralLearner(self.configs[k])
        learner.load_state_dict(self.member_state_dict(k))
        learner.stopped = self.stopped[k]
        return learner


#: The ``format`` entry of a whole ensemble's checkpoint (:meth:`LearnerEnsemble.save`).
ENSEMBLE_FORMAT = "gamma_net_ros.neural_ensemble"
ENSEMBLE_VERSION = 1


class LearnerEnsemble:
    """K learners of any mix of network shapes, trained together on one stream.

    The members are grouped by network shape (:func:`stack_key`) into :class:`StackedGroup`\\ s,
    each one batched pass per update; the groups share one replay of the stream (one copy of
    φ) with one set of priorities per member (per probe), and are stepped together: every
    update, each group with a member still training makes one update. Member ``k`` is
    ``configs[k]`` whatever its group.

    Args:
      configs: one configuration per member; all must share :data:`STREAM_SETTINGS`.
      device_replay: keep a copy of the replay's φ on the learners' device and gather each batch's φ
        there, so only slots cross to the device each update (None: on any device but the CPU).
      batched: each group's members in one vmap-ed pass (None: on any device but the CPU;
        see :attr:`StackedGroup.batched`).

    Raises:
      ValueError: no configs, members that differ in a stream setting, or a network that cannot stack (named).
    """

    def __init__(
        self, configs: list[NeuralConfig], *, device_replay: bool | None = None, batched: bool | None = None
    ) -> None:
        if not configs:
            raise ValueError("an ensemble needs at least one learner configuration")
        for i, c in enumerate(configs):
            check_member(i, c)
            for name in STREAM_SETTINGS:
                if getattr(c, name) != getattr(configs[0], name):
                    raise ValueError(
                        f"ensemble member {i} has {name} = {getattr(c, name)!r}, member 0 "
                        f"{getattr(configs[0], name)!r}; the members of an ensemble share "
                        f"{', '.join(STREAM_SETTINGS)}"
                    )
        self.configs = list(configs)
        c = self.config = configs[0]
        self.K = len(configs)
        self.device = torch_device(c.device)
        by_shape: dict[tuple, list[int]] = {}
        for k, config in enumerate(configs):
            by_shape.setdefault(stack_key(config), []).append(k)
        #: Per group, its members' indices in ``configs``.
        self.group_members = list(by_shape.values())
        sizes = [
            len(ks) * (1 if configs[ks[0]].network == "gamma_net" else len(configs[ks[0]].probe_taus))
            for ks in self.group_members
        ]
        self.replay = PrioritizedReplay(
            capacity=c.replay_capacity, feature_size=c.feature_size, n=c.n_step, rng=np.random.default_rng(0),
            priority_sets=sum(sizes),
        )  # fmt: skip
        firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        self.groups = [
            StackedGroup([configs[k] for k in ks], self.replay, int(first), batched=batched)
            for ks, first in zip(self.group_members, firsts)
        ]
        if device_replay is None:
            device_replay = self.device.type != "cpu"
        #: φ of every replay slot on the device (None: batches carry φ from the host).
        self.device_features = (
            torch.zeros((c.replay_capacity, c.feature_size), dtype=torch.float32, device=self.device)
            if device_replay
            else None
        )
        for group in self.groups:
            group.device_features = self.device_features
        #: Member k is ``groups[where[k][0]]``'s member ``where[k][1]``.
        self.where = [None] * self.K
        for g, ks in enumerate(self.group_members):
            for j, k in enumerate(ks):
                self.where[k] = (g, j)
        #: Steps observed so far.
        self.transitions = 0
        #: Update rounds made so far (one update of every group still training).
        self.updates = 0

    @property
    def stopped(self) -> list[str | None]:
        """Per member: why it stopped (a diverged loss), or None while it trains."""
        return [self.groups[g].stopped[j] for g, j in self.where]

    # ----------------------------------------------------------------- learning

    def update(self) -> np.ndarray:
        """One update of every member still training; returns each member's loss (NaN for a stopped one)."""
        values = np.full(self.K, np.nan)
        for group, ks in zip(self.groups, self.group_members):
            group.transitions = self.transitions
            if any(s is None for s in group.stopped):
                values[ks] = group.update()
        self.updates += 1
        return values

    def _mirror(self, added: int, phi: np.ndarray) -> None:
        """Copy records just added (the first had record number ``added``) to the device's φ."""
        capacity = self.config.replay_capacity
        keep = min(phi.shape[0], capacity)  # of a stretch longer than the ring, only the last lap stays
        first = added + phi.shape[0] - keep
        slots = torch.arange(first, first + keep) % capacity
        self.device_features[slots.to(self.device)] = torch.as_tensor(phi[phi.shape[0] - keep :], device=self.device)

    def sync_target(self) -> None:
        """Copy every member's network into its target network."""
        for group in self.groups:
            group.sync_target()

    def _steps_to_next_update(self) -> int:
        c = self.config
        first = max(self.transitions + 1, c.min_replay_history)
        return -(-first // c.update_period) * c.update_period - self.transitions

    def _update_due(self) -> bool:
        c = self.config
        return self.transitions >= c.min_replay_history and self.transitions % c.update_period == 0

    def observe_many(self, features, cumulants, terminals=None, truncateds=None, *, progress: bool = False):
        """A stretch of the stream in order, as :meth:`NeuralLearner.observe_many` for every member.

        Returns:
          float64 [U, K]: each member's loss at each of the U updates made (NaN once it stopped).

        Raises:
          ValueError: a bad value anywhere in the arrays (named; nothing is added).
        """
        if np.ndim(features) != 2:
            raise ValueError(f"observe_many takes features [T, {self.config.feature_size}]; got {np.shape(features)}")
        T = np.shape(features)[0]
        terminals = np.zeros(T, dtype=bool) if terminals is None else terminals
        truncateds = np.zeros(T, dtype=bool) if truncateds is None else truncateds
        phi, c, term, trunc = self.replay.validate(features, cumulants, terminals, truncateds)
        from tqdm import tqdm

        losses = []
        with tqdm(total=T, disable=not progress, file=sys.stderr, unit="step", desc=f"learning ×{self.K}") as bar:
            start = 0
            while start < T:
                stop = min(T, start + self._steps_to_next_update())
                added = self.replay.added
                self.replay.add(phi[start:stop], c[start:stop], term[start:stop], trunc[start:stop])
                if self.device_features is not None:
                    self._mirror(added, phi[start:stop])
                self.transitions += stop - start
                bar.update(stop - start)
                start = stop
                if self._update_due() and self.replay.can_sample and any(s is None for s in self.stopped):
                    losses.append(self.update())
        return np.asarray(losses, dtype=np.float64).reshape(-1, self.K)

    # ---------------------------------------------------------------- predicting

    def predict(self, features, gammas) -> np.ndarray:
        """Every member's predicted discounted return at each state and γ: float64 [K, B, G] (cumulant's units).

        Raises:
          ValueError: wrong feature size, NaN features, or a γ outside [0, 1).
        """
        parts = [group.predict(features, gammas) for group in self.groups]
        out = np.empty((self.K, *parts[0].shape[1:]))
        for part, ks in zip(parts, self.group_members):
            out[ks] = part
        return out

    # --------------------------------------------------------------- checkpoints

    def member_state_dict(self, k: int) -> dict:
        """Member ``k`` as a single learner's checkpoint (:meth:`NeuralLearner.load_state_dict` takes it)."""
        g, j = self.where[k]
        self.groups[g].transitions = self.transitions
        return self.groups[g].member_state_dict(j)

    def member(self, k: int) -> NeuralLearner:
        """Member ``k`` as a standalone :class:`NeuralLearner` (a copy; allocates its own replay)."""
        g, j = self.where[k]
        self.groups[g].transitions = self.transitions
        return self.groups[g].member(j)

    def state_dict(self) -> dict:
        """The whole ensemble as tensors and plain values: every group, the shared replay, the counters."""
        return {
            "format": ENSEMBLE_FORMAT,
            "version": ENSEMBLE_VERSION,
            "configs": json.dumps([to_mapping(c) for c in self.configs], sort_keys=True),
            "groups": [group.state_dict() for group in self.groups],
            "replay": {key: torch.from_numpy(np.array(v)) for key, v in self.replay.to_state_dict().items()},
            "transitions": int(self.transitions),
            "updates": int(self.updates),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`: the same members in the same order (the device may differ).

        Raises:
          CheckpointError: not an ensemble's state, another version, or other members (the first that differs named).
        """
        if state.get("format") != ENSEMBLE_FORMAT:
            raise CheckpointError(f"not a learner ensemble's state (format {state.get('format')!r})")
        if state.get("version") != ENSEMBLE_VERSION:
            raise CheckpointError(
                f"ensemble state version {state.get('version')!r}; this code reads {ENSEMBLE_VERSION}"
            )
        saved = json.loads(state["configs"])
        if len(saved) != self.K:
            raise CheckpointError(f"the ensemble state holds {len(saved)} members; this ensemble has {self.K}")
        for k, (theirs, config) in enumerate(zip(saved, self.configs)):
            mine = to_mapping(config)
            check_same_config(
                f"ensemble member {k}",
                {key: v for key, v in theirs.items() if key not in PORTABLE_SETTINGS},
                {key: v for key, v in mine.items() if key not in PORTABLE_SETTINGS},
            )
        self.replay.from_state_dict({key: v.numpy() for key, v in state["replay"].items()})
        if self.device_features is not None:
            self.device_features.copy_(torch.from_numpy(self.replay.features))
        for group, part in zip(self.groups, state["groups"]):
            group.load_state_dict(part)
        self.transitions = int(state["transitions"])
        self.updates = int(state["updates"])

    def save(self, path: str | os.PathLike, **extra) -> pathlib.Path:
        """Atomically write the whole ensemble (and ``extra`` tensors or plain values beside it) to ``path``."""
        return save_torch(path, {**self.state_dict(), "extra": extra})

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        configs: list[NeuralConfig],
        *,
        device_replay: bool | None = None,
        batched: bool | None = None,
    ) -> tuple[LearnerEnsemble, dict]:
        """An ensemble of ``configs`` restored from :meth:`save`'s file, and the ``extra`` saved with it.

        ``device_replay`` and ``batched`` as in the constructor.

        Raises:
          FileNotFoundError: no such file.
          CheckpointError: not an ensemble checkpoint, another version, or other members.
        """
        state = load_torch(path)
        ensemble = cls(configs, device_replay=device_replay, batched=batched)
        try:
            ensemble.load_state_dict(state)
        except CheckpointError as exc:
            raise CheckpointError(f"{path}: {exc}") from None
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{path} is not a whole ensemble's state: {exc}") from None
        return ensemble, dict(state.get("extra") or {})
