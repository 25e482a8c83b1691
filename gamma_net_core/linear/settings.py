"""Settings of the linear Γ-nets: frozen dataclasses shared by the YAML files and the nodes' parameters.

:class:`LinearTDConfig` holds what the Γ-net and its fixed-timescale baseline share (tile coding,
step size, loss scaling); :class:`GammaNetConfig` adds how the timescale enters as input and
:class:`FixedTimescaleConfig` the baseline's one gamma.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gamma_net_core import config as config_lib
from gamma_net_core.config import setting
from gamma_net_core.timescales import validate_gammas

#: numba code of each timescale input: how many input dimensions it adds and which.
TIMESCALE_INPUTS = {"none": 0, "gamma": 1, "tau": 2, "both": 3}
N_TIMESCALE_DIMS = {"none": 0, "gamma": 1, "tau": 1, "both": 2}


@dataclass(frozen=True)
class LinearTDConfig:
    """Settings shared by the linear Γ-net and its fixed-timescale baseline.

    Defaults are the paper's robot arm ("Predictions on a Robot Arm"): two normalized joint
    positions, 100 tilings of width 1.0 hashed into 2048 features plus a bias unit,
    alpha = 0.1 / active features, loss scaling on, TD(0) (lam 0).
    """

    state_low: tuple[float, ...] = setting(
        (0.0, 0.0), "lower end of each state input's range; inputs are normalized to [0, 1] and clipped"
    )
    state_high: tuple[float, ...] = setting((1.0, 1.0), "upper end of each state input's range")
    tilings: tuple[int, ...] = setting(
        (100,), "tilings per group; paper: arm 100; square wave 20, 20, 30", low=1, high=100_000
    )
    tile_widths: tuple[float, ...] = setting(
        (1.0,),
        "tile width of each group, in normalized input units; paper: arm 1.0; square wave 1.0, 0.5, 0.1",
        low=1e-6,
        high=1e6,
    )
    memory_size: int = setting(
        2048,
        "features the tiles are hashed into; 0: one feature per tile, no hashing; paper: arm 2048",
        low=0,
        high=2**32 - 1,
    )
    bias: bool = setting(True, "add a bias unit active on every input; paper: arm yes (2048 + 1 features)")
    step_size: float = setting(
        0.1,
        "alpha before it is divided by the active features per (state, gamma); paper: arm 0.1",
        low=0.0,
        high=1e3,
    )
    step_size_decay_steps: int = setting(
        0,
        "decay alpha linearly to zero over this many updates; 0: constant; paper: arm the recording's length",
        low=0,
        high=2**62,
    )
    loss_scaling: bool = setting(
        True,
        "learn f = (1 - gamma) V, the value of the cumulant scaled by (1 - gamma), and predict V = f / (1 - gamma) "
        "(section 'Generalizing over Timescale', Eq. scaled_v); predictions stay in the cumulant's units; paper: on",
    )
    lam: float = setting(
        0.0,
        "lambda of TD(lambda): how far back a TD error reaches, through traces decaying by gamma * lambda per step; "
        "0: TD(0), the paper's Algorithm 1; above 0 traces on the sampling's fixed ladder at alpha (1 - lambda), "
        "beside TD(0) on a draw (about twice lambda 0's step); with a decayed alpha the traces fade out over its "
        "first half (linear/traces.py); a Γ-net with lambda_horizon > 0 learns lambda-returns on the draws instead",
        low=0.0,
        high=0.999,
    )

    def __post_init__(self) -> None:
        config_lib.validate(self)
        if len(self.state_low) != len(self.state_high):
            raise ValueError(f"state_low {self.state_low} and state_high {self.state_high} must have equal length")
        for d, (lo, hi) in enumerate(zip(self.state_low, self.state_high)):
            if not lo < hi:
                raise ValueError(f"state input {d}: state_low {lo!r} must be below state_high {hi!r}")
        if len(self.tilings) != len(self.tile_widths):
            raise ValueError(f"tilings {self.tilings} and tile_widths {self.tile_widths} must have equal length")

    @property
    def n_state(self) -> int:
        return len(self.state_low)


@dataclass(frozen=True)
class GammaNetConfig(LinearTDConfig):
    """A linear Γ-net: the shared settings plus how the timescale enters as input."""

    timescale_input: str = setting(
        "both",
        "timescale inputs tile-coded with the state: gamma, tau / tau_scale, or both; paper: both",
        choices=("gamma", "tau", "both"),
    )
    tau_scale: float = setting(
        100.0,
        "the tau input is tau / tau_scale, clipped to [0, 1]; paper: the largest trained tau, 100",
        low=1.0,
        high=1e12,
    )
    lambda_horizon: int = setting(
        0,
        "with lam > 0: 0, TD(lambda) by traces on the sampling's fixed ladder beside a draw (linear/traces.py); "
        "H >= 1, each update moves the state H - 1 steps back towards the lambda-return of each drawn gamma, "
        "truncated after H transitions (the forward view, no ladder; predictions lag H - 1 steps; "
        "linear/lambda_return.py); lambda 0.9: 44, lambda 0.5: 7",
        low=0,
        high=10_000,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lambda_horizon > 0 and self.lam == 0.0:
            raise ValueError(f"lambda_horizon {self.lambda_horizon} needs lam > 0 (with lam 0 every update is TD(0))")


def uses_ladder(config: LinearTDConfig) -> bool:
    """Whether Gamma_t must be the sampling's fixed ladder then a draw (``TimescaleSampler(..., fixed=True)``):
    TD(lambda) by traces, not by lambda-returns."""
    return config.lam > 0.0 and not getattr(config, "lambda_horizon", 0)


@dataclass(frozen=True)
class FixedTimescaleConfig(LinearTDConfig):
    """The fixed-timescale baseline: the shared settings and its one discount."""

    gamma: float = setting(0.9, "the discount this baseline learns, in [0, 1)", low=0.0, high=1.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        validate_gammas(self.gamma, name="gamma")


def fixed_timescale_config(learner: LinearTDConfig, gamma: float) -> FixedTimescaleConfig:
    """The fixed-timescale baseline of ``learner``: the same shared settings, no timescale input, one gamma."""
    shared = {f.name: getattr(learner, f.name) for f in dataclasses.fields(LinearTDConfig)}
    return FixedTimescaleConfig(**shared, gamma=float(gamma))
