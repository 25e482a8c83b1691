"""Small Markov chains with exact values v(s, γ), for checking the neural Γ-net at every timescale.

A test helper, not a benchmark suite: a few chains of ``N`` states whose values solve
(I - γP) v = r exactly (P among non-terminal states, r the expected cumulant of leaving a
state), a stream sampled from each, and the features a learner sees (one-hot, tiles or the
raw position). Kinds:

- ``walk``: episodic random walk, -1 off the left end, +1 off the right, 0 else: v in [-1, 1].
- ``ones``: a ring walked at random, cumulant 1.5 on its first half and 0.5 on the other: v ≈ τ.
- ``rare``: a ring walked at random, cumulant 20 with probability 0.05 on leaving state 0, else 0.
- ``mixed``: a ring walked at random, cumulant cos(2π s / N) + 0.2 plus noise: mixed sign.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("walk", "ones", "rare", "mixed")
FEATURES = ("onehot", "tiles", "raw")
#: The timescales the checks read, as τ.
TAUS = np.array([1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 70.0, 80.0, 90.0, 100.0])


@dataclass(frozen=True)
class Chain:
    """A chain's dynamics and the stream sampled from it."""

    kind: str
    """One of :data:`KINDS`."""
    P: np.ndarray
    """[N, N] transition probabilities among non-terminal states (rows of an episodic chain sum below 1)."""
    r: np.ndarray
    """[N] expected cumulant on leaving each state."""
    states: np.ndarray
    """[T] S_t of the stream."""
    cumulants: np.ndarray
    """[T] C_{t+1}."""
    terminals: np.ndarray
    """[T] bool: S_{t+1} terminal (the next record starts a new episode)."""

    @property
    def n(self) -> int:
        return self.r.shape[0]

    def values(self, taus) -> np.ndarray:
        """Exact v(s, γ) for every state, [N, len(taus)]."""
        gammas = 1.0 - 1.0 / np.asarray(taus, dtype=np.float64)
        eye = np.eye(self.n)
        return np.stack([np.linalg.solve(eye - g * self.P, self.r) for g in gammas], axis=1)


def make_chain(kind: str, steps: int, *, n: int = 10, seed: int = 0) -> Chain:
    """A chain of ``kind`` and ``steps`` transitions sampled from it (seeded)."""
    rng = np.random.default_rng(seed)
    P = np.zeros((n, n))
    for s in range(n):
        for d in (-1, 1):
            j = s + d
            if kind == "walk" and not 0 <= j < n:
                continue  # off the end: terminal
            P[s, j % n] += 0.5
    r = np.zeros(n)
    if kind == "walk":
        r[0], r[n - 1] = -0.5, 0.5
    elif kind == "ones":
        r[:] = np.where(np.arange(n) < n // 2, 1.5, 0.5)
    elif kind == "rare":
        r[0] = 20 * 0.05
    elif kind == "mixed":
        r[:] = np.cos(2 * np.pi * np.arange(n) / n) + 0.2
    else:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    states = np.empty(steps, dtype=np.int64)
    cumulants = np.zeros(steps)
    terminals = np.zeros(steps, dtype=bool)
    s = n // 2
    moves = rng.choice((-1, 1), size=steps)
    for t in range(steps):
        states[t] = s
        j = s + moves[t]
        if kind == "walk":
            if not 0 <= j < n:
                cumulants[t], terminals[t] = (-1.0 if j < 0 else 1.0), True
                s = int(rng.integers(n // 2 - 1, n // 2 + 1))
                continue
        elif kind == "ones":
            cumulants[t] = r[s]
        elif kind == "rare":
            cumulants[t] = 20.0 if s == 0 and rng.random() < 0.05 else 0.0
        else:
            cumulants[t] = r[s] + rng.normal(0.0, 0.5)
        s = j % n
    return Chain(kind=kind, P=P, r=r, states=states, cumulants=cumulants, terminals=terminals)


def features(states, n: int, kind: str) -> np.ndarray:
    """φ of each state: ``onehot`` [N], ``tiles`` (3 tilings of 3-state tiles, wrapping) or ``raw`` (s / N)."""
    states = np.asarray(states)
    if kind == "onehot":
        return np.eye(n, dtype=np.float32)[states]
    if kind == "tiles":
        width, tilings = 3, 3
        tiles = -(-n // width)
        phi = np.zeros((states.size, tilings * tiles), dtype=np.float32)
        for k in range(tilings):
            phi[np.arange(states.size), k * tiles + ((states + k) % n) // width] = 1.0
        return phi
    if kind == "raw":
        return (states / n).astype(np.float32)[:, None]
    raise ValueError(f"features must be one of {FEATURES}; got {kind!r}")


def relative_rmse(predicted: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per timescale, the RMSE over states divided by the RMS of the exact values: [G]."""
    return np.sqrt(np.mean((predicted - exact) ** 2, axis=0) / np.mean(exact**2, axis=0))


def neural_errors(chain: Chain, config, feature_kind: str = "onehot", taus=TAUS) -> np.ndarray:
    """Relative RMSE at each τ of a neural learner of ``config`` trained on the chain's stream."""
    from gamma_net_core.neural.learner import NeuralLearner

    learner = NeuralLearner(config)
    learner.observe_many(features(chain.states, chain.n, feature_kind), chain.cumulants, chain.terminals)
    gammas = 1.0 - 1.0 / np.asarray(taus, dtype=np.float64)
    predicted = learner.predict(features(np.arange(chain.n), chain.n, feature_kind), gammas)
    return relative_rmse(predicted, chain.values(taus))


def linear_errors(chain: Chain, seed: int = 0, taus=TAUS) -> np.ndarray:
    """Relative RMSE at each τ of the default linear Γ-net on one-hot state inputs, trained on the same stream."""
    from gamma_net_core.linear.learners import LinearGammaNet
    from gamma_net_core.linear.settings import GammaNetConfig
    from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

    n = chain.n
    rng = np.random.default_rng(seed)
    net = LinearGammaNet(GammaNetConfig(state_low=(0.0,) * n, state_high=(1.0,) * n), rng=rng)
    onehot = np.eye(n)
    states_t = onehot[chain.states]
    states_tp1 = np.vstack([states_t[1:], states_t[-1:]])  # S_{t+1}; a terminal's is ignored
    keep = np.ones(chain.states.size, dtype=bool)
    keep[-1] = False
    net.learn_recording(
        states_t=states_t[keep],
        cumulants=chain.cumulants[keep],
        states_tp1=states_tp1[keep],
        terminals=chain.terminals[keep],
        timescales=TimescaleSampler(TimescaleSampling(), rng),
    )
    gammas = 1.0 - 1.0 / np.asarray(taus, dtype=np.float64)
    return relative_rmse(net.predict(onehot, gammas), chain.values(taus))
