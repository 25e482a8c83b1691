"""`gamma-net off-policy arm`: the paper's first example, "how much current will my motors draw over the
next 3 s if I move the shoulder up?", learned off-policy on the simulated arm.

The arm is :class:`~gamma_net_core.signals.arm.SimulatedArm` (the servo model the emulator runs) with
``config/arm.yaml``'s settings. A behaviour drives the shoulder: at each decision point (every
``decision_s``) it commands up with probability ``p_up``, holds with ``p_hold``, else down, and keeps that
command until the next decision; the elbow holds. The question's cumulant is the shoulder motor's current,
|effort| through the XM430-W350's torque constant; its target policy pi commands the shoulder up at every
step. Each step's importance ratio is exact (b known): rho_t = pi(A_t) / b(A_t | history) is 1 / p_up where
the behaviour draws up at a decision point, 1 where it goes on with an up it drew before, 0 otherwise. The
product of the rho along a stretch is the ratio of the stretch's probabilities under pi and b.

Three answers learn on the same recording, each a linear Γ-net with the same settings and Gamma_t drawn
afresh every step (the bounds tau 1 and 100 and draws between them, so every probe tau but the bounds lies
between trained ones):

- off-policy, TDRC (TDC with h's ridge, the default ``secondary_regularization``;
  :class:`~gamma_net_core.linear.OffPolicyGammaNet`) with those rho: v_pi;
- on-policy, the plain TD(0) Γ-net (Algorithm 1) on the same data, rho ignored: v_b, the behaviour's value;
- off-policy TD(0) with per-decision importance sampling, the naive baseline.

Truth: Monte-Carlo returns of the target, from a held-out recording of the same behaviour (another seed).
A return from step t counts where the behaviour followed pi from t until the shoulder rested at its upper
stop: there the servo model, still pushed up, stays at rest and draws no current, so the return's tail is
exactly 0 and the return is complete (the dynamics are deterministic: it is v_pi of the arm's state). A
stretch that turns away before the stop gives no return: its tail is unknown. Steps already resting at the
stop (return 0) are left out. Each answer's error is mean |V - G| / mean |G| over those steps, per probe tau.
Reported over seeds: mean and spread of each error, each off-policy answer's paired difference from the
on-policy answer with a 95 % bootstrap interval over seeds, and whether the off-policy answer is closer.
The behaviour holds each command for ``decision_s``, which held plain TDC back (its h follows a held run of
large rho delta; the ridge stops that): docs/off-policy.md, "Held actions".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gamma_net_core.config import setting, validate
from gamma_net_core.report import Report, Table

#: The question's timescale: 3 s at the arm's 30 Hz.
QUESTION_TAU = 90.0
#: Probe timescales (steps): the bounds of Gamma_t (1, 100) and timescales between the drawn ones.
PROBE_TAUS = (1.0, 5.0, 10.0, 30.0, 60.0, 90.0, 100.0)
#: N m per A of the XM430-W350 (4.1 N m at 2.3 A): effort to Present Current, as the driver reads it.
TORQUE_CONSTANT = 4.1 / 2.3
OFF, ON, NAIVE = "off-policy TDRC", "on-policy TD(0)", "off-policy TD(0)"
ANSWERS = (OFF, ON, NAIVE)
FIGURE_NAME = "off_policy_arm.png"
JSON_NAME = "off_policy_arm.json"
#: Bootstrap resamples of the seeds' paired differences.
BOOTSTRAP = 10_000
#: Up, hold and down as the behaviour's choices (0, 1, 2).
UP, HOLD, DOWN = 0, 1, 2


@dataclass(frozen=True)
class Behaviour:
    """How the behaviour drives the shoulder: a command drawn at each decision point, held until the next."""

    decision_s: float = setting(0.5, "seconds between decision points", low=0.01, high=60.0)
    p_up: float = setting(0.5, "probability of commanding the shoulder up at a decision point", low=0.01, high=1.0)
    p_hold: float = setting(0.25, "probability of holding it (commanding 0); down takes the rest", low=0.0, high=0.99)
    speed: float = setting(0.6, "rad/s of an up or down command (the joystick's full deflection)", low=0.01, high=2.0)
    rate_hz: float = setting(30.0, "steps per second (the paper's arm: 30 Hz)", low=1.0, high=1000.0)

    def __post_init__(self) -> None:
        validate(self)
        if self.p_up + self.p_hold > 1.0:
            raise ValueError(f"Behaviour: p_up {self.p_up} + p_hold {self.p_hold} must not exceed 1")

    @property
    def decision_steps(self) -> int:
        """Steps from one decision point to the next."""
        return max(1, round(self.decision_s * self.rate_hz))


class Recording(NamedTuple):
    """What the arm did under the behaviour: T transitions, S_t -> S_{t+1}.

    Attributes:
      states: [T + 1, 2] the learner's inputs, shoulder position and velocity as reported, normalized to [0, 1].
      current: [T + 1] A, the shoulder motor's current after each step (``current[t + 1]`` is C_{t+1}).
      command: [T] rad/s, the shoulder's command A_t.
      rho: [T] pi(A_t) / b(A_t | history).
      at_stop: [T + 1] the shoulder rests at its upper stop (true servo state): pushed up, it stays there.
      position: [T + 1] rad, the shoulder's reported position (for the figure).
    """

    states: np.ndarray
    current: np.ndarray
    command: np.ndarray
    rho: np.ndarray
    at_stop: np.ndarray
    position: np.ndarray


def arm_config():
    """The arm of config/arm.yaml (the servo emulator's)."""
    from gamma_net_core.config import load_config
    from gamma_net_core.paths import config_file
    from gamma_net_core.signals.arm import ArmConfig

    return load_config(ArmConfig, config_file("arm"), "/**", "arm")


def simulate(behaviour: Behaviour, steps: int, rng: np.random.Generator, arm=None) -> Recording:
    """``steps`` transitions of the arm driven by ``behaviour``, from rest at mid-range.

    Args:
      rng: the behaviour's choices (the arm itself is deterministic).
      arm: its :class:`~gamma_net_core.signals.arm.ArmConfig` (default: :func:`arm_config`).
    """
    from gamma_net_core.signals.arm import SimulatedArm

    arm = arm or arm_config()
    low, high = arm.position_min[0], arm.position_max[0]
    simulated = SimulatedArm(arm, position=[0.5 * (low + high), 0.5 * (arm.position_min[1] + arm.position_max[1])])
    every = behaviour.decision_steps
    p = [behaviour.p_up, behaviour.p_hold, 1.0 - behaviour.p_up - behaviour.p_hold]
    choices = rng.choice(3, size=steps // every + 1, p=p)
    velocity_scale = behaviour.speed * 1.1  # the lag never overshoots a command: the range of the velocity input
    position, velocity, current = np.empty(steps + 1), np.empty(steps + 1), np.empty(steps + 1)
    at_stop = np.empty(steps + 1, dtype=bool)
    command, rho = np.empty(steps), np.empty(steps)
    signs = np.array([1.0, 0.0, -1.0])
    for t in range(steps + 1):
        q, v, effort = simulated.measure()
        position[t], velocity[t], current[t] = q[0], v[0], abs(effort[0]) / TORQUE_CONSTANT
        at_stop[t] = simulated.servo.position[0] >= high and simulated.servo.velocity[0] == 0.0
        if t == steps:
            break
        choice = choices[t // every]
        command[t] = signs[choice] * behaviour.speed
        # Per-decision importance sampling with the behaviour's history: b(up) is p_up where up is drawn, 1 where
        # an up drawn before goes on.
        rho[t] = 0.0 if choice != UP else (1.0 / behaviour.p_up if t % every == 0 else 1.0)
        simulated.command_velocity([command[t], 0.0])
        simulated.step(1.0 / behaviour.rate_hz)
    states = np.column_stack(
        [np.clip((position - low) / (high - low), 0.0, 1.0), np.clip(0.5 + 0.5 * velocity / velocity_scale, 0.0, 1.0)]
    )
    return Recording(states, current, command, rho, at_stop, position)


def target_returns(recording: Recording, gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Monte-Carlo returns of "shoulder up" from the steps where the behaviour followed it to the stop.

    G_t = C_{t+1} + gamma G_{t+1} backwards from the step where the shoulder rests at its upper stop (G = 0
    there: pushed up it stays at rest, drawing no current), along a stretch of up commands. Steps whose
    stretch turns away before the stop have no complete return and are left out, as are steps already at rest
    at the stop.

    Returns:
      (steps [N] of the counted returns, returns [N, G]).
    """
    T = recording.command.shape[0]
    up = recording.command > 0.0
    g = np.zeros(gammas.shape[0])
    complete = False  # the stretch from t + 1 reaches the stop under up commands
    counted, returns = [], []
    for t in range(T - 1, -1, -1):
        if recording.at_stop[t + 1]:
            g, complete = np.zeros_like(g), True
        if not up[t]:
            complete = False
            continue
        g = recording.current[t + 1] + gammas * g
        if complete and not recording.at_stop[t]:
            counted.append(t)
            returns.append(g.copy())
    if not counted:
        return np.zeros(0, dtype=np.int64), np.zeros((0, gammas.shape[0]))
    return np.array(counted[::-1]), np.array(returns[::-1])


def learner_settings():
    """The three answers' shared settings: the library's defaults over (position, velocity), without a bias unit.

    The off-policy kernels have only the paper's scaled bias unit, a weight of f = (1 - gamma) V that every
    gamma shares, so a short timescale's update of it moves a long one's value by up to tau times. TDC's
    correction then chases that one weight across the timescales: with it, plain TDC's error (before h's ridge)
    at tau 90 after 36,000 steps was about 7 (mean |V - G| / mean |G|, seed 0) against 0.9 without; the answers
    all go without it.
    """
    from gamma_net_core.linear import OffPolicyConfig
    from gamma_net_core.timescales import TimescaleSampling

    # the settings its numbers were measured with (docs/off-policy.md): tiles over gamma and tau, Gamma_t drawn
    config = OffPolicyConfig(state_low=(0.0, 0.0), state_high=(1.0, 1.0), bias=False, timescale_input="both")
    return config, TimescaleSampling(n_gamma=4, n_tau=29)


def learn(recording: Recording, seed: int) -> dict:
    """The three answers learnt on ``recording``, each with its own tile offsets and Gamma_t draws."""
    from gamma_net_core.linear import GammaNetConfig, LinearGammaNet, OffPolicyGammaNet
    from gamma_net_core.timescales import TimescaleSampler

    config, sampling = learner_settings()
    plain = {f.name: getattr(config, f.name) for f in dataclasses.fields(GammaNetConfig) if f.init}
    s_t, s_tp1, c = recording.states[:-1], recording.states[1:], recording.current[1:]
    nets = {}
    for i, name in enumerate(ANSWERS):
        rng = np.random.default_rng([seed, i])
        sampler = TimescaleSampler(sampling, np.random.default_rng(rng.integers(2**32)))
        if name == ON:
            net = LinearGammaNet(GammaNetConfig(**plain), rng=rng)
            net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler)
        else:
            method = "gtd" if name == OFF else "td"
            net = OffPolicyGammaNet(dataclasses.replace(config, method=method), rng=rng)
            try:
                net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, rhos=recording.rho,
                                    timescales=sampler)  # fmt: skip
            except FloatingPointError:
                net = None  # diverged: reported, not hidden
        nets[name] = net
    return nets


def errors(predictions: np.ndarray, returns: np.ndarray) -> np.ndarray:
    """[G]: mean |V - G| / mean |G| per timescale."""
    return np.mean(np.abs(predictions - returns), axis=0) / np.maximum(np.mean(np.abs(returns), axis=0), 1e-12)


def run_seed(behaviour: Behaviour, steps: int, seed: int, arm=None) -> dict:
    """One seed: learn on a recording of ``steps``, score on a held-out one of ``steps // 2``."""
    gammas = 1.0 - 1.0 / np.array(PROBE_TAUS)
    train = simulate(behaviour, steps, np.random.default_rng([seed, 0]), arm)
    held_out = simulate(behaviour, max(steps // 2, 1), np.random.default_rng([seed, 1]), arm)
    nets = learn(train, seed)
    counted, returns = target_returns(held_out, gammas)
    result = {"returns": int(counted.shape[0]), "up_fraction": float(np.mean(train.command > 0)),
              "errors": {}}  # fmt: skip
    predictions = {}
    for name, net in nets.items():
        if net is None or counted.size == 0:
            result["errors"][name] = [float("nan")] * gammas.shape[0]
            continue
        predictions[name] = net.predict(held_out.states[counted], gammas)
        result["errors"][name] = errors(predictions[name], returns).tolist()
    result["trace"] = {"recording": held_out, "counted": counted, "returns": returns, "nets": nets}
    return result


def bootstrap_interval(differences: np.ndarray, rng: np.random.Generator, *, n: int = BOOTSTRAP) -> tuple:
    """95 % percentile bootstrap interval of the mean of ``differences`` [seeds, ...] over the seeds."""
    k = differences.shape[0]
    means = differences[rng.integers(0, k, size=(n, k))].mean(axis=1)
    return np.percentile(means, 2.5, axis=0), np.percentile(means, 97.5, axis=0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=5, help="seeds: behaviour, tile offsets and Gamma_t draws")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed + 1, ...")
    parser.add_argument("--steps", type=int, default=36_000, help="training steps per seed (30 Hz: 36,000 = 20 min)")
    parser.add_argument(
        "--p-up",
        type=float,
        default=Behaviour.p_up,
        help="the behaviour's chance of moving up at a decision point (holding and moving down share the rest)",
    )
    parser.add_argument("--out", required=True, help="folder for off_policy_arm.json and the figure")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> Report:
    from tqdm import tqdm

    from gamma_net_core.cli import check, check_range, output_dir

    check_range("--seeds", args.seeds, low=2)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--steps", args.steps, low=1000)
    check_range("--p-up", args.p_up, low=0.01, high=1.0)
    out = output_dir("--out", args.out)
    check(not (out / FIGURE_NAME).is_dir(), f"{out / FIGURE_NAME} is a folder; choose another --out")
    behaviour = Behaviour(p_up=args.p_up, p_hold=(1.0 - args.p_up) / 2.0)
    arm = arm_config()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    results = []
    for seed in tqdm(seeds, desc="seeds", unit="seed", file=sys.stderr, disable=args.no_progress):
        results.append(run_seed(behaviour, args.steps, seed, arm))
        if results[-1]["returns"] == 0:
            raise ValueError(
                f"seed {seed}: no stretch of the held-out recording followed 'up' to the stop, so there is no "
                "return to score against; give more --steps or a larger --p-up"
            )
    out.mkdir(parents=True, exist_ok=True)
    data = summarize(results, seeds, behaviour, args.steps)
    figure = plot(out / FIGURE_NAME, results[0], data)
    (out / JSON_NAME).write_text(json.dumps(data, indent=1))
    return _report(data, [figure, out / JSON_NAME])


def summarize(results: list[dict], seeds: list[int], behaviour: Behaviour, steps: int) -> dict:
    """Per answer and probe tau: errors per seed, mean, spread; each off-policy answer's paired difference from
    the on-policy answer, with its 95 % bootstrap interval over the seeds."""
    errors_by = {name: np.array([r["errors"][name] for r in results]) for name in ANSWERS}  # [seeds, G]
    differences = {}
    for name in (OFF, NAIVE):
        difference = errors_by[name] - errors_by[ON]
        low, high = bootstrap_interval(difference, np.random.default_rng(seeds[0]))
        differences[name] = {
            "mean": difference.mean(axis=0).tolist(),
            "low": np.asarray(low).tolist(),
            "high": np.asarray(high).tolist(),
            "seeds_closer": np.sum(difference < 0.0, axis=0).tolist(),
        }
    return {
        "behaviour": dataclasses.asdict(behaviour),
        "steps": steps,
        "seeds": seeds,
        "probe_taus": list(PROBE_TAUS),
        "question_tau": QUESTION_TAU,
        "returns_counted": [r["returns"] for r in results],
        "up_fraction": [round(r["up_fraction"], 4) for r in results],
        "errors": {name: e.tolist() for name, e in errors_by.items()},
        "mean": {name: np.mean(e, axis=0).tolist() for name, e in errors_by.items()},
        "std": {name: np.std(e, axis=0).tolist() for name, e in errors_by.items()},
        "difference": differences,
    }


def _closer(d: dict, k: int, n_seeds: int) -> str:
    if not np.isfinite(d["mean"][k]):
        return "diverged"
    verdict = "yes" if d["high"][k] < 0.0 else ("no" if d["low"][k] > 0.0 else "not resolved")
    return f"{verdict} ({d['seeds_closer'][k]}/{n_seeds} seeds)"


def _report(data: dict, files: list[pathlib.Path]) -> Report:
    taus = data["probe_taus"]
    seeds = data["seeds"]
    labels = [f"{tau:g}" + (" (3 s)" if tau == data["question_tau"] else "") for tau in taus]
    table = Table(
        f"error against the target's Monte-Carlo returns, mean |V - G| / mean |G| (mean ± std over seeds "
        f"{seeds[0]}..{seeds[-1]}, {data['steps']:,} steps each)",
        ["τ (steps)", *ANSWERS],
    )
    for k, label in enumerate(labels):
        cells = [
            "diverged" if not np.isfinite(data["mean"][name][k]) else
            f"{data['mean'][name][k]:.3f} ± {data['std'][name][k]:.3f}"
            for name in ANSWERS
        ]  # fmt: skip
        table.add(label, *cells)
    columns = ["τ (steps)"]
    for name in (OFF, NAIVE):
        columns += [f"{name} − on-policy (95 % CI)", "closer"]
    differences = Table("off-policy minus on-policy error, paired by seed (below 0: the off-policy answer is closer)",
                        columns)  # fmt: skip
    for k, label in enumerate(labels):
        cells = []
        for name in (OFF, NAIVE):
            d = data["difference"][name]
            cells += [f"{d['mean'][k]:+.3f} [{d['low'][k]:+.3f}, {d['high'][k]:+.3f}]", _closer(d, k, len(seeds))]
        differences.add(label, *cells)
    k = taus.index(data["question_tau"])
    d = data["difference"][OFF]
    summary = (
        f"at τ {data['question_tau']:g} (3 s): error {data['mean'][OFF][k]:.3f} off-policy (TDRC), "
        f"{data['mean'][NAIVE][k]:.3f} off-policy TD(0), {data['mean'][ON][k]:.3f} on-policy; TDRC − on-policy "
        f"{d['mean'][k]:+.3f} [{d['low'][k]:+.3f}, {d['high'][k]:+.3f}]: "
        + ("off-policy closer" if d["high"][k] < 0.0 else "off-policy not shown closer")
    )
    counts = Table("held-out returns counted per seed", ["seed", "returns", "up fraction (training)"])
    for seed, n, up in zip(seeds, data["returns_counted"], data["up_fraction"]):
        counts.add(seed, n, up)
    return Report(tables=[table, differences, counts], data=data, files=[str(f) for f in files], summary=summary)


def plot(path: pathlib.Path, first: dict, data: dict, *, window_s: float = 20.0) -> pathlib.Path:
    """Left: the answers and the Monte-Carlo return at the question's tau over the held-out stretch richest in
    returns (first seed); right: error against tau, mean over seeds with min-max."""
    from gamma_net_core.plots import compact_png, pyplot

    plt = pyplot()
    trace = first["trace"]
    recording, counted, returns = trace["recording"], trace["counted"], trace["returns"]
    rate = data["behaviour"]["rate_hz"]
    k = data["probe_taus"].index(data["question_tau"])
    gamma = 1.0 - 1.0 / data["question_tau"]
    width = int(window_s * rate)
    T = recording.command.shape[0]
    start = 0
    if counted.size:
        hits = np.bincount(np.minimum(counted // max(width // 4, 1), T), minlength=T // max(width // 4, 1) + 1)
        window_hits = np.convolve(hits, np.ones(4, dtype=int), mode="valid")
        start = int(np.argmax(window_hits)) * max(width // 4, 1)
    stop = min(start + width, T)
    steps = np.arange(start, stop)
    t = steps / rate
    fig, (ax_v, ax_e) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1.7, 1.0]})
    for i, (name, net) in enumerate(trace["nets"].items()):
        if net is None:
            continue
        values = net.predict(recording.states[steps], np.array([gamma]))[:, 0]
        ax_v.plot(t, values / data["question_tau"], color=f"C{i}", lw=1.2, label=name)
    shown = (counted >= start) & (counted < stop)
    ax_v.plot(counted[shown] / rate, returns[shown, k] / data["question_tau"], "k.", ms=3,
              label="Monte-Carlo return of 'up' (where followed to the stop)")  # fmt: skip
    top = ax_v.get_ylim()[1]
    ax_v.fill_between(t, 0, top, where=recording.command[steps] > 0, color="0.9", step="post", zorder=0,
                      label="behaviour commands up")  # fmt: skip
    ax_v.set_ylim(0, top)
    ax_v.set_xlabel("time (s), held-out recording, first seed")
    ax_v.set_ylabel(f"(1 − γ) V at τ {data['question_tau']:g} (A)")
    ax_v.set_title("mean current over the next 3 s if the shoulder moves up", fontsize=10)
    ax_v.legend(fontsize=7, loc="upper left")
    taus = np.array(data["probe_taus"])
    for i, name in enumerate(ANSWERS):
        e = np.array(data["errors"][name])
        if not np.all(np.isfinite(e)):
            continue
        ax_e.plot(taus, e.mean(axis=0), "o-", color=f"C{i}", ms=3, label=name)
        ax_e.fill_between(taus, e.min(axis=0), e.max(axis=0), color=f"C{i}", alpha=0.15, lw=0)
    ax_e.axvline(data["question_tau"], color="0.6", ls="--", lw=0.8)
    ax_e.set_xscale("log")
    ax_e.set_xlabel("τ (steps at 30 Hz)")
    ax_e.set_ylabel("mean |V − G| / mean |G|")
    ax_e.set_title(f"error vs τ, {len(data['seeds'])} seeds (min-max shaded)", fontsize=10)
    ax_e.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return compact_png(path)
