"""CartPole (Gymnasium's ``CartPoleEnv``) under a fixed noisy policy, with Monte-Carlo truth.

The question: the discounted count of steps until the pole falls or the cart leaves the track,
v(s, gamma) = E[sum_k gamma^k C_{t+k+1}] with C = 1 every step (Gymnasium's reward, including the
last step). The stream is Gymnasium's own environment, without its 500-step time limit: a limit
would make the value depend on the time, which the observation does not show.

The policy pushes towards the side the pole is falling to, ``a = [theta + 0.5 theta_dot > 0]``,
and with probability 1/2 pushes at random instead, so episodes last from a few dozen to a few
hundred steps (mean about 150) and values differ between states at every timescale.

The truth has no closed form: the evaluation states are on-policy states (every 97th state of
a stream with the problem's own seed), and each one's value is the mean discounted return of
``rollouts`` continuations from it, run by a vectorized copy of Gymnasium's dynamics
(:func:`step_many`; a test holds it equal to ``CartPoleEnv.step``) for up to ``horizon`` steps
(gamma^horizon tau at tau 100 is below 1e-3 of a value). Its standard error is reported beside it.
"""

from __future__ import annotations

import math

import numpy as np

from gamma_net_core.timescales import gamma_from_tau, validate_taus
from gamma_net_core.zoo.problems import Problem, Transitions, Truth

#: Gymnasium CartPoleEnv's constants (CartPole-v1).
GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, DT = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4


def step_many(state: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gymnasium's CartPole step (Euler) on many states at once.

    Args:
      state: float64 [B, 4] (x, x_dot, theta, theta_dot).
      action: int [B], 0 pushes left, 1 right.

    Returns:
      The next states [B, 4] and whether each is terminal [B].
    """
    x, x_dot, theta, theta_dot = state.T
    force = np.where(action == 1, FORCE_MAG, -FORCE_MAG)
    costheta, sintheta = np.cos(theta), np.sin(theta)
    temp = (force + POLEMASS_LENGTH * np.square(theta_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * np.square(costheta) / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    nxt = np.stack([x + DT * x_dot, x_dot + DT * xacc, theta + DT * theta_dot, theta_dot + DT * thetaacc], axis=1)
    terminal = (np.abs(nxt[:, 0]) > X_LIMIT) | (np.abs(nxt[:, 2]) > THETA_LIMIT)
    return nxt, terminal


class CartPole(Problem):
    """CartPole under the fixed noisy policy above; observations as Gymnasium gives them (float32 -> float64).

    Args:
      explore: probability of a random push each step.
      gain: the policy's weight on theta_dot.
      n_states: evaluation states.
      rollouts: Monte-Carlo continuations per evaluation state.
      horizon: steps a continuation runs at most.
      seed: seeds the evaluation states and their rollouts (the truth), not the learners' stream.
    """

    low = (-2.4, -3.0, -THETA_LIMIT, -3.0)
    high = (2.4, 3.0, THETA_LIMIT, 3.0)

    def __init__(
        self,
        *,
        explore: float = 0.5,
        gain: float = 0.5,
        n_states: int = 100,
        rollouts: int = 300,
        horizon: int = 1000,
        seed: int = 12345,
        name: str = "cartpole",
    ) -> None:
        self.explore, self.gain = float(explore), float(gain)
        self.n_states, self.rollouts, self.horizon, self.seed = int(n_states), int(rollouts), int(horizon), int(seed)
        self.name = name
        self.description = f"Gymnasium CartPole, noisy balancing policy, steps to failure (rollout truth x{rollouts})"
        self._cache: dict[tuple[float, ...], Truth] = {}

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions [B] of the policy for observations [B, 4]."""
        obs = np.asarray(obs, dtype=np.float32)
        greedy = (obs[:, 2] + np.float32(self.gain) * obs[:, 3] > 0).astype(np.int64)
        random = rng.integers(0, 2, size=obs.shape[0])
        return np.where(rng.random(obs.shape[0]) < self.explore, random, greedy)

    def _states(self, steps: int, rng: np.random.Generator) -> np.ndarray:
        """The physical states S_t [T, 4] (float64) Gymnasium's environment passes through under the policy."""
        from gymnasium.envs.classic_control import CartPoleEnv

        env = CartPoleEnv()
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        states = np.empty((steps, 4))
        for t in range(steps):
            states[t] = env.state
            obs, _, terminated, _, _ = env.step(int(self.act(obs[None, :], rng)[0]))
            if terminated:
                obs, _ = env.reset(seed=int(rng.integers(2**31)))
        env.close()
        return states

    def stream(self, steps: int, rng: np.random.Generator) -> Transitions:
        from gymnasium.envs.classic_control import CartPoleEnv

        env = CartPoleEnv()
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        obs_t = np.empty((steps, 4))
        obs_tp1 = np.empty((steps, 4))
        terminals = np.zeros(steps, dtype=bool)
        for t in range(steps):
            obs_t[t] = obs
            obs, _, terminated, _, _ = env.step(int(self.act(obs[None, :], rng)[0]))
            obs_tp1[t] = obs
            terminals[t] = terminated
            if terminated:
                obs, _ = env.reset(seed=int(rng.integers(2**31)))
        env.close()
        # the terminal observation lies beyond the coder's range; the learners never bootstrap from it
        obs_tp1[terminals] = obs_t[terminals]
        return Transitions(obs_t, np.ones(steps), obs_tp1, terminals)

    def evaluation_states(self) -> np.ndarray:
        """The evaluation states [n_states, 4] (float64 physical states): every 97th of an on-policy stream."""
        rng = np.random.default_rng(self.seed)
        every = 97
        states = self._states(self.n_states * every, rng)
        return states[::every][: self.n_states]

    def rollout_returns(self, states: np.ndarray, gammas: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Discounted returns [N, rollouts, G] of ``rollouts`` continuations of the policy from each state."""
        N, R = states.shape[0], self.rollouts
        s = np.repeat(states, R, axis=0)
        alive = np.ones(N * R, dtype=bool)
        returns = np.zeros((N * R, gammas.size))
        discount = np.ones(gammas.size)
        for _ in range(self.horizon):
            if not alive.any():
                break
            idx = np.flatnonzero(alive)
            nxt, terminal = step_many(s[idx], self.act(s[idx].astype(np.float32), rng))
            returns[idx] += discount[None, :]  # C = 1 on every step, the last one included
            s[idx] = nxt
            alive[idx[terminal]] = False
            discount = discount * gammas
        return returns.reshape(N, R, gammas.size)

    def truth(self, taus) -> Truth:
        taus = validate_taus(taus, name="taus")
        key = tuple(float(t) for t in taus)
        if key not in self._cache:
            states = self.evaluation_states()
            returns = self.rollout_returns(states, gamma_from_tau(taus), np.random.default_rng(self.seed + 1))
            values = returns.mean(axis=1)
            stderr = returns.std(axis=1, ddof=1) / math.sqrt(self.rollouts)
            obs = states.astype(np.float32).astype(np.float64)
            weights = np.full(states.shape[0], 1.0 / states.shape[0])
            self._cache[key] = Truth(obs, weights, taus, values, stderr)
        return self._cache[key]
