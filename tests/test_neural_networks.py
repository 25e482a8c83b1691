"""Γ-nets and probe networks: shapes, the plain reference as oracle, gradient flow, loss scaling by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from gamma_net_core.neural.networks import (
    EMBEDDINGS,
    TIMESCALE_INPUTS,
    GammaNet,
    ProbeNets,
    output_scale,
    scale_initial_output_,
    timescale_inputs,
)
from gamma_net_core.neural.reference import reference_forward
from gamma_net_core.neural.td import td_errors, weighted_squared_loss

D = 6
CONFIGS = [
    (e, a, i)
    for e, a, i in itertools.product(EMBEDDINGS, ("linear", "relu"), TIMESCALE_INPUTS)
    if not (e == "direct" and a == "relu")
]


def small_net(embedding="direct", activation="linear", inputs="both", seed=0):
    return GammaNet(
        feature_size=D,
        inputs=inputs,
        tau_max=100.0,
        embedding=embedding,
        embedding_activation=activation,
        hidden_sizes=(32, 16, 8),
        generator=torch.Generator().manual_seed(seed),
    )


@pytest.mark.slow
@pytest.mark.parametrize("embedding,activation,inputs", CONFIGS)
def test_embedding_shapes_reference_and_gradient_flow(embedding, activation, inputs):
    net = small_net(embedding, activation, inputs)
    phi = torch.rand(4, D, generator=torch.Generator().manual_seed(1))
    gammas = torch.tensor([0.0, 0.5, 0.9, 0.99, 0.7])
    out = net(phi, gammas)
    assert out.shape == (4, 5)
    # The fast forward is the paper's embedding followed by the layers, pair by pair.
    torch.testing.assert_close(out, reference_forward(net, phi, gammas), rtol=1e-5, atol=1e-6)
    e = net.embedding(phi, gammas)
    width = {"direct": D + (2 if inputs == "both" else 1), "l_embed": D + 16}.get(embedding, D)
    assert e.shape == (4, 5, width)
    # The timescale matters, and every parameter receives gradient.
    assert not torch.allclose(out[:, 0], out[:, 3])
    out.sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        assert torch.isfinite(p.grad).all(), name


def test_the_paper_sizes():
    net = GammaNet(generator=torch.Generator().manual_seed(0))
    assert [layer.out_features for layer in net.layers] == [512, 256, 128, 16, 1]
    assert net.layers[0].in_features == 514  # φ, γ, τ/τ_max
    assert GammaNet(embedding="l_embed").layers[0].in_features == 528
    matrix = GammaNet(embedding="matrix", inputs="tau", feature_size=32, hidden_sizes=(8,))
    assert matrix.timescale_embedding(torch.tensor([0.5, 0.9])).shape == (2, 32, 32)


def test_timescale_inputs():
    u = timescale_inputs(torch.tensor([0.0, 0.9, 0.99]), "both", 100.0)
    torch.testing.assert_close(u, torch.tensor([[0.0, 0.01], [0.9, 0.1], [0.99, 1.0]]))
    assert timescale_inputs(torch.tensor([0.5]), "gamma", 100.0).item() == 0.5
    assert timescale_inputs(torch.tensor([0.5]), "tau", 100.0).item() == pytest.approx(0.02)


def test_matrix_embedding_starts_near_identity():
    net = GammaNet(embedding="matrix", feature_size=64, hidden_sizes=(8,), generator=torch.Generator().manual_seed(0))
    phi = torch.rand(16, 64)
    e = net.embedding(phi, torch.tensor([0.5]))[:, 0]
    # e = φ (I + noise): correlated with φ and of its size, not a sum of 64 products.
    assert torch.corrcoef(torch.stack([e.flatten(), phi.flatten()]))[0, 1] > 0.5
    assert e.norm() < 3 * phi.norm()


def test_direct_embedding_has_no_activation_to_choose():
    with pytest.raises(ValueError, match="no embedding layer"):
        GammaNet(embedding="direct", embedding_activation="relu")
    with pytest.raises(ValueError, match="embedding must be one of"):
        GammaNet(embedding="hadamard")


def test_probe_networks_are_independent_networks():
    probes = ProbeNets(gammas=[0.0, 0.5, 0.9], feature_size=D, hidden_sizes=(8, 5), generator=torch.Generator())
    phi = torch.rand(4, D)
    out = probes(phi)
    assert out.shape == (4, 3)
    for p in range(3):  # probe p is a plain MLP with its own weights
        h = phi
        for layer, (w, b) in enumerate(zip(probes.weights, probes.biases)):
            h = h @ w[p] + b[p, 0]
            h = torch.relu(h) if layer < len(probes.weights) - 1 else h
        torch.testing.assert_close(out[:, p], h[:, 0])
    out[:, 1].sum().backward()  # probe 1's output touches only probe 1's weights
    for w in probes.weights:
        assert w.grad[1].abs().sum() > 0 and w.grad[0].abs().sum() == 0 and w.grad[2].abs().sum() == 0
    with pytest.raises(ValueError, match="distinct"):
        ProbeNets(gammas=[0.5, 0.5], feature_size=D)
    with pytest.raises(ValueError, match="probe gamma must be in"):
        ProbeNets(gammas=[0.5, 1.0], feature_size=D)


def test_loss_scaling_reproduces_the_derivation_by_hand():
    """n = 2, C = (1, 2), γ = 0.5, f(S_t) = 0.3, f(S_{t+2}) = 0.8 (f = (1-γ)V: V = 0.6 and 1.6).

    Scaled:   δ_f = (1-γ)(C1 + γ C2) + γ² f(S_{t+2}) - f(S_t) = 0.5·2 + 0.25·0.8 - 0.3 = 0.9
    Unscaled: δ_V = C1 + γ C2 + γ² V(S_{t+2}) - V(S_t)       = 2 + 0.25·1.6 - 0.6   = 1.8 = δ_f / (1-γ)
    """
    gamma = torch.tensor([0.5])
    nstep_return = torch.tensor([[1.0 + 0.5 * 2.0]])
    discount = gamma[None, :] ** 2
    f_tm1 = torch.tensor([[0.3]], requires_grad=True)
    delta_f = td_errors(f_tm1, nstep_return, discount, torch.tensor([[0.8]]), output_scale(gamma, "delta"))
    assert delta_f.item() == pytest.approx(0.9)
    v_tm1 = torch.tensor([[0.6]], requires_grad=True)
    delta_v = td_errors(v_tm1, nstep_return, discount, torch.tensor([[1.6]]), output_scale(gamma, "none"))
    assert delta_v.item() == pytest.approx(1.8)
    # Loss and gradients: scaled by (1-γ)² = 0.25 in value; the gradient w.r.t. the output, -2δ, by (1-γ).
    loss_f = weighted_squared_loss(delta_f, torch.ones(1))
    loss_v = weighted_squared_loss(delta_v, torch.ones(1))
    assert loss_f.item() == pytest.approx(0.25 * loss_v.item())
    loss_f.backward()
    loss_v.backward()
    assert f_tm1.grad.item() == pytest.approx(-2 * 0.9)
    assert v_tm1.grad.item() == pytest.approx(-2 * 1.8)
    # Semi-gradient: the bootstrap term carries no gradient.
    out_t = torch.tensor([[0.8]], requires_grad=True)
    assert not td_errors(
        torch.tensor([[0.3]]), nstep_return, discount, out_t, output_scale(gamma, "delta")
    ).requires_grad


def test_scaled_theta_multiplies_the_initial_output():
    phi, gammas = torch.rand(3, D), torch.tensor([0.0, 0.9, 0.99])
    net = small_net()
    before = net(phi, gammas).detach()
    scale_initial_output_(net, 0.01)
    torch.testing.assert_close(net(phi, gammas), 0.01 * before)
    probes = ProbeNets(gammas=[0.0, 0.9], feature_size=D, hidden_sizes=(4,), generator=torch.Generator())
    before = probes(phi).detach()
    scale_initial_output_(probes, np.array([1.0, 0.1]))
    torch.testing.assert_close(probes(phi), before * torch.tensor([1.0, 0.1]))


def test_same_seed_same_network():
    a, b = small_net("l_embed", seed=3), small_net("l_embed", seed=3)
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q)
    c = small_net("l_embed", seed=4)
    assert not torch.equal(a.layers[0].weight, c.layers[0].weight)
