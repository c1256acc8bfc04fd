"""Stable-Baselines3 PPO with the RL Zoo's tuned hyperparameters, as a peer on Gymnasium MuJoCo.

The settings are rl-zoo3 2.9.2's ``hyperparams/ppo.yml`` entries for ``HalfCheetah-v4`` and
``Hopper-v4`` (run here on the ``-v5`` envs, which Gymnasium ships now): one env, ``VecNormalize``
of observations and rewards, separate 256-256 ReLU actor and critic, ``log_std_init=-2``,
``ortho_init=False``. The Zoo's published figures for these settings at 1M steps
(``benchmark.md``, PPO, ``-v3`` envs, one run, deterministic test episodes) are
HalfCheetah 5819 ± 664 and Hopper 2410 ± 10.

The curve records, after every rollout, the env steps, the wall time since training started, the
mean return of the last 100 finished training episodes (raw rewards, as the Monitor wrapper sees
them, before ``VecNormalize``) and the process's CPU seconds since training started (SB3 runs in
one process on one torch thread, so alone on a machine its CPU time is its wall time; under
other load the CPU time is the steadier measure).

Run: ``python -m bench.peers.sb3_ppo --env HalfCheetah-v5 --steps 1000000 --seed 0``
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from typing import Any

ZOO: dict[str, dict[str, Any]] = {
    "HalfCheetah": dict(batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05, ent_coef=0.000401762,
                        clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096),
    "Hopper": dict(batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05, ent_coef=0.00229519,
                   clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671),
}
PUBLISHED = {"HalfCheetah": (5819.1, 663.5), "Hopper": (2410.4, 10.0)}
"""rl-baselines3-zoo benchmark.md, PPO at 1M steps on the -v3 envs: (mean, std) of test episodes."""


def zoo_settings(env_id: str) -> dict[str, Any]:
    family = env_id.split("-")[0]
    if family not in ZOO:
        raise ValueError(f"no Zoo settings for {env_id!r}; known: {', '.join(ZOO)}")
    return ZOO[family]


def curve_callback(partial: str | None = None, partial_meta: dict | None = None, target: float | None = None):
    """An SB3 callback keeping the learning curve: after every rollout ``(env steps, wall s, mean
    return of the last 100 finished episodes, CPU s)`` in ``.curve``, both clocks from the start
    of training (``.t0``, ``.c0``). ``partial``: a JSON path the curve so far is written to every
    50 rollouts. ``target``: stop training at the first rollout whose mean reaches it."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Curve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: collections.deque = collections.deque(maxlen=100)
            self.curve: list[tuple[int, float, float, float]] = []

        def _on_training_start(self) -> None:
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(float(info["episode"]["r"]))
            return not (target is not None and len(self.returns) == 100 and self.curve
                        and self.curve[-1][2] >= target)

        def _on_rollout_end(self) -> None:
            if self.returns:
                self.curve.append((self.num_timesteps, time.perf_counter() - self.t0,
                                   sum(self.returns) / len(self.returns), time.process_time() - self.c0))
            if partial and len(self.curve) % 50 == 0:
                with open(partial, "w") as f:
                    json.dump({**(partial_meta or {}), "partial": True, "curve": self.curve}, f)

    return Curve()


def learn_timed(model, total_steps: int, **callback_kw) -> tuple[list[tuple[int, float, float, float]], float, float]:
    """Train an SB3 ``model`` for ``total_steps`` under :func:`curve_callback` (``callback_kw``: its
    arguments); returns ``(curve, wall s, CPU s)``, both clocks from the start of training."""
    callback = curve_callback(**callback_kw)
    model.learn(total_timesteps=total_steps, callback=callback)
    return callback.curve, time.perf_counter() - callback.t0, time.process_time() - callback.c0


def run(env_id: str, total_steps: int, seed: int, threads: int = 1, partial: str | None = None) -> dict[str, Any]:
    """Train SB3 PPO with the Zoo's settings; returns the curve and the totals. ``partial``: a
    JSON path the curve so far is written to every 50 rollouts (a long run can be read early)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(threads)
    settings = zoo_settings(env_id)
    t_build = time.perf_counter()
    env = VecNormalize(make_vec_env(env_id, n_envs=1, seed=seed), gamma=settings["gamma"])
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **settings,
                policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=torch.nn.ReLU,
                                   net_arch=dict(pi=[256, 256], vf=[256, 256])))
    build_s = time.perf_counter() - t_build
    curve, wall, cpu = learn_timed(model, total_steps, partial=partial,
                                   partial_meta={"peer": "sb3_zoo", "env": env_id, "seed": seed})
    env.close()
    return {"peer": "sb3_zoo", "env": env_id, "seed": seed, "env_steps": total_steps, "train_wall_s": wall,
            "train_cpu_s": cpu, "threads": threads, "build_s": build_s, "final_return": curve[-1][2] if curve else float("nan"), "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="HalfCheetah-v5")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 was faster than 2 on 2 cores)")
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args()
    result = run(args.env, args.steps, args.seed, args.threads,
                 partial=args.json.replace(".json", ".partial.json") if args.json else None)
    print(f"{args.env} seed {args.seed}: {result['env_steps']:,} steps in {result['train_wall_s']:.0f}s "
          f"({result['train_cpu_s']:.0f} CPU s), final mean return {result['final_return']:.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
