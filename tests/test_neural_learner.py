"""The neural learner: tiled batch against the per-γ loop, schedule, a Markov chain at unseen γ,
checkpoints and resume, bad input, a diverging loss."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from gamma_net_core.checkpoint import CheckpointError
from gamma_net_core.config import from_mapping, to_mapping
from gamma_net_core.neural.interpolation import interpolate
from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner, TrainingDiverged
from gamma_net_core.neural.networks import ProbeNets
from gamma_net_core.neural.reference import reference_gradients
from gamma_net_core.neural.replay import importance_weights, priorities_from_losses

pytestmark = pytest.mark.usefixtures("one_torch_thread")

D = 6


def small(**changes) -> NeuralConfig:
    base = dict(
        feature_size=D,
        hidden_sizes=(16, 8),
        batch_size=8,
        replay_capacity=200,
        min_replay_history=20,
        update_period=2,
        target_sync_period=5,
        step_size=1e-3,
        n_step=4,  # the paper's: a first complete window within these short streams
        seed=3,
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


@pytest.mark.parametrize("embedding", ["direct", "l_embed", "h_l_embed", "matrix"])
@pytest.mark.parametrize("scaling", ["none", "delta", "normalized"])
def test_tiled_batch_gives_the_per_gamma_loop_gradients(embedding, scaling):
    learner = NeuralLearner(small(embedding=embedding, scaling=scaling, min_replay_history=10**6))
    learner.observe_many(*stream(120))
    learner.target.layers[0].weight.data.mul_(0.9)  # a target that differs from the online network
    if scaling == "normalized":  # normalizers that have seen targets, the target's differing from the online's
        learner.online.normalizer.update(torch.tensor([0.0, 0.9, 0.99]), torch.tensor([[2.0, 5.0, 30.0]]))
        learner.target.normalizer.update(torch.tensor([0.5]), torch.tensor([[3.0]]))
    buffers = {n: b.clone() for n, b in learner.online.named_buffers()}
    batch = learner.replay.sample(8)
    gammas = learner.training_gammas()
    assert gammas.shape == (8,)
    loss, delta = learner.loss(batch, gammas)
    learner.optimizer.zero_grad()
    loss.backward()
    tiled = {n: p.grad.clone() for n, p in learner.online.named_parameters()}
    tiled_buffers = {n: b.clone() for n, b in learner.online.named_buffers()}
    learner.optimizer.zero_grad()
    learner.online.load_state_dict({**learner.online.state_dict(), **buffers})  # the normalizer as before the loss
    loop_loss, loop_delta = reference_gradients(learner, batch, gammas)
    for name, b in learner.online.named_buffers():
        torch.testing.assert_close(tiled_buffers[name], b, rtol=1e-6, atol=1e-12, msg=name)
    assert loss.item() == pytest.approx(loop_loss, rel=1e-5)
    np.testing.assert_allclose(delta.detach().numpy(), loop_delta, rtol=1e-5, atol=1e-6)
    for name, p in learner.online.named_parameters():
        torch.testing.assert_close(tiled[name], p.grad, rtol=1e-4, atol=1e-7, msg=name)


@pytest.mark.parametrize(("sync_period", "synced_after"), [(8, [16, 24]), (10, [20, 28]), (4, [12, 16, 20, 24, 28])])
def test_schedule_first_update_then_every_period_and_target_sync_in_agent_steps(sync_period, synced_after):
    """Updates at every 4th step from step 10; the target copies the network at every multiple of
    target_sync_period *steps* (Dopamine's unit, the paper's), taking effect after the last update before it."""
    learner = NeuralLearner(small(min_replay_history=10, update_period=4, target_sync_period=sync_period))
    phi, c, term, trunc = stream(30)
    trained_at, synced_at = [], []
    for t in range(30):
        if learner.observe(phi[t], c[t], terminal=term[t], truncated=trunc[t]) is not None:
            trained_at.append(learner.transitions)
            params = zip(learner.online.parameters(), learner.target.parameters())
            if all(torch.equal(a, b) for a, b in params):
                synced_at.append(learner.transitions)
    assert trained_at == [12, 16, 20, 24, 28]
    assert learner.updates == 5
    assert synced_at == synced_after


def test_the_paper_sync_interval_is_2500_updates():
    """Sync interval 10000 (appendix table) at one update per 4 steps: a sync every 2,500 updates."""
    learner = NeuralLearner(small(min_replay_history=0, update_period=4, target_sync_period=10_000))
    syncs = 0
    for t in range(4, 30_001, 4):
        learner.transitions = t
        syncs += learner.sync_due()
    assert syncs == 3  # at steps 10,000, 20,000, 30,000: 7,500 updates


def test_offline_loop_equals_the_stream():
    data = stream(150, seed=4)
    a, b = NeuralLearner(small()), NeuralLearner(small())
    losses = [a.observe(data[0][t], data[1][t], terminal=data[2][t], truncated=data[3][t]) for t in range(150)]
    offline = b.observe_many(*data)
    np.testing.assert_array_equal([x for x in losses if x is not None], offline)
    for p, q in zip(a.online.parameters(), b.online.parameters()):
        assert torch.equal(p, q)
    assert (a.transitions, a.updates) == (b.transitions, b.updates) == (150, 66)


@pytest.mark.slow
def test_learns_a_markov_chain_at_timescales_it_never_trained_on():
    """Six states, one-hot features, known values V_γ = (I - γP)^-1 r at every γ.

    Γ_t holds only integer τ in [1, 10]; predictions at τ = 1.5, 2.5, 4.5, 7.5, 9.5 must be within 0.1 of the
    truth on the paper's display scale, (1 - γ) V (the cumulants lie in [-1, 1]), and 5 times better than at
    initialization. 1,500 updates.
    """
    S = 6
    rng = np.random.default_rng(0)
    P = rng.random((S, S)) ** 3
    P /= P.sum(axis=1, keepdims=True)
    r = np.array([1.0, 0.0, -1.0, 0.5, 0.0, -0.5])
    states = np.empty(1700, dtype=np.int64)
    s = 0
    for t in range(states.size):
        states[t] = s
        s = rng.choice(S, p=P[s])
    config = NeuralConfig(
        feature_size=S,
        hidden_sizes=(32, 32),
        tau_max=10.0,
        n_gamma=0,
        n_tau=6,
        integer_tau=True,
        step_size=3e-3,
        min_replay_history=200,
        update_period=1,
        target_sync_period=100,
        replay_capacity=10_000,
        seed=1,
    )
    learner = NeuralLearner(config)
    unseen_taus = np.array([1.5, 2.5, 4.5, 7.5, 9.5])
    gammas = 1.0 - 1.0 / unseen_taus
    truth = np.stack([np.linalg.solve(np.eye(S) - g * P, r) for g in gammas], axis=1)

    def scaled_error():
        return np.abs((learner.predict(np.eye(S), gammas) - truth) * (1.0 - gammas)).max()

    before = scaled_error()
    learner.observe_many(np.eye(S, dtype=np.float32)[states], r[states])
    after = scaled_error()
    assert learner.updates == 1501
    assert after < 0.1, after
    assert after < 0.2 * before, (before, after)


def test_checkpoint_round_trip_and_resume_equals_not_stopping(tmp_path):
    data = stream(200, seed=7)
    learner = NeuralLearner(small())
    learner.observe_many(*(a[:120] for a in data))
    path = learner.save(tmp_path / "learner.pt")
    state = torch.load(path, weights_only=True)  # no arbitrary pickle needed
    assert state["updates"] == learner.updates
    resumed = NeuralLearner.load(path)
    probe = np.random.default_rng(1).random((5, D))
    np.testing.assert_array_equal(resumed.predict(probe, [0.0, 0.5, 0.99]), learner.predict(probe, [0.0, 0.5, 0.99]))
    assert (resumed.transitions, resumed.updates) == (learner.transitions, learner.updates)
    # The next updates are the ones the learner that never stopped makes.
    a = learner.observe_many(*(x[120:] for x in data))
    b = resumed.observe_many(*(x[120:] for x in data))
    assert len(a) > 5
    np.testing.assert_array_equal(a, b)
    for p, q in zip(learner.online.parameters(), resumed.online.parameters()):
        assert torch.equal(p, q)
    for p, q in zip(learner.target.parameters(), resumed.target.parameters()):
        assert torch.equal(p, q)
    np.testing.assert_array_equal(learner.replay.tree.nodes, resumed.replay.tree.nodes)


def test_predictions_come_from_the_average_of_the_weights_a_plain_loop_computes():
    """The average moves only what predicts: training is the same with or without it, and the predicting
    weights are the exponential average of the trained ones after each update, as a plain loop computes it."""
    data = stream(160, seed=5)
    averaged, plain = NeuralLearner(small(average_decay=0.9)), NeuralLearner(small(average_decay=0.0))
    assert plain.average is None and plain.predicting is plain.online
    expected = [p.detach().clone() for p in averaged.online.parameters()]
    updates = 0
    for t in range(160):
        args = (data[0][t], float(data[1][t]))
        kwargs = {"terminal": bool(data[2][t]), "truncated": bool(data[3][t])}
        a, b = averaged.observe(*args, **kwargs), plain.observe(*args, **kwargs)
        assert a == b
        if a is not None:
            updates += 1
            expected = [0.9 * e + 0.1 * p.detach() for e, p in zip(expected, averaged.online.parameters())]
    assert updates == averaged.updates > 50
    for e, q in zip(expected, averaged.average.parameters()):
        torch.testing.assert_close(q, e, rtol=1e-5, atol=1e-6)
    for p, q in zip(averaged.online.parameters(), plain.online.parameters()):
        assert torch.equal(p, q)
    probe = np.random.default_rng(2).random((4, D))
    with torch.no_grad():
        by_average = averaged.outputs(
            averaged.average, torch.as_tensor(probe, dtype=torch.float32), torch.tensor([0.5])
        )
    scale = averaged.output_scale(averaged.average, torch.tensor([0.5], dtype=torch.float64)).numpy()
    np.testing.assert_allclose(averaged.predict(probe, [0.5]), by_average.double().numpy() / scale, rtol=1e-6)
    assert not np.allclose(averaged.predict(probe, [0.5]), plain.predict(probe, [0.5]))


def test_the_average_is_checkpointed_and_a_checkpoint_from_before_it_loads_without_one(tmp_path):
    learner = NeuralLearner(small(average_decay=0.9))
    learner.observe_many(*stream(120, seed=4))
    resumed = NeuralLearner.load(learner.save(tmp_path / "averaged.pt"))
    probe = np.random.default_rng(1).random((5, D))
    np.testing.assert_array_equal(resumed.predict(probe, [0.0, 0.9]), learner.predict(probe, [0.0, 0.9]))
    # A learner saved before the setting existed predicted with its network: it loads so, and still predicts so.
    old = NeuralLearner(small(average_decay=0.0))
    old.observe_many(*stream(120, seed=4))
    state = old.state_dict()
    config = json.loads(state["config"])
    del config["average_decay"]
    state["config"] = json.dumps(config)
    torch.save(state, tmp_path / "before.pt")
    loaded = NeuralLearner.load(tmp_path / "before.pt")
    assert loaded.config.average_decay == 0.0 and loaded.average is None
    np.testing.assert_array_equal(loaded.predict(probe, [0.5]), old.predict(probe, [0.5]))
    with pytest.raises(CheckpointError, match=r"average_decay: file has 0\.0, expected 0\.9"):
        NeuralLearner.load(tmp_path / "before.pt", config=small(average_decay=0.9))


def test_checkpoint_of_another_configuration_is_refused(tmp_path):
    path = NeuralLearner(small()).save(tmp_path / "a.pt")
    with pytest.raises(CheckpointError, match="embedding: file has 'direct', expected 'l_embed'"):
        NeuralLearner.load(path, config=small(embedding="l_embed"))
    assert NeuralLearner.load(path, config=small(device="cpu")).config == small()
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        NeuralLearner.load(tmp_path / "junk.pt")
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a neural learner checkpoint"):
        NeuralLearner.load(tmp_path / "other.pt")


def test_bad_input_names_the_value_and_changes_nothing():
    learner = NeuralLearner(small())
    learner.observe_many(*stream(40))
    before = (learner.transitions, learner.updates, learner.replay.added)
    params = [p.clone() for p in learner.online.parameters()]
    with pytest.raises(ValueError, match=r"features must be \[T, 6\] numbers; got shape \(5,\)"):
        learner.observe(np.zeros(5), 1.0)
    with pytest.raises(ValueError, match="got nan at record 0, feature 2"):
        learner.observe([0, 0, np.nan, 0, 0, 0], 1.0)
    with pytest.raises(ValueError, match="cumulants must be finite; got nan"):
        learner.observe(np.zeros(D), float("nan"))
    with pytest.raises(ValueError, match="got inf at record 3"):
        learner.observe_many(np.zeros((5, D)), [0, 0, 0, np.inf, 0])
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\); got 1\.0 at index 1"):
        learner.predict(np.zeros(D), [0.5, 1.0])
    with pytest.raises(ValueError, match=r"got -0\.1"):
        learner.predict(np.zeros(D), [-0.1])
    with pytest.raises(ValueError, match=r"features must be \[B, 6\]"):
        learner.predict(np.zeros((2, 7)), [0.5])
    with pytest.raises(ValueError, match="got inf at state 1, feature 0"):
        learner.predict([[0.0] * D, [np.inf] + [0.0] * 5], [0.5])
    assert (learner.transitions, learner.updates, learner.replay.added) == before
    assert all(torch.equal(p, q) for p, q in zip(params, learner.online.parameters()))
    with pytest.raises(ValueError, match=r"NeuralConfig\.embedding must be one of"):
        small(embedding="concat")
    with pytest.raises(ValueError, match="is not a torch device"):
        NeuralLearner(small(device="toaster"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_cuda_without_it_is_a_clear_error():
    with pytest.raises(ValueError, match=r"NeuralConfig.device 'cuda' asks for CUDA, but torch.cuda.is_available"):
        NeuralLearner(small(device="cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_unchanged_on_cuda_and_its_checkpoint_loads_on_cpu(tmp_path):
    data = stream(120, seed=5)
    gpu, cpu = NeuralLearner(small(device="cuda")), NeuralLearner(small())
    gpu_losses, cpu_losses = gpu.observe_many(*data), cpu.observe_many(*data)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-3, atol=1e-5)
    phi = np.random.default_rng(0).random((4, D))
    np.testing.assert_allclose(gpu.predict(phi, [0.0, 0.9]), cpu.predict(phi, [0.0, 0.9]), rtol=1e-3, atol=1e-4)
    moved = NeuralLearner.load(gpu.save(tmp_path / "gpu.pt"), device="cpu")
    np.testing.assert_allclose(moved.predict(phi, [0.0, 0.9]), gpu.predict(phi, [0.0, 0.9]), rtol=1e-6)


def test_a_diverging_loss_stops_training_and_keeps_the_last_checkpoint(tmp_path):
    # delta: a normalized learner divides the 1e30 below by the targets' RMS, and its loss stays finite
    learner = NeuralLearner(small(min_replay_history=8, update_period=1, scaling="delta"))
    learner.observe_many(*stream(30))
    path = learner.save(tmp_path / "last.pt")
    saved = path.read_bytes()
    # A cumulant of 1e30 is finite, but its squared TD error overflows float32.
    for _ in range(50):
        params = [p.clone() for p in learner.online.parameters()]
        updates = learner.updates
        try:
            learner.observe(np.ones(D), 1e30)
        except TrainingDiverged as exc:
            assert f"loss became inf at update {updates + 1}" in str(exc)
            break
    else:
        pytest.fail("the loss never overflowed")
    assert learner.updates == updates
    assert all(torch.equal(p, q) for p, q in zip(params, learner.online.parameters()))
    with pytest.raises(TrainingDiverged, match="training has stopped"):
        learner.observe(np.ones(D), 0.0)
    with pytest.raises(TrainingDiverged, match="not saving"):
        learner.save(path)
    assert path.read_bytes() == saved
    assert learner.predict(np.ones(D), [0.5]).shape == (1, 1)  # predictions still come from the last good weights


def test_predictions_are_in_the_cumulants_units():
    learner = NeuralLearner(small(scaling="delta"))
    phi, gammas = np.random.default_rng(0).random((3, D)), np.array([0.0, 0.9, 0.99])
    with torch.no_grad():
        f = learner.online(torch.as_tensor(phi, dtype=torch.float32), torch.as_tensor(gammas, dtype=torch.float32))
    np.testing.assert_allclose(learner.predict(phi, gammas), f.double().numpy() / (1 - gammas), rtol=1e-6)


def test_scaled_theta_keeps_the_initial_noise_of_an_unscaled_network():
    phi = np.random.default_rng(0).random((4, D))
    gammas = np.array([0.0, 0.5, 0.9, 0.99])  # tau_max = 100: gamma_max = 0.99
    plain = NeuralLearner(small(scaling="none")).predict(phi, gammas)
    scaled = NeuralLearner(small(scaling="delta")).predict(phi, gammas)
    theta = NeuralLearner(small(scaling="delta_theta")).predict(phi, gammas)
    # Same seed, same initial weights: dividing by (1 - γ) amplifies the noise up to 100 times...
    np.testing.assert_allclose(scaled, plain / (1 - gammas), rtol=1e-5)
    # ...and scaling the output layer by 1 - γ_max brings it back to at most the unscaled network's.
    np.testing.assert_allclose(theta, plain * 0.01 / (1 - gammas), rtol=1e-4)
    np.testing.assert_allclose(theta[:, -1], plain[:, -1], rtol=1e-4)
    assert np.all(np.abs(theta) <= np.abs(plain) * (1 + 1e-4))


def test_probe_networks_train_and_interpolate():
    learner = NeuralLearner(small(network="probes", probe_taus=(1.0, 2.0, 10.0), scaling="delta_theta"))
    assert learner.training_gammas().tolist() == [0.0, 0.5, 0.9]
    losses = learner.observe_many(*stream(80))
    assert len(losses) == 31 and np.isfinite(losses).all()
    phi = np.random.default_rng(2).random((3, D))
    at_probes = learner.predict(phi, [0.0, 0.5, 0.9])
    between = learner.predict(phi, [0.25, 0.8])
    np.testing.assert_allclose(between, interpolate([0.0, 0.5, 0.9], at_probes, [0.25, 0.8], scale="tau"))
    with pytest.raises(ValueError, match="outside the probes' range"):
        learner.predict(phi, [0.95])


def test_config_round_trips_through_the_yaml_door():
    config = small(embedding="matrix", timescale_inputs="tau", probe_taus=(1.0, 3.0))
    assert from_mapping(NeuralConfig, to_mapping(config)) == config
    assert dataclasses.replace(config, seed=4).seed == 4
    paper = NeuralConfig.paper()  # the defaults' own checks: tests/test_neural_defaults.py
    assert (paper.step_size, paper.adam_eps, paper.batch_size, paper.n_step) == (6.25e-5, 1e-8, 32, 4)
    assert (paper.replay_capacity, paper.min_replay_history, paper.update_period) == (100_000, 20_000, 4)
    assert paper.target_sync_period == 10_000 and paper.sampling.size == 8 and paper.scaling == "delta"


@pytest.mark.parametrize("priority", ["sqrt_loss", "loss"])
def test_each_probe_samples_by_its_own_priorities_as_a_separate_network(priority):
    """Probe p draws its own batch from its own sum tree, gets the gradient its own network would get from
    that batch alone, and only its own errors set its priorities (by the chosen rule)."""
    # delta: the hand-made δ below scales by 1 - γ (normalized: tests/test_neural_defaults.py)
    learner = NeuralLearner(small(network="probes", probe_taus=(1.0, 4.0, 20.0), priority=priority, scaling="delta"))
    learner.observe_many(*stream(60))  # 20 updates: the three sets of priorities have diverged
    trees = learner.replay.trees
    assert len(trees) == 3 and learner.updates > 0
    assert not np.array_equal(trees[0].leaves, trees[1].leaves)
    np.testing.assert_array_equal(trees[0].leaves > 0, trees[2].leaves > 0)  # the same windows are sampleable
    # Redo the next update by hand from a copy with the same generator states.
    twin = NeuralLearner(learner.config)
    twin.load_state_dict(learner.state_dict())
    batches = [twin.replay.sample(8, p) for p in range(3)]
    assert len({tuple(b.indices) for b in batches}) > 1  # the probes do not share one batch
    loss, delta = twin.probe_loss(batches)
    twin.optimizer.zero_grad()
    loss.backward()
    for p, batch in enumerate(batches):
        alone = ProbeNets(gammas=[learner.probe_gammas[p]], feature_size=D, hidden_sizes=(16, 8))
        with torch.no_grad():
            for mine, stacked in zip(alone.parameters(), twin.online.parameters()):
                mine.copy_(stacked[p : p + 1])
        target = ProbeNets(gammas=[learner.probe_gammas[p]], feature_size=D, hidden_sizes=(16, 8))
        with torch.no_grad():
            for mine, stacked in zip(target.parameters(), twin.target.parameters()):
                mine.copy_(stacked[p : p + 1])
        g = float(learner.probe_gammas[p])
        with torch.no_grad():
            v_t = target(torch.as_tensor(batch.bootstrap_features))[:, 0]
        own_delta = (
            (1 - g) * torch.as_tensor(batch.nstep_returns([g])[:, 0], dtype=torch.float32)
            + torch.as_tensor(batch.bootstrap_discounts([g])[:, 0], dtype=torch.float32) * v_t
            - alone(torch.as_tensor(batch.features))[:, 0]
        )
        w = torch.as_tensor(importance_weights(batch.probabilities), dtype=torch.float32)
        (w * own_delta.square()).mean().backward()
        torch.testing.assert_close(delta[:, p].detach(), own_delta.detach(), rtol=1e-5, atol=1e-6)
        for mine, stacked in zip(alone.parameters(), twin.online.parameters()):
            torch.testing.assert_close(mine.grad[0], stacked.grad[p], rtol=1e-4, atol=1e-7)
    learner.update()
    for p, batch in enumerate(batches):
        expected = priorities_from_losses(delta[:, p].detach().square().numpy(), priority)
        np.testing.assert_allclose(learner.replay.trees[p].get(batch.indices), expected, rtol=1e-5)


def test_priority_rule_and_importance_weights_are_settings():
    np.testing.assert_allclose(priorities_from_losses([[4.0, 1.0]], "loss"), [4.0 + 1e-10])
    np.testing.assert_allclose(priorities_from_losses([[4.0, 1.0]], "sqrt_loss"), [2.0], rtol=1e-9)
    with pytest.raises(ValueError, match="'cube'"):
        priorities_from_losses([1.0], "cube")
    with pytest.raises(ValueError, match="priority"):
        small(priority="cube")
    plain = NeuralLearner(small(importance_weights=False, min_replay_history=10**6))
    weighted = NeuralLearner(small(min_replay_history=10**6))
    data = stream(80)
    plain.observe_many(*data)
    weighted.observe_many(*data)
    plain.replay.update_priorities(np.arange(10, 20), np.arange(1.0, 11.0))
    batch = plain.replay.sample(8)
    gammas = plain.training_gammas()
    loss, delta = plain.loss(batch, gammas)
    assert loss.item() == pytest.approx(delta.detach().square().mean().item(), rel=1e-6)
    w_loss, w_delta = weighted.loss(batch, gammas)
    w = importance_weights(batch.probabilities)
    assert w.min() < 1.0  # the priorities differ, so the weights do
    assert w_loss.item() == pytest.approx((w[:, None] * w_delta.detach().double().square().numpy()).mean(), rel=1e-5)
