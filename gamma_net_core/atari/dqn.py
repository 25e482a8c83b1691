"""`gamma-net atari train-agent`: a DQN agent (Nature CNN) to make the policy whose φ Γ-nets learn from.

For a MinAtar game (``--game minatar-breakout``) the same trainer trains MinAtar's reference
network (:mod:`gamma_net_core.atari.minatar_network`) with MinAtar's reference DQN settings,
read from ``config/minatar.yaml`` (section ``dqn_trainer``): one update per step, a target
sync every 1,000 steps, ε from 1 to 0.1 over 100,000 steps after 5,000 of warm-up.

The paper's policies were Dopamine's pretrained Rainbow agents, which cannot be downloaded
here; this trainer lets a user make their own agent for any game. It is Mnih et al.'s
(2015) DQN in Dopamine's configuration: the Nature CNN, uniform replay, a target network,
Huber loss on one-step targets with rewards clipped to [-1, 1], an update every 4 steps
after a warm-up, ε decaying linearly from 1 to 0.01 after the warm-up.

Optimizer: Adam (step size 6.25e-5, ε 1.5e-4), as Dopamine's Rainbow agents, which
generated the paper's data, and as Dopamine's later DQN; it is less sensitive than the
Nature paper's RMSProp to the scale of the loss, which matters when a user changes the
reward clipping or the network. All counts here are agent steps (4 frames each).

Checkpoints (``DIR/checkpoint.pt``, :func:`gamma_net_core.checkpoint.save_torch`, loaded with
``weights_only``) hold the online and target networks, the optimizer, the replay buffer,
the environment's exact state, the generator state and the counters, so a run stopped and
resumed (the same command with the same or a larger ``--frames``) makes the same updates
as one that never stopped. ``DIR/network.pt`` is the online network alone, in the format
``--policy`` takes (:func:`gamma_net_core.atari.networks.save_q_network`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import re
import sys
import time
from typing import Any

import numpy as np

from gamma_net_core.config import setting, to_mapping, validate
from gamma_net_core.report import Report, Table, write_json

KIND = "dqn_checkpoint"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    """DQN settings; defaults from Dopamine's DQN (dqn_nature.gin) with Rainbow's Adam."""

    gamma: float = setting(0.99, "discount of the agent's own return (Dopamine: 0.99)", low=0.0, high=0.9999)
    learning_rate: float = setting(6.25e-5, "Adam step size (Dopamine Rainbow; the paper's)", low=1e-8, high=1.0)
    adam_epsilon: float = setting(1.5e-4, "Adam epsilon (Dopamine Rainbow)", low=1e-12, high=1.0)
    batch_size: int = setting(32, "transitions per update (Dopamine: 32)", low=1, high=4096)
    replay_capacity: int = setting(
        100_000, "transitions in replay (Dopamine: 1M; 100k = 0.7 GB here)", low=8, high=10_000_000
    )
    learning_starts: int = setting(20_000, "steps of warm-up before updates (Dopamine: 20k)", low=1, high=10**9)
    update_period: int = setting(4, "steps between updates (Dopamine: 4)", low=1, high=1000)
    target_update_period: int = setting(
        8_000,
        "agent steps (not updates) between target syncs, Dopamine's unit and the Γ-net learner's (Dopamine: 8000)",
        low=1,
        high=10**9,
    )
    epsilon_end: float = setting(0.01, "ε after the decay (Dopamine: 0.01)", low=0.0, high=1.0)
    epsilon_decay_steps: int = setting(250_000, "steps of linear ε decay after warm-up (Dopamine)", low=1, high=10**9)
    reward_clip: float = setting(1.0, "rewards are clipped to [-c, c] for learning (Nature DQN: 1)", low=0.0, high=1e9)
    checkpoint_period: int = setting(50_000, "steps between checkpoints", low=1, high=10**9)

    def __post_init__(self):
        validate(self)


def epsilon_at(step: int, config: DQNConfig) -> float:
    """ε of step ``step``: 1 during warm-up, then linear to ``epsilon_end`` over the decay."""
    if step < config.learning_starts:
        return 1.0
    progress = min(1.0, (step - config.learning_starts) / config.epsilon_decay_steps)
    return 1.0 + progress * (config.epsilon_end - 1.0)


def td_targets(rewards_t, terminals_t, q_next_target_t, *, gamma: float):
    """One-step targets r_t + γ (1 - terminal_t) max_a Q_target(s_t, a) (no gradient)."""
    return rewards_t + gamma * (~terminals_t).float() * q_next_target_t.max(dim=1).values


class DQNTrainer:
    """DQN on one game; :meth:`train` runs to a total step count, checkpointing into ``out``.

    Args:
      out: directory for ``checkpoint.pt``, ``network.pt`` and ``log.json``; continued if it holds a checkpoint.
      config: DQN settings.
      env_config: the environment (the paper's settings by default).
      seed: seeds the network, the sticky actions and the trainer's draws (ε, replay sampling).
    """

    def __init__(self, out, *, config: DQNConfig | None = None, env_config=None, seed: int = 0):
        import torch

        from gamma_net_core.atari.domains import make_env, random_q_network
        from gamma_net_core.atari.env import AtariConfig
        from gamma_net_core.atari.frame_replay import FrameReplay

        self.out = pathlib.Path(out)
        self.config = config or DQNConfig()
        self.env_config = env_config or AtariConfig()
        self.seed = int(seed)
        net_seed, env_seed, rng_seed = (int(s) for s in np.random.SeedSequence(seed).generate_state(3))
        self.env = make_env(self.env_config, seed=env_seed)
        self.rng = np.random.default_rng(rng_seed)
        self.online = random_q_network(self.env, seed=net_seed)
        self.target = random_q_network(self.env, seed=net_seed)
        self.target.load_state_dict(self.online.state_dict())
        self.online.train()
        self.optimizer = torch.optim.Adam(
            self.online.parameters(), lr=self.config.learning_rate, eps=self.config.adam_epsilon
        )
        # ALE's observations are stacks sharing frames: the replay stores each newest frame once.
        # MinAtar's are single grids: the replay stores the whole observation, a stack of one.
        self._stacked = isinstance(self.env_config, AtariConfig)
        shape = self.env.observation_shape
        self.replay = FrameReplay(
            self.config.replay_capacity,
            frame_shape=shape[1:] if self._stacked else shape,
            stack=shape[0] if self._stacked else 1,
        )
        self.steps = 0
        self.updates = 0
        self.episodes = 0
        self.episode_return = 0.0
        self.episode_returns: list[float] = []  # every finished episode's (unclipped) score
        self.losses: list[float] = []  # mean loss of each block of 100 updates
        self._loss_sum, self._loss_count = 0.0, 0
        if (self.out / "checkpoint.pt").is_file():
            self._load(self.out / "checkpoint.pt")

    # -- identity ---------------------------------------------------------------------------
    def _identity(self) -> dict[str, Any]:
        return {
            "dqn": to_mapping(self.config),
            "env": {**to_mapping(self.env_config), "game": self.env.game},
            "seed": self.seed,
        }

    # -- learning ---------------------------------------------------------------------------
    def act(self, observation: np.ndarray) -> int:
        """ε-greedy with the current ε (one uniform draw, then an action draw only when exploring)."""
        import torch

        if self.rng.random() < epsilon_at(self.steps, self.config):
            return int(self.rng.integers(self.env.num_actions))
        with torch.no_grad():
            return int(self.online(torch.from_numpy(observation)[None]).argmax(dim=1)[0])

    def _unstack(self, observations: np.ndarray) -> np.ndarray:
        """The replay's [B, stack, ...] as the network's input (a MinAtar stack of one is dropped)."""
        return observations if self._stacked else observations[:, 0]

    def _loss(self, batch):
        """Huber loss of Q(s, a) against one-step targets from the target network, clipped rewards."""
        import torch
        import torch.nn.functional as F

        clip = self.config.reward_clip
        rewards_t = torch.from_numpy(np.clip(batch.rewards, -clip, clip))
        with torch.no_grad():
            q_next_target_t = self.target(torch.from_numpy(self._unstack(batch.next_observations)))
            targets_t = td_targets(
                rewards_t, torch.from_numpy(batch.terminals), q_next_target_t, gamma=self.config.gamma
            )
        q_tm1 = self.online(torch.from_numpy(self._unstack(batch.observations)))
        q_taken_tm1 = q_tm1.gather(1, torch.from_numpy(batch.actions)[:, None])[:, 0]
        return F.smooth_l1_loss(q_taken_tm1, targets_t)

    def update(self) -> float:
        """One gradient step on a uniformly sampled batch; returns the loss before the step."""
        loss = self._loss(self.replay.sample(self.config.batch_size, self.rng))
        if not bool(loss.isfinite()):
            raise FloatingPointError(f"DQN loss became {float(loss)} at update {self.updates}; last checkpoint kept")
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        return float(loss.detach())

    def evaluate_loss(self, batch) -> float:
        """The loss on ``batch`` (a :class:`~gamma_net_core.atari.frame_replay.ReplayBatch`), without learning."""
        import torch

        with torch.no_grad():
            return float(self._loss(batch))

    def train(self, total_steps: int, *, progress: bool = True) -> dict[str, Any]:
        """Run until ``total_steps`` agent steps in all (continuing a resumed run); checkpoint at the end."""
        from tqdm import tqdm

        c = self.config
        started, start_steps = time.perf_counter(), self.steps
        observation = self.env.observation()
        with tqdm(
            total=total_steps, initial=min(self.steps, total_steps), unit="step", file=sys.stderr, disable=not progress
        ) as bar:
            while self.steps < total_steps:
                if self.env.episode_over:
                    observation = self.env.reset()
                    self.episode_return = 0.0
                action = self.act(observation)
                step = self.env.step(action)
                ended = step.terminal or step.truncated
                self.replay.add(
                    frame=observation[-1] if self._stacked else observation,
                    action=action,
                    reward=step.reward,
                    terminal=step.terminal,
                    ended=ended,
                )
                observation = step.observation
                self.episode_return += step.reward
                self.steps += 1
                if ended:
                    self.episodes += 1
                    self.episode_returns.append(self.episode_return)
                    bar.set_postfix(episodes=self.episodes, last_return=self.episode_return)
                if self.steps >= c.learning_starts and self.steps % c.update_period == 0:
                    self._loss_sum += self.update()
                    self._loss_count += 1
                    if self._loss_count == 100:
                        self.losses.append(self._loss_sum / 100)
                        self._loss_sum, self._loss_count = 0.0, 0
                if self.steps % c.target_update_period == 0:
                    self.target.load_state_dict(self.online.state_dict())
                if self.steps % c.checkpoint_period == 0:
                    self.save()
                bar.update(1)
        self.save()
        seconds = time.perf_counter() - started
        return {
            "game": self.env.game,
            "steps": self.steps,
            "frames": self.steps * getattr(self.env_config, "frame_skip", 1),
            "updates": self.updates,
            "episodes": self.episodes,
            "episode_returns": list(self.episode_returns),
            "losses": list(self.losses),
            "steps_per_second": (self.steps - start_steps) / seconds if seconds > 0 else float("nan"),
        }

    # -- checkpoints ------------------------------------------------------------------------
    def save(self) -> None:
        """Atomically write checkpoint.pt, network.pt and log.json."""
        import torch

        from gamma_net_core.atari.networks import network_file, save_q_network
        from gamma_net_core.checkpoint import save_torch

        state = {
            "kind": KIND,
            "version": VERSION,
            "identity": json.dumps(self._identity(), sort_keys=True),
            "online": network_file(self.online, game=self.env.game),
            "target": {k: v.clone() for k, v in self.target.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "replay": {k: torch.from_numpy(np.array(v)) for k, v in self.replay.state_dict().items()},
            "env_state": json.dumps(self.env.get_state().to_json()),
            "rng": json.dumps(self.rng.bit_generator.state),
            "counters": json.dumps(
                {
                    "steps": self.steps,
                    "updates": self.updates,
                    "episodes": self.episodes,
                    "episode_return": self.episode_return,
                    "episode_returns": self.episode_returns,
                    "losses": self.losses,
                    "loss_sum": self._loss_sum,
                    "loss_count": self._loss_count,
                }
            ),
        }
        save_torch(self.out / "checkpoint.pt", state)
        save_q_network(self.out / "network.pt", self.online, game=self.env.game)
        write_json(
            self.out / "log.json",
            {
                "identity": self._identity(),
                "steps": self.steps,
                "updates": self.updates,
                "episode_returns": self.episode_returns,
                "losses_per_100_updates": self.losses,
            },
        )

    def _load(self, path: pathlib.Path) -> None:
        from gamma_net_core.atari.env import EnvState
        from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_torch

        state = load_torch(path)
        if state.get("kind") != KIND or state.get("version") != VERSION:
            raise CheckpointError(f"{path} is not a {KIND} version {VERSION}")
        saved = json.loads(state["identity"])
        expected = json.loads(json.dumps(self._identity()))
        for part in ("dqn", "env"):
            check_same_config(path, saved[part], expected[part])
        if saved["seed"] != self.seed:
            raise CheckpointError(f"{path} was made with seed {saved['seed']}, not {self.seed}")
        self.online.load_state_dict(state["online"]["state_dict"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.load_state_dict({k: v.numpy() if hasattr(v, "numpy") else v for k, v in state["replay"].items()})
        self.env.set_state(EnvState.from_json(json.loads(state["env_state"])))
        self.rng.bit_generator.state = json.loads(state["rng"])
        counters = json.loads(state["counters"])
        self.steps, self.updates, self.episodes = counters["steps"], counters["updates"], counters["episodes"]
        self.episode_return = counters["episode_return"]
        self.episode_returns = list(counters["episode_returns"])
        self.losses = list(counters["losses"])
        self._loss_sum, self._loss_count = counters["loss_sum"], counters["loss_count"]


#: The section of a parameter file that `atari train-agent --params` reads (group ``dqn``).
PARAMS_SECTION, PARAMS_GROUP = "dqn_trainer", "dqn"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gamma_net_core.atari.arguments import GAME_HELP, add_play_arguments

    parser.add_argument("--game", required=True, help=GAME_HELP)
    parser.add_argument(
        "--frames", type=int, required=True, help="total frames: 4 emulated frames per agent step in ALE, 1 in MinAtar"
    )
    parser.add_argument("--out", required=True, help="directory for checkpoint.pt, network.pt, log.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--params",
        default=None,
        help=f"YAML whose {PARAMS_SECTION}.{PARAMS_GROUP} section sets the DQN (default: config/minatar.yaml for a "
        "MinAtar game, MinAtar's reference DQN; for ALE, the defaults below, Dopamine's)",
    )
    for field in dataclasses.fields(DQNConfig):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(
            flag, type=type(field.default), default=None, help=f"{field.metadata['help']}; default {field.default}"
        )
    add_play_arguments(parser)
    parser.add_argument("--no-progress", action="store_true")


def dqn_config(args: argparse.Namespace) -> DQNConfig:
    """The DQN settings: DQNConfig's defaults, then the parameter file's, then the options given.

    Raises:
      UsageError: a setting out of range, named as the option (or the file's key) that gave it.
    """
    from gamma_net_core.atari.minatar import is_minatar
    from gamma_net_core.cli import UsageError, input_path
    from gamma_net_core.config import from_mapping, load_section
    from gamma_net_core.paths import config_file

    params = args.params if args.params is not None else (config_file("minatar") if is_minatar(args.game) else None)
    mapping = {}
    if params is not None:
        input_path("--params", params, kind="file")
        mapping = load_section(params, PARAMS_SECTION, PARAMS_GROUP)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(DQNConfig) if getattr(args, f.name) is not None}
    try:
        where = f"{params}:{PARAMS_SECTION}.{PARAMS_GROUP} and the options" if params is not None else ""
        return from_mapping(DQNConfig, {**mapping, **given}, where=where)
    except ValueError as exc:  # named as typed: DQNConfig.learning_rate is --learning-rate
        message = re.sub(r"DQNConfig\.(\w+)", lambda m: "--" + m.group(1).replace("_", "-"), str(exc))
        raise UsageError(message) from None


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.atari.arguments import check_play, play_config
    from gamma_net_core.cli import check, output_dir

    check_play(args)
    config = dqn_config(args)
    env_config = play_config(args)
    frame_skip = getattr(env_config, "frame_skip", 1)
    check(
        args.frames >= frame_skip,
        f"--frames must be >= {frame_skip} (one agent step of {frame_skip} frame{'s' * (frame_skip > 1)}); "
        f"got {args.frames}",
    )
    output_dir("--out", args.out)
    trainer = DQNTrainer(args.out, config=config, env_config=env_config, seed=args.seed)
    summary = trainer.train(args.frames // frame_skip, progress=not args.no_progress)
    returns = summary["episode_returns"]
    table = Table(
        f"DQN on {summary['game']}",
        ["frames", "updates", "episodes", "mean return (first 10)", "mean return (last 10)",
         "mean return (last 100)", "steps/s"],
    )  # fmt: skip
    # MinAtar's published curves are the mean of the last 100 training episodes (ε-greedy), hence that column.
    first, last, last_100 = (float(np.mean(returns[cut])) if returns else float("nan")
                             for cut in (slice(10), slice(-10, None), slice(-100, None)))  # fmt: skip
    table.add(
        summary["frames"], summary["updates"], summary["episodes"], first, last, last_100, summary["steps_per_second"]
    )
    out = pathlib.Path(args.out)
    return Report(
        tables=[table], data=summary, files=[str(out / "checkpoint.pt"), str(out / "network.pt"), str(out / "log.json")]
    )
