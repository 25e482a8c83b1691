"""The forecast readout's resolution, and its error against a Markov chain's exact E[C_{t+k}].

    python -m gamma_net_studies.forecasts            # the tables docs/horde.md and results.md show

Three tables: the kernel each horizon really applies at the shipped settings (30 Hz, tau_max
100; :func:`~gamma_net_core.horde.readouts.forecast_resolution`); on a ring chain (40 states,
walked forwards 0.6 / staying 0.3 / backwards 0.1, cumulant cos(2 pi s / 40) on arrival), the
largest error over the states, against E[C_{t+k} | S_t = s] = (P^k c)(s), of taking the present
cumulant for the future one, of the forecast made from exact values at the readout's timescales
(tau_max 100 and 30: the fit's gammas span [1, tau_max], so the kernels differ), and of a tabular
Horde (tau_max 30) learning the chain from one sampled walk of 30,000 steps.
"""

from __future__ import annotations

import numpy as np

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import Readout
from gamma_net_core.horde.readouts import forecast_resolution, forecast_steps, readout_weights
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.timescales import TimescaleSampling

#: States of the ring chain.
RING = 40
#: The shipped config/horde.yaml's step rate and longest timescale.
SHIPPED = {"rate_hz": 30.0, "tau_max": 100.0}
TABLE_SECONDS = (1 / 30, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0)


def ring_chain(forwards: float = 0.6, stay: float = 0.3, backwards: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(P [S, S], c [S]): a walk around a ring, and the cumulant received on arriving at each state."""
    P = np.zeros((RING, RING))
    for s in range(RING):
        P[s, (s + 1) % RING] += forwards
        P[s, s] += stay
        P[s, (s - 1) % RING] += backwards
    return P, np.cos(2 * np.pi * np.arange(RING) / RING)


def chain_values(P: np.ndarray, c: np.ndarray, gammas) -> np.ndarray:
    """[S, G] exact V(s, gamma) = sum_a gamma^a P^(a+1) c = (I - gamma P)^-1 P c."""
    return np.stack([np.linalg.solve(np.eye(len(c)) - g * P, P @ c) for g in gammas], axis=1)


def learn_chain(
    P: np.ndarray,
    c: np.ndarray,
    readouts: list[Readout],
    *,
    rate_hz: float,
    tau_max: float,
    steps: int,
    step_size: float = 0.05,
    seed: int = 1,
) -> HordeLearner:
    """A tabular Horde trained at the readouts' gammas on one walk.

    One tile per state and per band of gamma and tau 1 % of their ranges wide: the readouts'
    longest gammas share tiles, so their learned values are tied, not one learner per gamma.
    """
    config = GammaNetConfig(
        tilings=(1,),
        tile_widths=(0.01,),  # 100 tiles over the ring's 40 states, and over each gamma and tau
        memory_size=0,
        bias=False,
        step_size=step_size,
        state_low=(0.0,),
        state_high=(float(len(c)),),
        timescale_input="both",
        tau_scale=50.0,
    )
    horde = HordeLearner(
        config,
        names=["ring"],
        readouts=readouts,
        rate_hz=rate_hz,
        timescales=TimescaleSampling(n_gamma=0, n_tau=1, tau_max=tau_max),
        rng=np.random.default_rng(0),
    )
    train = np.unique(np.concatenate([horde.readout_weights(r.name)[0] for r in readouts]))
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(P, axis=1)
    s = 0
    for _ in range(steps):
        s_next = min(int(np.searchsorted(cumulative[s], rng.random())), len(c) - 1)
        horde.learn([s + 0.5], [c[s_next]], [s_next + 0.5], gammas=train)
        s = s_next
    return horde


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    print("Forecast kernels at 30 Hz, tau_max 100 (steps ahead: C_{t+1} is 1)\n")
    print(
        _row(["horizon (s)", "k (steps)", "peak (steps ahead)", "half-height band (steps ahead)", "side lobes", "gain"])
    )
    print(_row(["---"] * 6))
    for seconds in TABLE_SECONDS:
        r = forecast_resolution(Readout(name="f", kind="forecast", seconds=seconds), **SHIPPED)
        cells = [f"{seconds:.3g}", str(r.steps), str(r.peak), f"{r.half_low}–{r.half_high}"]
        print(_row(cells + [f"{r.negative:.2f}", f"{r.gain:.1f}"]))

    P, c = ring_chain()
    print("\nRing chain, 10 Hz: max over states of |forecast - P^k c| (the cumulant spans [-1, 1])\n")
    columns = ["horizon (s)", "k", "present cumulant", "exact values, tau_max 100", "exact values, tau_max 30"]
    print(_row(columns + ["learned, tau_max 30"]))
    print(_row(["---"] * 6))
    learned_seconds = (0.5, 1.0, 2.0)
    readouts = [Readout(name=f"in_{s}s", kind="forecast", seconds=s) for s in learned_seconds]
    horde = learn_chain(P, c, readouts, rate_hz=10.0, tau_max=30.0, steps=30_000)
    for seconds in (0.1, 0.5, 1.0, 2.0):
        readout = Readout(name=f"in_{seconds}s", kind="forecast", seconds=seconds)
        k = forecast_steps(readout, rate_hz=10.0)
        exact = np.linalg.matrix_power(P, k) @ c
        from_values = []
        for tau_max in (100.0, 30.0):
            gammas, coefficients = readout_weights(readout, rate_hz=10.0, tau_max=tau_max)
            from_values.append(f"{np.max(np.abs(chain_values(P, c, gammas) @ coefficients - exact)):.3f}")
        learned = "—"
        if seconds in learned_seconds:
            forecast = np.array([horde.readout([s + 0.5], readout.name)[0] for s in range(RING)])
            learned = f"{np.max(np.abs(forecast - exact)):.3f}"
        cells = [f"{seconds:g}", str(k), f"{np.max(np.abs(c - exact)):.3f}", *from_values, learned]
        print(_row(cells))


if __name__ == "__main__":
    main()
