"""Prediction problems whose true values are known: the protocol, the Markov chains, the registry.

A problem is a stream of transitions (observation of S_t, cumulant C_{t+1}, observation of
S_{t+1}, whether S_{t+1} is terminal) and the true value v(s, gamma) = E[sum_k gamma^k C_{t+k+1} | S_t = s]
of a set of evaluation states at any gamma, with the weight of each state under the stream's own
(on-policy) state distribution. On a finite chain the values are exact: v = (I - gamma P)^-1 r, with P
the transition matrix among non-terminal states and r the expected next cumulant of each state. A
problem whose values have no closed form (:mod:`gamma_net_core.zoo.cartpole`) gives Monte-Carlo
values with their standard errors.

Adding a problem: subclass :class:`Problem` (or build a :class:`FiniteChain` from its matrices) and
register a factory by name::

    class Coin(FiniteChain):
        def __init__(self):
            P = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])      # two states, no terminal column used
            C = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])      # cumulant 1 on entering state 0
            super().__init__("coin", P, C)

    register("coin", Coin)
    make("coin").truth([1.0, 10.0]).values                       # [[1.0, 5.5], [1.0, 5.5]]
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gamma_net_core.timescales import gamma_from_tau, validate_taus


class Transitions(NamedTuple):
    """A stream of T transitions, as the learners' ``learn_recording`` takes them."""

    obs_t: np.ndarray  # float64 [T, n_inputs]: the observation of S_t
    cumulants: np.ndarray  # float64 [T]: C_{t+1}
    obs_tp1: np.ndarray  # float64 [T, n_inputs]: the observation of S_{t+1} (a copy of obs_t where terminal)
    terminals: np.ndarray  # bool [T]: S_{t+1} is terminal; the next transition starts a new episode

    @property
    def steps(self) -> int:
        return int(self.cumulants.shape[0])


class Truth(NamedTuple):
    """True values of a problem's evaluation states, and how much each state counts."""

    obs: np.ndarray  # float64 [N, n_inputs]: the evaluation states' observations
    weights: np.ndarray  # float64 [N], summing to 1: the on-policy state distribution
    taus: np.ndarray  # float64 [G]: the timescales, in steps
    values: np.ndarray  # float64 [N, G]: v(s, gamma(tau))
    stderr: np.ndarray | None  # float64 [N, G]: standard error of a Monte-Carlo value; None where exact


class Problem(abc.ABC):
    """A prediction problem: a seeded stream and the true values of its states.

    Attributes a subclass sets:
      name: the name it is registered under.
      low, high: the range of each observation input (a linear learner's ``state_low``/``state_high``).
      description: one line for the zoo's table.
    """

    name: str = ""
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    description: str = ""

    @property
    def n_inputs(self) -> int:
        return len(self.low)

    @abc.abstractmethod
    def stream(self, steps: int, rng: np.random.Generator) -> Transitions:
        """``steps`` transitions of the process, episodes back to back, drawn with ``rng``."""

    @abc.abstractmethod
    def truth(self, taus) -> Truth:
        """The true values of the evaluation states at each tau in ``taus`` (steps, >= 1)."""

    def features(self, obs: np.ndarray) -> np.ndarray:
        """What a neural learner sees of observations [N, n_inputs]: by default each input scaled to [0, 1]."""
        low, high = np.asarray(self.low), np.asarray(self.high)
        return np.clip((np.asarray(obs, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


class FiniteChain(Problem):
    """A Markov reward process on ``n`` states, optionally with a terminal state.

    Args:
      name: its registry name.
      P: [n, n + 1] transition probabilities; column n is the terminal state (all zero: continuing).
      C: [n, n + 1] the cumulant of each transition s -> s' (C_{t+1} when S_t = s, S_{t+1} = s').
      start: [n] where episodes start (needed when some transition terminates); None: continuing,
        the stream starts from the stationary distribution.
      noise: standard deviation of zero-mean Gaussian noise added to every cumulant (the values
        are unchanged).
      description: one line for the table.

    The observation of state s is its index s (one input in [0, n - 1]); a neural learner sees a
    one-hot vector.
    """

    def __init__(self, name: str, P, C, *, start=None, noise: float = 0.0, description: str = "") -> None:
        P = np.asarray(P, dtype=np.float64)
        C = np.asarray(C, dtype=np.float64)
        n = P.shape[0]
        if P.ndim != 2 or P.shape != (n, n + 1) or C.shape != P.shape:
            raise ValueError(f"{name}: P and C must both be [n, n + 1]; got {P.shape} and {C.shape}")
        if np.any(P < 0.0) or not np.allclose(P.sum(axis=1), 1.0):
            raise ValueError(f"{name}: each row of P must be probabilities summing to 1")
        if not np.all(np.isfinite(C)) or not math.isfinite(noise) or noise < 0.0:
            raise ValueError(f"{name}: cumulants must be finite and noise >= 0; got noise {noise!r}")
        self.name = name
        self.description = description
        self.P, self.C, self.noise = P, C, float(noise)
        self.n = n
        self.low, self.high = (0.0,), (float(max(n - 1, 1)),)
        self.episodic = bool(np.any(P[:, n] > 0.0))
        if self.episodic and start is None:
            raise ValueError(f"{name}: a chain that terminates needs a start distribution")
        self.start = None if start is None else np.asarray(start, dtype=np.float64)
        self.weights = self._state_distribution()

    @property
    def expected_cumulants(self) -> np.ndarray:
        """r [n]: E[C_{t+1} | S_t = s]."""
        return np.sum(self.P * self.C, axis=1)

    def values(self, gammas) -> np.ndarray:
        """Exact v [n, G] at each gamma: the solution of (I - gamma P) v = r."""
        P, r = self.P[:, : self.n], self.expected_cumulants
        eye = np.eye(self.n)
        return np.stack([np.linalg.solve(eye - g * P, r) for g in np.atleast_1d(gammas)], axis=1)

    def _state_distribution(self) -> np.ndarray:
        P = self.P[:, : self.n]
        if self.episodic:
            # expected visits per episode: start^T (I - P)^-1
            visits = np.linalg.solve((np.eye(self.n) - P).T, self.start)
            return visits / visits.sum()
        # stationary: d^T P = d^T, sum d = 1 (least squares on the stacked system, exact for an ergodic chain)
        A = np.vstack([(P.T - np.eye(self.n)), np.ones((1, self.n))])
        b = np.concatenate([np.zeros(self.n), [1.0]])
        d = np.linalg.lstsq(A, b, rcond=None)[0]
        d = np.clip(d, 0.0, None)
        return d / d.sum()

    def truth(self, taus) -> Truth:
        taus = validate_taus(taus, name="taus")
        obs = np.arange(self.n, dtype=np.float64)[:, None]
        return Truth(obs, self.weights.copy(), taus, self.values(gamma_from_tau(taus)), None)

    def stream(self, steps: int, rng: np.random.Generator) -> Transitions:
        n = self.n
        cum = np.cumsum(self.P, axis=1)
        cum[:, -1] = 1.0  # rounding: every draw lands in a column
        u = rng.random(steps)
        noise = rng.normal(0.0, self.noise, size=steps) if self.noise > 0.0 else np.zeros(steps)
        first = self.start if self.episodic else self.weights
        restart = rng.random(steps)
        start_cum = np.cumsum(first)
        start_cum[-1] = 1.0
        s_t = np.empty(steps, dtype=np.int64)
        s_tp1 = np.empty(steps, dtype=np.int64)
        s = int(np.searchsorted(start_cum, restart[0], side="right"))
        for t in range(steps):
            s_t[t] = s
            nxt = int(np.searchsorted(cum[s], u[t], side="right"))
            s_tp1[t] = nxt
            s = int(np.searchsorted(start_cum, restart[t], side="right")) if nxt == n else nxt
        terminals = s_tp1 == n
        cumulants = self.C[s_t, s_tp1] + noise
        obs_t = s_t.astype(np.float64)[:, None]
        obs_tp1 = np.where(terminals, s_t, s_tp1).astype(np.float64)[:, None]
        return Transitions(obs_t, cumulants, obs_tp1, terminals)

    def features(self, obs: np.ndarray) -> np.ndarray:
        """One-hot [N, n] of each state's index."""
        index = np.clip(np.rint(np.asarray(obs, dtype=np.float64)[:, 0]).astype(np.int64), 0, self.n - 1)
        return np.eye(self.n)[index]


def random_walk(n: int, *, left: float = 0.0, right: float = 1.0, name: str | None = None) -> FiniteChain:
    """The random walk of Sutton & Barto (2018, Example 6.2) on ``n`` states, terminal at both ends.

    Starts in the middle; moves left or right with probability 1/2; leaving on the left gives
    ``left``, on the right ``right``, every other step 0. Values are small (within [left, right]).
    """
    P = np.zeros((n, n + 1))
    C = np.zeros((n, n + 1))
    for s in range(n):
        for step, reward in ((-1, left), (1, right)):
            nxt = s + step
            if 0 <= nxt < n:
                P[s, nxt] += 0.5
            else:
                P[s, n] += 0.5
                C[s, n] = reward
    start = np.zeros(n)
    start[n // 2] = 1.0
    description = f"{n}-state random walk, terminal ends, {left:g} left / {right:g} right"
    return FiniteChain(name or f"random_walk_{n}", P, C, start=start, description=description)


def rare_ring(n: int, *, size: float = 10.0, forward: float = 0.5, name: str | None = None) -> FiniteChain:
    """A continuing ring of ``n`` states with a rare, large, distant cumulant.

    Each step moves forward with probability ``forward``, else stays; completing a lap
    (state n - 1 -> 0) gives ``size``, every other step 0. A lap takes n / forward steps on
    average, so the cumulant is rare and, from most states, many steps away.
    """
    P = np.zeros((n, n + 1))
    C = np.zeros((n, n + 1))
    for s in range(n):
        P[s, (s + 1) % n] += forward
        P[s, s] += 1.0 - forward
    C[n - 1, 0] = size
    return FiniteChain(
        name or f"rare_ring_{n}", P, C, description=f"{n}-state ring, cumulant {size:g} once a lap (continuing)"
    )


def steady_ring(n: int, *, name: str | None = None) -> FiniteChain:
    """A continuing symmetric random walk on a ring, cumulant 1 + cos(2 pi s' / n) / 2 on entering s'.

    The cumulant is never far from 1, so v(s, gamma) is close to tau: large values, growing with tau.
    """
    P = np.zeros((n, n + 1))
    C = np.zeros((n, n + 1))
    for s in range(n):
        for nxt in ((s + 1) % n, (s - 1) % n):
            P[s, nxt] += 0.5
    C[:, :n] = 1.0 + 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)[None, :]
    return FiniteChain(name or f"steady_ring_{n}", P, C, description=f"{n}-state ring, cumulant near 1: v near tau")


def random_chain(
    n: int, *, seed: int, branching: int = 3, cumulant: str = "event", name: str | None = None
) -> FiniteChain:
    """A continuing chain with random sparse transitions (``branching`` successors each, Dirichlet weights).

    Args:
      seed: draws the structure (not the stream), so a name stands for one chain.
      cumulant: ``event``: an indicator, 1 on entering one state (the one visited nearest 1 / n of
        the time), else 0; ``signed``: a fixed random
        N(0, 1) cumulant per transition plus N(0, 0.5) noise each step (values of both signs).
    """
    rng = np.random.default_rng(seed)
    P = np.zeros((n, n + 1))
    for s in range(n):
        successors = rng.choice(n, size=min(branching, n), replace=False)
        successors[0] = (s + 1) % n  # a ring through every state keeps the chain irreducible
        np.add.at(P[s], successors, rng.dirichlet(np.ones(successors.size)))
    C = np.zeros((n, n + 1))
    noise = 0.0
    if cumulant == "event":
        # the event: entering the state visited nearest 1 / n of the time (a random state may be all but unvisited)
        event = int(np.argmin(np.abs(FiniteChain("", P, C).weights - 1.0 / n)))
        C[:, event] = 1.0
        what = f"event indicator (entering state {event})"
    elif cumulant == "signed":
        C[:, :n] = rng.normal(0.0, 1.0, size=(n, n))
        noise = 0.5
        what = "signed N(0, 1) cumulants + noise"
    else:
        raise ValueError(f"cumulant must be 'event' or 'signed'; got {cumulant!r}")
    return FiniteChain(
        name or f"{cumulant}_chain_{n}", P, C, noise=noise, description=f"{n}-state random chain, {what}"
    )


class AR1(Problem):
    """A continuous-state chain: x_{t+1} = rho x_t + sqrt(1 - rho^2) eps, eps ~ N(0, 1) (stationary N(0, 1)).

    Args:
      rho: the autocorrelation, in (-1, 1).
      cumulant: ``x``: C_{t+1} = x_{t+1}, so v(x, gamma) = rho x / (1 - gamma rho) (both signs);
        ``square``: C_{t+1} = x_{t+1}^2, so v = rho^2 (x^2 - 1) / (1 - gamma rho^2) + 1 / (1 - gamma)
        (large, near tau).

    The evaluation states are a grid on [-3, 3] weighted by the stationary density; the
    observation is x itself, its range [-3, 3] (a linear learner clips beyond).
    """

    def __init__(self, rho: float = 0.95, *, cumulant: str = "x", name: str | None = None) -> None:
        if not -1.0 < rho < 1.0:
            raise ValueError(f"rho must be in (-1, 1); got {rho!r}")
        if cumulant not in ("x", "square"):
            raise ValueError(f"cumulant must be 'x' or 'square'; got {cumulant!r}")
        self.rho, self.cumulant = float(rho), cumulant
        self.name = name or f"ar1_{cumulant}"
        self.low, self.high = (-3.0,), (3.0,)
        self.description = f"continuous AR(1), rho {rho:g}, cumulant {'x' if cumulant == 'x' else 'x^2'}"

    def stream(self, steps: int, rng: np.random.Generator) -> Transitions:
        eps = rng.normal(size=steps + 1)
        x = np.empty(steps + 1)
        x[0] = eps[0]
        scale = math.sqrt(1.0 - self.rho**2)
        for t in range(steps):
            x[t + 1] = self.rho * x[t] + scale * eps[t + 1]
        cumulants = x[1:] if self.cumulant == "x" else x[1:] ** 2
        return Transitions(x[:-1, None].copy(), cumulants.copy(), x[1:, None].copy(), np.zeros(steps, dtype=bool))

    def truth(self, taus) -> Truth:
        taus = validate_taus(taus, name="taus")
        g = gamma_from_tau(taus)[None, :]
        x = np.linspace(-3.0, 3.0, 61)
        weights = np.exp(-0.5 * x**2)
        if self.cumulant == "x":
            values = self.rho * x[:, None] / (1.0 - g * self.rho)
        else:
            r2 = self.rho**2
            values = r2 * (x[:, None] ** 2 - 1.0) / (1.0 - g * r2) + 1.0 / (1.0 - g)
        return Truth(x[:, None], weights / weights.sum(), taus, values, None)


# ------------------------------------------------------------------------------------------- registry

#: name -> a factory of the problem (called each time: a problem may hold large arrays).
PROBLEMS: dict[str, Callable[[], Problem]] = {}


def register(name: str, factory: Callable[[], Problem]) -> None:
    """Add a problem to the zoo under ``name`` (a new name; refusing one already taken)."""
    if name in PROBLEMS:
        raise ValueError(f"a zoo problem named {name!r} exists already")
    PROBLEMS[name] = factory


def make(name: str) -> Problem:
    """The problem registered as ``name``.

    Raises:
      ValueError: one line naming an unknown problem and the known ones.
    """
    if name not in PROBLEMS:
        raise ValueError(f"unknown zoo problem {name!r}; known: {', '.join(sorted(PROBLEMS))}")
    problem = PROBLEMS[name]()
    problem.name = name
    return problem


def _register_builtins() -> None:
    for n in (5, 19, 40):
        register(f"random_walk_{n}", lambda n=n: random_walk(n))
    register("signed_walk_19", lambda: random_walk(19, left=-1.0, right=1.0, name="signed_walk_19"))
    for n in (10, 30):
        register(f"rare_ring_{n}", lambda n=n: rare_ring(n))
    register("steady_ring_10", lambda: steady_ring(10))
    for seed in (1, 2):
        register(f"event_chain_30_s{seed}", lambda seed=seed: random_chain(30, seed=seed, cumulant="event"))
        register(f"signed_chain_30_s{seed}", lambda seed=seed: random_chain(30, seed=seed, cumulant="signed"))
    register("ar1_x", lambda: AR1(0.95, cumulant="x"))
    register("ar1_square", lambda: AR1(0.9, cumulant="square"))
    register("cartpole", _cartpole)


def _cartpole() -> Problem:
    from gamma_net_core.zoo.cartpole import CartPole  # needs gymnasium: imported when asked for

    return CartPole()


_register_builtins()
