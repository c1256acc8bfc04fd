"""Stable-Baselines3's A2C with the RL Zoo's tuned settings, as the peer of ``algo: a2c``
(:mod:`bench.bench_a2c`).

CartPole-v1 is rl-zoo3's ``hyperparams/a2c.yml`` entry: 8 envs (``DummyVecEnv``), 500,000 env
steps, ``ent_coef`` 0; HalfCheetah is its MuJoCo entry (``HalfCheetah-v3`` there, v5 here: the
Gymnasium version this install has): one env, 1,000,000 env steps, observations normalised
(``VecNormalize(norm_obs=True, norm_reward=False)``); both take SB3's ``A2C`` defaults for the rest (``n_steps`` 5, lr 7e-4, RMSprop
with ``alpha`` 0.99 and ``eps`` 1e-5, ``gae_lambda`` 1, ``vf_coef`` 0.5, ``max_grad_norm`` 0.5,
[64, 64] tanh actor and critic with orthogonal init). The curve is
:func:`bench.peers.sb3_ppo.curve_callback`'s: after every rollout the env steps, the wall and CPU
seconds since training started and the mean return of the last 100 finished episodes.

Run: ``python -m bench.peers.sb3_a2c --env CartPole-v1 --steps 500000 --seed 0``
"""

from __future__ import annotations

import argparse
import json
from typing import Any

ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": {"n_envs": 8, "steps": 500_000, "kwargs": {"ent_coef": 0.0}},
    "HalfCheetah-v5": {"n_envs": 1, "steps": 1_000_000, "kwargs": {}, "norm_obs": True},
}


def run(env_id: str, total_steps: int, seed: int, threads: int = 1) -> dict[str, Any]:
    """Train SB3's A2C with the Zoo's settings for ``env_id``; the curve and totals."""
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env

    from bench.peers.sb3_ppo import learn_timed

    zoo = ZOO[env_id]
    torch.set_num_threads(threads)
    env = make_vec_env(env_id, n_envs=zoo["n_envs"], seed=seed)
    if zoo.get("norm_obs"):
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(env, norm_obs=True, norm_reward=False)
    model = A2C("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **zoo["kwargs"])
    curve, wall, cpu = learn_timed(model, total_steps)
    env.close()
    return {"peer": "sb3_a2c", "env": env_id, "seed": seed, "env_steps": model.num_timesteps, "train_wall_s": wall,
            "train_cpu_s": cpu, "threads": threads, "final_return": curve[-1][2] if curve else float("nan"),
            "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="CartPole-v1", choices=sorted(ZOO))
    ap.add_argument("--steps", type=int, default=None, help="default: the Zoo's budget")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args()
    r = run(args.env, args.steps or ZOO[args.env]["steps"], args.seed)
    print(f"{args.env} seed {args.seed}: {r['env_steps']:,} env steps in {r['train_wall_s']:.0f} s, "
          f"final 100-episode mean {r['final_return']:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f)


if __name__ == "__main__":
    main()
