"""The learner ensemble: K stacked learners end where the same K learners trained one by one end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gamma_net_core.neural.ensemble import LearnerEnsemble, StackedGroup
from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner

pytestmark = pytest.mark.usefixtures("one_torch_thread")

D = 6


def small(**changes) -> NeuralConfig:
    base = dict(
        feature_size=D,
        hidden_sizes=(16, 8),
        batch_size=8,
        replay_capacity=120,  # overwritten within the stream: the shared records wrap around
        min_replay_history=20,
        update_period=2,
        target_sync_period=10,
        step_size=1e-3,
        scaling="delta",  # the Atari study's (a normalized learner keeps a running σ and does not stack)
        average_decay=0.0,  # nor does an average of the weights
        n_step=4,  # the paper's: windows that fit the small replay
    )
    return NeuralConfig(**{**base, **changes})


def stream(T, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.random((T, D)).astype(np.float32),
        rng.normal(size=T),
        rng.random(T) < 0.05,
        rng.random(T) < 0.03,
    )


MEMBERS = [
    small(seed=0),
    small(seed=1, scaling="none"),
    small(seed=2, n_gamma=6, n_tau=0, priority="loss"),  # the Γ_t distribution series: all on the γ scale
    small(seed=3, scaling="delta_theta", importance_weights=False),
]


@pytest.mark.slow
@pytest.mark.parametrize("batched", [True, False], ids=["vmap", "looped"])
@pytest.mark.parametrize("embedding", ["direct", "l_embed", "h_l_embed", "matrix"])
def test_an_ensemble_ends_where_its_learners_trained_one_by_one_end(embedding, batched):
    """Both ways of running a group's members (one vmap-ed pass, the accelerators' default; each member's own
    module, the CPU's) against the learners trained one by one."""
    configs = [dataclasses.replace(c, embedding=embedding) for c in MEMBERS]
    data = stream(260)
    ensemble = LearnerEnsemble(configs, batched=batched)
    assert all(group.batched == batched for group in ensemble.groups)
    losses = ensemble.observe_many(*data)
    assert losses.shape == (121, 4) and np.isfinite(losses).all()
    probe = np.random.default_rng(9).random((5, D)).astype(np.float32)
    together = ensemble.predict(probe, [0.0, 0.5, 0.9, 0.99])
    for k, config in enumerate(configs):
        alone = NeuralLearner(config)
        alone_losses = alone.observe_many(*data)
        np.testing.assert_allclose(losses[:, k], alone_losses, rtol=2e-4, atol=1e-7)
        member = ensemble.member(k)
        for name, p in alone.online.state_dict().items():
            torch.testing.assert_close(member.online.state_dict()[name], p, rtol=1e-4, atol=2e-6, msg=name)
        for name, p in alone.target.state_dict().items():
            torch.testing.assert_close(member.target.state_dict()[name], p, rtol=1e-4, atol=2e-6, msg=name)
        np.testing.assert_allclose(member.replay.tree.leaves, alone.replay.tree.leaves, rtol=1e-3, atol=1e-6)
        assert (member.transitions, member.updates) == (alone.transitions, alone.updates) == (260, 121)
        np.testing.assert_allclose(together[k], alone.predict(probe, [0.0, 0.5, 0.9, 0.99]), rtol=1e-3, atol=1e-5)
        # The member continues as a single learner exactly where the ensemble stopped.
        more = stream(30, seed=5)
        m_losses, a_losses = member.observe_many(*more), alone.observe_many(*more)
        np.testing.assert_allclose(m_losses, a_losses, rtol=1e-3, atol=1e-6)


def test_members_of_a_stacked_group_share_the_network_and_an_ensemble_the_stream():
    with pytest.raises(ValueError, match="member 1 has hidden_sizes"):
        StackedGroup([small(), small(seed=1, hidden_sizes=(8,))])
    with pytest.raises(ValueError, match="member 1 has gamma_t_size = 7, member 0 8"):
        StackedGroup([small(), small(n_gamma=2, seed=1)])
    with pytest.raises(ValueError, match="member 1 has network = 'probes', member 0 'gamma_net'"):
        StackedGroup([small(), small(network="probes", seed=1)])
    with pytest.raises(ValueError, match=r"member 1 has probe_taus = \(1.0, 2.0\)"):
        StackedGroup([small(network="probes"), small(network="probes", probe_taus=(1.0, 2.0), seed=1)])
    with pytest.raises(ValueError, match="member 2 has update_period = 4, member 0 2"):
        LearnerEnsemble([small(), small(seed=1, hidden_sizes=(8,)), small(update_period=4)])
    with pytest.raises(ValueError, match="member 1 has replay_capacity = 60, member 0 120"):
        LearnerEnsemble([small(), small(replay_capacity=60)])


@pytest.mark.slow
@pytest.mark.parametrize("batched", [True, False], ids=["vmap", "looped"])
def test_an_ensemble_of_mixed_series_ends_where_its_learners_trained_one_by_one_end(batched):
    configs = [
        small(seed=0),
        small(seed=1, embedding="matrix"),
        small(seed=2, network="probes", probe_taus=(1.0, 20.0)),
        small(seed=3, timescale_inputs="tau", target_sync_period=6),
        small(seed=4, embedding="matrix", scaling="none"),
        small(seed=5, hidden_sizes=(12,), step_size=3e-3),
    ]
    data = stream(150)
    ensemble = LearnerEnsemble(configs, batched=batched)
    assert ensemble.group_members == [[0], [1, 4], [2], [3], [5]] and len(ensemble.replay.trees) == 7
    losses = ensemble.observe_many(*data)
    assert losses.shape == (66, 6) and np.isfinite(losses).all()
    probe = np.random.default_rng(9).random((5, D)).astype(np.float32)
    together = ensemble.predict(probe, [0.0, 0.5, 0.9])
    for k, config in enumerate(configs):
        alone = NeuralLearner(config)
        np.testing.assert_allclose(losses[:, k], alone.observe_many(*data), rtol=2e-4, atol=1e-7)
        member = ensemble.member(k)
        for name, p in alone.online.state_dict().items():
            torch.testing.assert_close(member.online.state_dict()[name], p, rtol=1e-4, atol=2e-6, msg=name)
        for name, p in alone.target.state_dict().items():
            torch.testing.assert_close(member.target.state_dict()[name], p, rtol=1e-4, atol=2e-6, msg=name)
        for p, tree in enumerate(alone.replay.trees):
            np.testing.assert_allclose(member.replay.trees[p].leaves, tree.leaves, rtol=1e-3, atol=1e-6)
        np.testing.assert_allclose(together[k], alone.predict(probe, [0.0, 0.5, 0.9]), rtol=1e-3, atol=1e-5)


def test_probe_networks_stack_each_probe_with_its_own_priorities():
    taus = (1.0, 4.0, 20.0)
    configs = [
        small(network="probes", probe_taus=taus, seed=0),
        small(network="probes", probe_taus=taus, seed=1, scaling="delta_theta", priority="loss"),
        small(network="probes", probe_taus=taus, seed=2, importance_weights=False, interpolation_scale="gamma"),
    ]
    data = stream(200)
    ensemble = LearnerEnsemble(configs)
    losses = ensemble.observe_many(*data)
    assert losses.shape == (91, 3) and len(ensemble.replay.trees) == 9
    probe = np.random.default_rng(9).random((5, D)).astype(np.float32)
    together = ensemble.predict(probe, [0.0, 0.5, 0.9, 0.95])
    for k, config in enumerate(configs):
        alone = NeuralLearner(config)
        np.testing.assert_allclose(losses[:, k], alone.observe_many(*data), rtol=2e-4, atol=1e-7)
        member = ensemble.member(k)
        for name, p in alone.online.state_dict().items():
            torch.testing.assert_close(member.online.state_dict()[name], p, rtol=1e-4, atol=2e-6, msg=name)
        for p in range(3):
            np.testing.assert_allclose(
                member.replay.trees[p].leaves, alone.replay.trees[p].leaves, rtol=1e-3, atol=1e-6
            )
        np.testing.assert_allclose(together[k], alone.predict(probe, [0.0, 0.5, 0.9, 0.95]), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("batched", [True, False], ids=["vmap", "looped"])
def test_a_diverging_member_stops_alone(batched):
    ensemble = LearnerEnsemble([small(seed=0), small(seed=1)], batched=batched)
    data = stream(60)
    ensemble.observe_many(*data)
    params = ensemble.groups[0].params
    before = {name: p.detach()[1].clone() for name, p in params.items()}
    with torch.no_grad():
        params["layers.2.weight"][1].fill_(float("inf"))  # member 1's output layer blows up
    before["layers.2.weight"] = params["layers.2.weight"].detach()[1].clone()
    first = {name: p.detach()[0].clone() for name, p in params.items()}
    losses = ensemble.observe_many(*stream(20, seed=1))
    assert np.isfinite(losses[:, 0]).all() and np.isnan(losses[:, 1]).all()
    assert ensemble.stopped[0] is None and "the loss became" in ensemble.stopped[1]
    for name, p in params.items():
        assert torch.equal(p.detach()[1], before[name]), name  # nothing applied to the stopped member
    assert not torch.equal(params["layers.0.weight"].detach()[0], first["layers.0.weight"])


def test_a_diverging_lone_member_stops_and_its_group_computes_with_the_stacked_weights():
    """On the CPU a member runs a plain module on views of its stacked tensors: what changes them changes it."""
    ensemble = LearnerEnsemble([small(seed=0), small(seed=1, embedding="matrix")])
    assert not any(group.batched for group in ensemble.groups)
    assert ensemble.group_members == [[0], [1]]
    ensemble.observe_many(*stream(60))
    lone = ensemble.groups[1]
    probe = np.random.default_rng(3).random((3, D)).astype(np.float32)
    before = lone.predict(probe, [0.5])[0]
    with torch.no_grad():
        lone.params["layers.0.bias"].add_(1.0)  # in place, as Adam, a target sync and a load change them
    after = lone.predict(probe, [0.5])[0]
    assert not np.allclose(after, before)
    np.testing.assert_allclose(after, ensemble.member(1).predict(probe, [0.5]), rtol=1e-6)
    with torch.no_grad():
        lone.params["layers.2.weight"].fill_(float("inf"))
    before = {name: p.detach().clone() for name, p in lone.params.items()}
    losses = ensemble.observe_many(*stream(20, seed=1))
    assert np.isfinite(losses[:, 0]).all() and np.isnan(losses[:, 1]).all()
    assert ensemble.stopped[0] is None and "the loss became" in ensemble.stopped[1]
    for name, p in lone.params.items():
        assert torch.equal(p.detach(), before[name]), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_an_ensemble_on_cuda_ends_where_it_ends_on_the_cpu():
    data = stream(200)
    gpu = LearnerEnsemble([dataclasses.replace(c, device="cuda") for c in MEMBERS])
    cpu = LearnerEnsemble(MEMBERS)
    np.testing.assert_allclose(gpu.observe_many(*data), cpu.observe_many(*data), rtol=1e-3, atol=1e-5)
    probe = np.random.default_rng(0).random((4, D))
    np.testing.assert_allclose(gpu.predict(probe, [0.0, 0.9]), cpu.predict(probe, [0.0, 0.9]), rtol=1e-3, atol=1e-4)
    member = gpu.member(1)
    np.testing.assert_allclose(
        member.predict(probe, [0.0, 0.9]), cpu.predict(probe, [0.0, 0.9])[1], rtol=1e-3, atol=1e-4
    )


MIXED = [
    small(seed=0),
    small(seed=1, embedding="matrix", priority="loss"),
    small(seed=2, network="probes", probe_taus=(1.0, 20.0)),
    small(seed=3, embedding="matrix", scaling="none"),
]


def test_a_stopped_and_resumed_ensemble_ends_where_an_uninterrupted_one_ends(tmp_path):
    data = stream(160)
    whole = LearnerEnsemble(MIXED)
    whole_losses = whole.observe_many(*data)
    first = LearnerEnsemble(MIXED)
    before = first.observe_many(*(a[:73] for a in data))  # stops between two updates, mid-way to a target sync
    first.save(tmp_path / "ensemble.pt", evaluation=3)
    resumed, extra = LearnerEnsemble.load(tmp_path / "ensemble.pt", MIXED)
    assert extra == {"evaluation": 3} and (resumed.transitions, resumed.updates) == (73, first.updates)
    after = resumed.observe_many(*(a[73:] for a in data))
    np.testing.assert_array_equal(np.concatenate([before, after]), whole_losses)
    for a, b in zip(whole.groups, resumed.groups):
        for name in a.params:
            assert torch.equal(a.params[name], b.params[name]) and torch.equal(
                a.target_params[name], b.target_params[name]
            )
        for x, y in zip(a.optimizer.state_dict()["state"].values(), b.optimizer.state_dict()["state"].values()):
            assert all(torch.equal(x[key], y[key]) for key in x)
    for x, y in zip(whole.replay.trees, resumed.replay.trees):
        np.testing.assert_array_equal(x.leaves, y.leaves)


def test_an_ensemble_checkpoint_of_other_members_or_corrupt_is_refused(tmp_path):
    from gamma_net_core.checkpoint import CheckpointError

    ensemble = LearnerEnsemble(MIXED)
    ensemble.observe_many(*stream(40))
    path = tmp_path / "ensemble.pt"
    ensemble.save(path)
    other = [*MIXED[:3], dataclasses.replace(MIXED[3], scaling="delta")]
    with pytest.raises(CheckpointError, match="ensemble member 3 was made with another configuration: scaling"):
        LearnerEnsemble.load(path, other)
    with pytest.raises(CheckpointError, match="holds 4 members; this ensemble has 3"):
        LearnerEnsemble.load(path, MIXED[:3])
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="is not a readable checkpoint"):
        LearnerEnsemble.load(path, MIXED)


def test_phi_gathered_from_the_devices_copy_of_the_replay_trains_as_phi_from_the_host(tmp_path):
    """device_replay (the default off the CPU): only slots cross to the device; the same numbers, bit for bit,
    through the ring's wrap-around and a save and load."""
    data = stream(200)
    host = LearnerEnsemble(MIXED, device_replay=False)
    gathered = LearnerEnsemble(MIXED, device_replay=True)
    head = [a[:90] for a in data]
    np.testing.assert_array_equal(gathered.observe_many(*head), host.observe_many(*head))
    gathered.save(tmp_path / "ensemble.pt")
    gathered, _ = LearnerEnsemble.load(tmp_path / "ensemble.pt", MIXED, device_replay=True)
    tail = [a[90:] for a in data]
    np.testing.assert_array_equal(gathered.observe_many(*tail), host.observe_many(*tail))
    torch.testing.assert_close(gathered.device_features, torch.from_numpy(host.replay.features), rtol=0, atol=0)
    for a, b in zip(host.groups, gathered.groups):
        for name in a.params:
            assert torch.equal(a.params[name], b.params[name]), name


def test_loss_scaled_predictions_divide_by_the_float64_scale_as_the_single_learner():
    """Near γ = 1, 1 - float32(γ) is off by up to 2.6e-6 relative: each member answers as its learner, exactly.

    Looped members run the single learner's own forward pass, so the outputs agree to the last bit
    and any difference is the division's (vmap's pass rounds otherwise in float32, ~5e-7 relative).
    """
    configs = [small(seed=0), small(seed=3, scaling="delta_theta")]
    ensemble = LearnerEnsemble(configs, batched=False)
    probe = np.random.default_rng(9).random((5, D)).astype(np.float32)
    gammas = [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999]
    together = ensemble.predict(probe, gammas)
    for k in range(len(configs)):
        # The member holds the ensemble's weights: only the division after the network can differ.
        np.testing.assert_allclose(together[k], ensemble.member(k).predict(probe, gammas), rtol=1e-12, atol=0)
