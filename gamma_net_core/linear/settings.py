"""Settings of the linear Γ-nets: frozen dataclasses shared by the YAML files and the nodes' parameters.

:class:`LinearTDConfig` holds what the Γ-net and its fixed-timescale baseline share (tile coding,
step size, loss scaling); :class:`GammaNetConfig` adds how the timescale enters as input and
:class:`FixedTimescaleConfig` the baseline's one gamma.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from gamma_net_core import config as config_lib
from gamma_net_core.config import setting
from gamma_net_core.tile_counts import unhashed_features
from gamma_net_core.timescales import validate_gammas

#: numba code of each timescale input: how many input dimensions it adds and which.
TIMESCALE_INPUTS = {"none": 0, "gamma": 1, "tau": 2, "both": 3, "knots": 4}
#: knots add no input dimension: the timescale picks a copy of the state's tiles (linear/knots.py)
N_TIMESCALE_DIMS = {"none": 0, "gamma": 1, "tau": 1, "both": 2, "knots": 0}


@dataclass(frozen=True)
class LinearTDConfig:
    """Settings shared by the linear Γ-net and its fixed-timescale baseline.

    The defaults are chosen on problems with exact values (the zoo, docs/choosing-settings.md): 8 tilings of
    1/16 of each input's range (wider with more than three inputs: :func:`default_tile_width`), one weight
    per tile in at most 65,536 features (``hashing``), plus a bias unit that is a constant of V
    (``bias_unit``), loss scaling on, alpha 0.05 for a Γ-net and 0.1 for a fixed-timescale learner, TD(0)
    (lam 0). The paper's robot arm ("Predictions on a Robot Arm") had 100 tilings of width 1.0 hashed into
    2048, whose tiles are as wide as each input's range: one tile covers most states and most timescales at
    once. The paper's studies spell out the arm's values
    (config/arm.yaml).
    """

    state_low: tuple[float, ...] = setting(
        (0.0, 0.0), "lower end of each state input's range; inputs are normalized to [0, 1] and clipped"
    )
    state_high: tuple[float, ...] = setting((1.0, 1.0), "upper end of each state input's range")
    tilings: tuple[int, ...] = setting(
        (8,), "tilings per group; paper: arm 100; square wave 20, 20, 30", low=1, high=100_000
    )
    tile_widths: tuple[float, ...] = setting(
        (0.0,),
        "tile width of each group, in normalized input units; 0: the default, 1/16 of each input's range (state and "
        "timescale alike), widened where a tiling's tiles would not fit its share of memory_size (more than three "
        "inputs: default_tile_width); paper: arm 1.0; square wave 1.0, 0.5, 0.1",
        low=0.0,
        high=1e6,
    )
    memory_size: int = setting(
        65536,
        "the most features the tiles take: with hashing when_needed, one per tile where they fit, else the tiles "
        "are hashed into this many; 0: one feature per tile, however many (17^inputs tiles a tiling at width "
        "1/16); paper: arm 2048",
        low=0,
        high=2**32 - 1,
    )
    hashing: str = setting(
        "when_needed",
        "when the tiles are hashed into memory_size features: when_needed, only when one feature per tile would "
        "need more than memory_size (the default tiles always fit: no two tiles share a weight); always, whenever "
        "memory_size > 0. With loss scaling a weight that a short and a long timescale share moves the long one's "
        "value by up to tau times the short one's error (docs/choosing-settings.md); paper: arm always",
        choices=("when_needed", "always"),
    )
    bias: bool = setting(True, "add a bias unit active on every input; paper: arm yes (2048 + 1 features)")
    bias_unit: str = setting(
        "value",
        "what the bias unit's weight is a constant of, with loss scaling: value, V at every timescale (its feature "
        "value is 1 - gamma in f = (1 - gamma) V); scaled, f (feature value 1: it adds w / (1 - gamma) to V, so a "
        "short timescale's update of it moves a long timescale's value by up to tau times; paper: scaled). "
        "Without loss scaling the two are the same",
        choices=("value", "scaled"),
    )
    step_size: float = setting(
        0.1,
        "alpha before it is divided by the active features per (state, gamma); every gamma of Gamma_t adds an update "
        "of this size to the tiles it shares with the others: 0.1 suits tiles of 1/16 (a timescale's tiles are "
        "mostly its own), about 0.003 tiles of width 1.0, which all 32 timescales of Gamma_t share "
        "(docs/choosing-settings.md); paper: arm 0.1",
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
        "lambda of TD(lambda): how far a TD error reaches, decaying by gamma * lambda per step; 0: TD(0), the "
        "paper's Algorithm 1; above 0 a Γ-net learns as its lambda_view says (default: each drawn gamma's "
        "truncated lambda-return, linear/lambda_return.py), the fixed-timescale baseline by traces at "
        "alpha (1 - lambda) (linear/traces.py); with a decayed alpha lambda fades to 0 over its first half",
        low=0.0,
        high=0.999,
    )

    def __post_init__(self) -> None:
        if any(w == 0.0 for w in self.tile_widths):
            width = default_tile_width(
                len(self.state_low) + self._timescale_dims(), sum(self.tilings) * self.copies, self.memory_size
            )
            widths = self.tile_widths * len(self.tilings) if len(self.tile_widths) == 1 else self.tile_widths
            object.__setattr__(self, "tile_widths", tuple(width if w == 0.0 else float(w) for w in widths))
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

    @property
    def copies(self) -> int:
        """Copies of the state's tiles the coder keeps: one per knot with ``timescale_input`` knots, else 1."""
        return 1

    def _timescale_dims(self) -> int:
        return 0


#: The default tile width where a tiling's tiles fit in its share of the features: 1/16 of each input's range.
FINEST_TILE_WIDTH = 1.0 / 16.0


def default_tile_width(n_inputs: int, tilings: int, memory_size: int) -> float:
    """The tile width ``tile_widths`` 0 stands for: :data:`FINEST_TILE_WIDTH`, or the finest 1 / k whose
    (k + 1)^n_inputs tiles a tiling fit in ``memory_size / tilings`` features (hashed, more tiles than
    features share them at random). With the default 8 tilings into 65,536, up to three inputs (one state
    input and the two timescale inputs) get 1/16, four 1/8, five 1/5 and six 1/3.

    Measured on the zoo's CartPole (four state inputs and two timescale inputs; docs/choosing-settings.md): at
    1/16 the tiles are too fine to generalize between the states a policy visits (worst error over tau 0.71,
    and 0.88 for the fixed-gamma baseline), at 0.29 the worst error was 0.17.
    """
    if memory_size == 0 or n_inputs == 0:
        return FINEST_TILE_WIDTH
    k = math.floor((memory_size / tilings) ** (1.0 / n_inputs) + 1e-9) - 1
    return max(FINEST_TILE_WIDTH, 1.0 / max(k, 1))


def coder_memory_size(config: LinearTDConfig, n_dims: int, widths) -> int:
    """The coder's ``memory_size``: 0 (one feature per tile, no collisions) where ``hashing`` is ``when_needed``
    and the tiles of ``n_dims`` inputs at ``widths`` (times the knots' copies) fit in ``config.memory_size``; else
    ``config.memory_size``."""
    tiles = unhashed_features(n_dims, config.tilings, widths) * config.copies
    if config.hashing == "when_needed" and tiles <= config.memory_size:
        return 0
    return config.memory_size


@dataclass(frozen=True)
class GammaNetConfig(LinearTDConfig):
    """A linear Γ-net: the shared settings plus how the timescale enters as input."""

    step_size: float = setting(
        0.0,
        "alpha before it is divided by the active features per (state, gamma); 0: the default, with knots 0.1 "
        "(each knot learns as a fixed-gamma TD(0) learner at its alpha; the forward view of TD(lambda) scales it "
        "per gamma, lambda_step_power), with tiles over the timescale 0.05, times sqrt(1 - lambda) in the "
        "forward view. Every gamma of Gamma_t adds an update of this size to the tiles it shares with the "
        "others: 0.05 suits tiles of 1/16 shared by every timescale, about 0.003 tiles of width 1.0, which all "
        "32 timescales of the arm's Gamma_t share (docs/choosing-settings.md). A step size given is used as "
        "given; paper: arm 0.1",
        low=0.0,
        high=1e3,
    )
    bias: bool = setting(
        False,
        "add a bias unit active on every input; knots need none (a knot's tiles hold its constant, and one bias "
        "shared by every knot carries each knot's error into the others); paper: arm yes (2048 + 1 features)",
    )
    timescale_input: str = setting(
        "knots",
        "how the timescale enters: tile-coded with the state as gamma, tau / tau_scale, or both (paper: both); or "
        "knots, a copy of the state's tiles per knot, linear in tau between knots (linear/knots.py)",
        choices=("gamma", "tau", "both", "knots"),
    )
    knots: int = setting(
        16,
        "with timescale_input knots: the knots, tau from 1 to tau_scale evenly on a log scale; Gamma_t is every "
        "knot each step (TimescaleSampling(knots=...)); linear in tau between knots, tau_scale beyond",
        low=2,
        high=1024,
    )
    timescale_tile_width: float = setting(
        0.0,
        "tile width of the timescale inputs (gamma, tau / tau_scale, each in [0, 1]) in the first group, the other "
        "groups' in proportion; 0: the same as the state inputs' (tile_widths); a tile narrow in timescale keeps "
        "one timescale's error from the others (docs/choosing-settings.md); paper: the same",
        low=0.0,
        high=1e6,
    )
    tau_scale: float = setting(
        100.0,
        "the tau input is tau / tau_scale, clipped to [0, 1]; paper: the largest trained tau, 100",
        low=1.0,
        high=1e12,
    )
    lambda_view: str = setting(
        "forward",
        "how a Γ-net learns TD(lambda) (lam > 0): forward, each transition moves towards the lambda-return of "
        "every gamma of its own Gamma_t once that return is complete, truncated after lambda_horizon transitions "
        "(truncated TD(lambda), Sutton & Barto 2018 12.3; no ladder; predictions lag until then; "
        "linear/lambda_return.py); backward, traces on the sampling's fixed ladder at alpha (1 - lambda) beside "
        "TD(0) on a draw (linear/traces.py; the only view a Horde has)",
        choices=("forward", "backward"),
    )
    lambda_horizon: int = setting(
        0,
        "the forward view's truncation: transitions a lambda-return looks ahead; 0: the smallest H with "
        "lambda^H <= 0.01 (lambda 0.5: 7, 0.9: 44)",
        low=0,
        high=10_000,
    )
    lambda_step_power: float = setting(
        -1.0,
        "the forward view's alpha at gamma is step_size (1 - gamma lambda)^this: a lambda-return reaches about "
        "1 / (1 - gamma lambda) steps and is that much noisier, and at gamma 0 it is the one-step target, so "
        "the step is TD(0)'s there; 0: one alpha for every gamma; -1: the default, 0.75 with knots (chosen on the "
        "zoo, docs/choosing-settings.md), else 0",
        low=-1.0,
        high=4.0,
    )

    def __post_init__(self) -> None:
        if self.step_size == 0.0:
            object.__setattr__(self, "step_size", default_step_size(self.lam, self.lambda_view, self.timescale_input))
        if self.lambda_step_power == -1.0:
            power = DEFAULT_LAMBDA_STEP_POWER if self.timescale_input == "knots" else 0.0
            object.__setattr__(self, "lambda_step_power", power)
        elif self.lambda_step_power < 0.0:
            raise ValueError(
                f"lambda_step_power must be -1 (the default) or at least 0; got {self.lambda_step_power!r}"
            )
        super().__post_init__()
        if self.timescale_input == "knots" and not self.tau_scale > 1.0:
            raise ValueError(
                f"timescale_input 'knots' spaces its knots from tau 1 to tau_scale: tau_scale must be above 1; got "
                f"{self.tau_scale!r}"
            )
        if self.lambda_horizon > 0 and (self.lam == 0.0 or self.lambda_view != "forward"):
            raise ValueError(
                f"lambda_horizon {self.lambda_horizon} is the forward view's truncation: it needs lam > 0 and "
                f"lambda_view 'forward'; got lam {self.lam!r}, lambda_view {self.lambda_view!r}"
            )

    @property
    def copies(self) -> int:
        return self.knots if self.timescale_input == "knots" else 1

    def _timescale_dims(self) -> int:
        return N_TIMESCALE_DIMS.get(self.timescale_input, 0)  # an unknown one is refused by the validation


#: A Γ-net's alpha in TD(0) (``step_size`` 0), for the default tiles of 1/16: measured on the zoo against 0.1 and
#: 0.03 (docs/choosing-settings.md). (With tiles of width 1.0 every timescale of Gamma_t updates the same tiles,
#: and the arm's 0.1 spread over its 32 timescales, 0.003, fits.)
DEFAULT_STEP_SIZE = 0.05


#: A knotted Γ-net's alpha in TD(0): each knot learns as the fixed-timescale baseline does, at its alpha.
DEFAULT_KNOTS_STEP_SIZE = 0.1


#: A knotted Γ-net's forward view steps at alpha (1 - gamma lambda)^this (``lambda_step_power``). Chosen on the zoo
#: (14 problems, 5 seeds; docs/choosing-settings.md): lambda 0.9 at 0.75 was no slower than TD(0) over the learning
#: curve at tau >= 30 on 12 problems and within 1.5x at the end on 14, at one alpha for every gamma (0.1 sqrt(1 -
#: lambda)) on 11 and 8; at 0.5 on 11 and 8, at 1 on 3 and 10.
DEFAULT_LAMBDA_STEP_POWER = 0.75


def default_step_size(lam: float, lambda_view: str = "forward", timescale_input: str = "both") -> float:
    """A Γ-net's alpha when its ``step_size`` is left at 0.

    With knots, :data:`DEFAULT_KNOTS_STEP_SIZE` in every view: the forward view scales it per gamma instead
    (``lambda_step_power``), so at gamma 0 TD(lambda) is TD(0), and the backward view's traces take alpha
    (1 - lambda) beside TD(0) at alpha. Tiles over the timescale: :data:`DEFAULT_STEP_SIZE`, times sqrt(1 - lambda)
    in the forward view, measured on the zoo with that coder (13 problems, three seeds): lambda 0.9 against TD(0)
    over the learning curve at tau >= 30 at 0.05 (1 - lambda) was slower on 12 problems, at 0.05 sqrt(1 - lambda)
    no slower on 10, at TD(0)'s 0.05 no slower on 8 and up to 2.7x worse on the others.
    """
    if timescale_input == "knots":
        return DEFAULT_KNOTS_STEP_SIZE
    if lam > 0.0 and lambda_view == "forward":
        return DEFAULT_STEP_SIZE * math.sqrt(1.0 - lam)
    return DEFAULT_STEP_SIZE


def lambda_horizon(config: LinearTDConfig) -> int:
    """H of the forward view's truncated lambda-returns (:mod:`gamma_net_core.linear.lambda_return`), or 0 when
    the learner learns no lambda-returns (lam 0, or by traces: a Γ-net's backward view, the fixed-timescale
    baseline)."""
    if config.lam == 0.0 or getattr(config, "lambda_view", "backward") != "forward":
        return 0
    return config.lambda_horizon or default_horizon(config.lam)


def default_horizon(lam: float) -> int:
    """The smallest H with lambda^H <= 0.01: the steps beyond H weigh at most 1 % of the lambda-return."""
    return 1 if lam <= 0.0 else max(1, math.ceil(math.log(0.01) / math.log(lam)))


def uses_ladder(config: LinearTDConfig) -> bool:
    """Whether Gamma_t must be the sampling's fixed ladder then a draw (``TimescaleSampler(..., fixed=True)``):
    a Γ-net's TD(lambda) in the backward view."""
    return config.lam > 0.0 and getattr(config, "lambda_view", None) == "backward"


#: Settings whose default changed, with the value a configuration saved before the change learned with.
_BEFORE_DEFAULTS = {"bias_unit": "scaled", "hashing": "always"}
#: The same for a Γ-net's own settings (before knots were the default it was tiles over gamma and tau, with a bias).
_GAMMA_NET_BEFORE_DEFAULTS = {"timescale_input": "both", "bias": True, "lambda_step_power": 0.0}


def saved_learner_mapping(mapping: dict, *, gamma_net: bool = True) -> dict:
    """A saved linear learner's configuration (a :class:`LinearTDConfig`'s) as it was meant.

    A setting missing from it takes the value it had when it was saved: one saved before ``lambda_view``
    existed learned TD(lambda) by traces, so with lam > 0 its view is the backward one; one saved before
    ``bias_unit`` existed had the bias of the scaled output, one saved before ``hashing`` hashed whenever
    ``memory_size`` > 0, and a Γ-net saved before knots were its default had tiles over gamma and tau and a
    bias. Any other missing setting takes its default.
    ``gamma_net``: a :class:`GammaNetConfig`'s (else the fixed-timescale baseline's, which has no view).
    """
    before = {**_BEFORE_DEFAULTS, **(_GAMMA_NET_BEFORE_DEFAULTS if gamma_net else {})}
    out = {**{k: v for k, v in before.items() if k not in mapping}, **mapping}
    if gamma_net and "lambda_view" not in mapping and float(mapping.get("lam", 0.0)) > 0.0:
        out["lambda_view"] = "backward"
    return out


@dataclass(frozen=True)
class FixedTimescaleConfig(LinearTDConfig):
    """The fixed-timescale baseline: the shared settings and its one discount."""

    step_size: float = setting(
        0.1,
        "alpha before it is divided by the active features; paper: arm 0.1",
        low=0.0,
        high=1e3,
    )
    gamma: float = setting(0.9, "the discount this baseline learns, in [0, 1)", low=0.0, high=1.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        validate_gammas(self.gamma, name="gamma")


def fixed_timescale_config(learner: LinearTDConfig, gamma: float) -> FixedTimescaleConfig:
    """The fixed-timescale baseline of ``learner``: the same shared settings, no timescale input, one gamma."""
    shared = {f.name: getattr(learner, f.name) for f in dataclasses.fields(LinearTDConfig)}
    return FixedTimescaleConfig(**shared, gamma=float(gamma))


#: kappa of h's ridge (:attr:`~gamma_net_core.linear.OffPolicyConfig.secondary_regularization`): on the ring at
#: gamma 0.85 (5 seeds of 20,000 steps, tools/off_policy_mdps.py) TDC's error was 2.0-2.1x on-policy TD(0)'s and
#: this one's 1.0x, off-policy TD's own; Baird's star still converges (docs/off-policy.md).
DEFAULT_SECONDARY_REGULARIZATION = 1.0


def check_ridge(beta: float, kappa: float, label: str) -> None:
    """Refuse a ridge that would take h past 0 in one step (beta kappa > 1), naming ``label``'s keys."""
    if beta * kappa > 1.0:
        raise ValueError(
            f"{label}secondary_step_size x secondary_regularization must be at most 1 (the ridge would take "
            f"h past 0 in one step); got {beta!r} x {kappa!r}"
        )
