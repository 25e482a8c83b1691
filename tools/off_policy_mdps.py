"""Off-policy learners against on-policy TD(0) on the small MDPs of tests/test_gradient_td.py, over seeds, as in
docs/off-policy.md ("Long timescales").

    python tools/off_policy_mdps.py [SEEDS] [STEPS]      (default 5 seeds of 20,000 steps; about 12 s)

For each MDP and (pi, b) pair and each seed: on-policy TD(0) learns on pi's own data, each off-policy learner on
b's data with rho = pi / b, all with the test's coding and step sizes; the error is the RMSE against the exact
v_pi at the gammas between the trained ladder's rungs. Prints, per learner, the ratio of its error to on-policy
TD(0)'s: the mean over seeds and the min-max.
"""

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
import test_gradient_td as mdps  # (the MDPs, their walks and the coding live with their test)

from gamma_net_core.linear import GammaNetConfig, LinearGammaNet, OffPolicyConfig, OffPolicyGammaNet

LEARNERS = {
    "TDRC (kappa 1)": dict(method="gtd", lam=0.0),
    "TDC (kappa 0)": dict(method="gtd", lam=0.0, secondary_regularization=0.0),
    "GTD(0.5)": dict(method="gtd", lam=0.5),
    "off-policy TD(0)": dict(method="td", lam=0.0),
}


def pairs(n: int):
    return {
        "pi 0.9 / b 0.5": (np.tile([0.9, 0.1], (n, 1)), np.tile([0.5, 0.5], (n, 1))),
        "pi 0.2 / b 0.6": (np.tile([0.2, 0.8], (n, 1)), np.tile([0.6, 0.4], (n, 1))),
    }


def main(seeds: int = 5, steps: int = 20_000) -> None:
    ladder = np.tile(mdps.TRAINED, (steps, 1))
    print(f"error / on-policy TD(0)'s at gamma {mdps.BETWEEN.tolist()}: mean over {seeds} seeds [min-max]")
    for mdp, (P, c) in (("ring", mdps._ring()), ("random", mdps._random_mdp())):
        n = c.shape[0]
        config = {**mdps._config(n), "step_size_decay_steps": steps}
        for pair, (pi, b) in pairs(n).items():
            v = np.array([mdps._v_pi(P, c, pi, g) for g in mdps.BETWEEN]).T
            ratios = {name: [] for name in LEARNERS}
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                s, _, s_next = mdps._walk(P, pi, steps, rng)
                td = LinearGammaNet(GammaNetConfig(**config), rng=np.random.default_rng(1))
                td.learn_recording(states_t=s.astype(float), cumulants=c[s_next], states_tp1=s_next.astype(float),
                                   timescales=ladder)  # fmt: skip
                on_policy = mdps._errors(td, n, v)
                s, a, s_next = mdps._walk(P, b, steps, rng)
                for name, changes in LEARNERS.items():
                    net = OffPolicyGammaNet(OffPolicyConfig(**config, secondary_step_size=0.1, **changes),
                                            rng=np.random.default_rng(1))  # fmt: skip
                    net.learn_recording(states_t=s.astype(float), cumulants=c[s_next],
                                        states_tp1=s_next.astype(float), rhos=pi[s, a] / b[s, a],
                                        timescales=ladder)  # fmt: skip
                    ratios[name].append(mdps._errors(net, n, v) / on_policy)
            print(f"\n{mdp}, {pair}")
            for name, r in ratios.items():
                r = np.array(r)
                cells = "  ".join(f"{m:.2f} [{lo:.2f}-{hi:.2f}]" for m, lo, hi in zip(r.mean(0), r.min(0), r.max(0)))
                print(f"  {name:17s} {cells}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
