"""Stable-Baselines3 PPO on MinAtar with rl_system's MinAtar settings, as a peer run beside
:mod:`bench.bench_minatar`.

Everything that shapes learning is ``launch/configs/minatar_breakout_ppo.yaml``'s:

* the MinAtar paper's small CNN (16 3x3 filters, "same" padding, ReLU, then a 128-unit ReLU layer),
  shared by actor and critic, then separate 256-unit ReLU heads, orthogonal init (SB3's default);
* 64 envs x 128 steps per update (8,192 env steps), 4 epochs of 8 minibatches (1,024), lr 5e-4
  annealed linearly to zero over ``schedule_steps``, gamma 0.99, lambda 0.95, clip 0.2,
  entropy 0.01, value 0.5, gradient norm 0.5, advantages normalised;
* the same Gymnasium ids (``rl_system.envs.minatar_gym``: sticky actions 0.1, difficulty ramping).

What differs is SB3's own: its 64 envs step one after another in the training process
(``DummyVecEnv``, the RL Zoo's default), and it does not clip the value loss (``clip_range_vf``
unset). ``schedule_steps`` defaults to rl_system's 5M budget, so a shorter peer run follows the
same learning-rate schedule as the first steps of rl_system's run and the two curves can be
compared step for step.

The curve is :func:`bench.peers.sb3_ppo.curve_callback`'s: after every rollout the env steps,
wall and CPU seconds since training started and the mean return of the last 100 finished
training episodes.

Run: ``python -m bench.peers.sb3_minatar --game Breakout --steps 1000000 --seed 0``
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

SETTINGS = {"n_steps": 128, "batch_size": 1024, "n_epochs": 4, "gamma": 0.99, "gae_lambda": 0.95,
            "clip_range": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5, "normalize_advantage": True}
N_ENVS = 64
LR = 5e-4


class SmallCNN(BaseFeaturesExtractor):
    """SB3 features extractor: bool ``[B, 10, 10, C]`` planes -> ``[B, 128]`` (the MinAtar paper's
    network, as rl_system's ``conv`` encoder builds it)."""

    def __init__(self, observation_space, features: int = 128) -> None:
        super().__init__(observation_space, features)
        h, w, c = observation_space.shape
        self.net = nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(16 * h * w, features), nn.ReLU())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.permute(0, 3, 1, 2))


def test(model: PPO, game: str, episodes: int, seed: int) -> dict[str, float]:
    """Mean and std of ``episodes`` deterministic (argmax) episode returns on 32 fresh envs."""
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy

    env = make_vec_env(f"MinAtar/{game}-v1", n_envs=32, seed=seed)
    returns, lengths = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True,
                                       return_episode_rewards=True)
    env.close()
    return {"episodes": len(returns), "deterministic": True, "return_mean": float(np.mean(returns)),
            "return_std": float(np.std(returns)), "length_mean": float(np.mean(lengths))}


def build(game: str, seed: int, lr_scale: float = 1.0) -> PPO:
    """SB3 PPO with rl_system's MinAtar settings on 64 ``MinAtar/<game>-v1`` envs. ``lr_scale``:
    the share of the learning-rate schedule (5e-4 -> 0) that SB3's ``total_timesteps`` spans."""
    import rl_system.envs.minatar_gym  # noqa: F401  (registers the MinAtar ids)

    env = make_vec_env(f"MinAtar/{game}-v1", n_envs=N_ENVS, seed=seed)

    def lr(progress_remaining: float) -> float:  # SB3's progress runs 1 -> 0 over total_timesteps
        return LR * (1.0 - (1.0 - progress_remaining) * lr_scale)

    return PPO("MlpPolicy", env, learning_rate=lr, seed=seed, device="cpu", verbose=0, **SETTINGS,
               policy_kwargs={"features_extractor_class": SmallCNN, "activation_fn": torch.nn.ReLU,
                              "net_arch": {"pi": [256], "vf": [256]}})


def run(game: str, total_steps: int, seed: int, schedule_steps: int = 5_000_000, threads: int = 1,
        test_episodes: int = 0) -> dict[str, Any]:
    """Train SB3 PPO on ``MinAtar/<game>-v1`` for ``total_steps``; returns the curve and totals
    and, with ``test_episodes``, a ``test`` dict (:func:`test`)."""
    from bench.peers.sb3_ppo import learn_timed

    torch.set_num_threads(threads)
    model = build(game, seed, lr_scale=total_steps / schedule_steps)
    curve, wall, cpu = learn_timed(model, total_steps)
    model.get_env().close()
    row = {"peer": "sb3_ppo", "env": game, "seed": seed, "env_steps": model.num_timesteps, "train_wall_s": wall,
           "train_cpu_s": cpu, "threads": threads, "schedule_steps": schedule_steps,
           "final_return": curve[-1][2] if curve else float("nan"),
           "best_return": max((r[2] for r in curve), default=None), "curve": curve}
    if test_episodes:
        row["test"] = test(model, game, test_episodes, seed + 10_000)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="Breakout", choices=["Breakout", "SpaceInvaders"])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--schedule-steps", type=int, default=5_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--test-episodes", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args()
    r = run(args.game, args.steps, args.seed, args.schedule_steps, args.threads, args.test_episodes)
    print(f"{args.game} seed {args.seed}: {r['env_steps']:,} env steps in {r['train_wall_s']:.0f} s "
          f"({r['train_cpu_s']:.0f} CPU s, {r['env_steps'] / r['train_wall_s']:,.0f} env steps/s), "
          f"final 100-episode mean {r['final_return']:.1f}"
          + (f", deterministic test {r['test']['return_mean']:.1f}" if "test" in r else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f)


if __name__ == "__main__":
    main()
