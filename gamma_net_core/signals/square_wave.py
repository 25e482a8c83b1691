"""The square wave of the paper's first experiment (section "Square-wave"): period 100, amplitude ±1.

The state is the wave's phase, p_t = t mod period (an integer in [0, period)). The
cumulant of the transition out of phase p is the wave's value at the next phase, so
C_{t+1} is the signal observed at t + 1 and the return at gamma = 0 is the next value.
Being periodic, the signal's exact return from every phase has a closed form
(:func:`gamma_net_core.returns.periodic_returns`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gamma_net_core.returns import periodic_returns


@dataclass(frozen=True)
class SquareWave:
    """A square wave: ``+amplitude`` for the first half of each period, ``-amplitude`` for the second.

    Args:
      period: steps per period (even); paper: 100.
      amplitude: the wave's magnitude; paper: 1.
    """

    period: int = 100
    amplitude: float = 1.0

    def __post_init__(self) -> None:
        if self.period < 2 or self.period % 2:
            raise ValueError(f"period must be an even number of steps >= 2; got {self.period!r}")
        if not (np.isfinite(self.amplitude) and self.amplitude > 0):
            raise ValueError(f"amplitude must be finite and > 0; got {self.amplitude!r}")

    def values(self) -> np.ndarray:
        """The wave at each phase: float64 [period]."""
        half = self.period // 2
        return np.where(np.arange(self.period) < half, self.amplitude, -self.amplitude).astype(np.float64)

    def cumulants_by_phase(self) -> np.ndarray:
        """C_{t+1} for a step taken from each phase: the value at the next phase, [period]."""
        return np.roll(self.values(), -1)

    def phases(self, steps: int, *, start: int = 0) -> np.ndarray:
        """Phases of S_start .. S_{start + steps - 1}: int64 [steps]."""
        return (start + np.arange(steps, dtype=np.int64)) % self.period

    def transitions(self, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``steps`` transitions from phase 0: (phases of S_t [T], cumulants C_{t+1} [T], phases of S_{t+1} [T])."""
        phases = self.phases(steps + 1)
        return phases[:-1], self.cumulants_by_phase()[phases[:-1]], phases[1:]

    def returns(self, gammas) -> np.ndarray:
        """The exact return from each phase at each gamma: [period, G], in the wave's units."""
        return periodic_returns(self.cumulants_by_phase(), gammas)
