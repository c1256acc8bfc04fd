"""sb3-contrib's RecurrentPPO with the RL Zoo's tuned settings, as a peer on memory CartPole.

The env is Gymnasium's ``CartPole-v1`` with the velocities masked to zero, as the Zoo's
``CartPoleNoVel-v1`` (``rl_zoo3/wrappers.py``, ``MaskVelocityWrapper``: observation indices 1 and
3 multiplied by 0). The settings are the Zoo's ``hyperparams/ppo_lstm.yml`` entry for
``CartPoleNoVel-v1``: 8 envs, ``VecNormalize``, ``n_steps=32``, ``batch_size=256``,
``n_epochs=20``, ``gamma=0.98``, ``gae_lambda=0.8``, learning rate and clip range linear from
1e-3 and 0.2, an LSTM of 64 for the actor and another for the critic, 64-unit ReLU heads,
``ortho_init=False``. The Zoo's ``benchmark.md`` reports 500 ± 0 (test episodes) after 100k steps
for this entry (one run).

The curve records, after every rollout, the env steps, the wall time since training started, the
mean return of the last 100 finished training episodes and the process's CPU seconds; training
stops at the first rollout whose 100-episode mean reaches ``--target``.

Run: ``python -m bench.peers.sb3_recurrent_ppo --steps 1000000 --seed 0``
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.peers.sb3_ppo import learn_timed

ZOO = dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0)
PUBLISHED = (500.0, 0.0)
"""rl-baselines3-zoo benchmark.md, ppo_lstm on CartPoleNoVel-v1 after 100k steps: (mean, std)."""


def make_env_fn():
    import gymnasium as gym
    import numpy as np

    class MaskVelocity(gym.ObservationWrapper):
        """CartPole's cart and pole velocities (indices 1 and 3) zeroed."""

        mask = np.array([1.0, 0.0, 1.0, 0.0], dtype=np.float32)

        def observation(self, observation):
            return observation * self.mask

    def make():
        return MaskVelocity(gym.make("CartPole-v1"))

    return make


def run(total_steps: int, seed: int, target: float = 475.0, threads: int = 1) -> dict[str, Any]:
    """Train until the 100-episode mean reaches ``target`` or ``total_steps``; returns the curve."""
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(threads)
    t_build = time.perf_counter()
    env = VecNormalize(make_vec_env(make_env_fn(), n_envs=8, seed=seed), gamma=ZOO["gamma"])

    def linear(start: float):
        return lambda remaining: remaining * start

    model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", verbose=0, learning_rate=linear(1e-3),
                         clip_range=linear(0.2), **ZOO,
                         policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
                                            enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])))
    build_s = time.perf_counter() - t_build
    curve, wall, cpu = learn_timed(model, total_steps, target=target)
    env.close()
    return {"peer": "sb3_contrib_recurrent_ppo", "env": "CartPoleNoVel", "seed": seed,
            "env_steps": int(model.num_timesteps), "train_wall_s": wall, "train_cpu_s": cpu, "threads": threads,
            "build_s": build_s, "final_return": curve[-1][2] if curve else float("nan"), "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=475.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args()
    result = run(args.steps, args.seed, args.target, args.threads)
    print(f"CartPoleNoVel seed {args.seed}: {result['env_steps']:,} steps in {result['train_wall_s']:.0f}s "
          f"({result['train_cpu_s']:.0f} CPU s), final mean return {result['final_return']:.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
