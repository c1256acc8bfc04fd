"""Peers run side by side with rl_system by the suites: RLlib PPO (``rllib_ppo``, ``rllib_builtin``),
a CleanRL-style loop (``cleanrl_ppo``), Stable-Baselines3 (``sb3_ppo``, ``sb3_minatar``),
sb3-contrib (``sb3_recurrent_ppo``) and BenchMARL's MAPPO on VMAS (``benchmarl_mappo``). Each reports
rows of one shape (:func:`peer_result`) and curves of the shape :mod:`bench.harness.learning` reads."""

from __future__ import annotations

import math


def peer_result(peer: str, seed: int, hit: tuple | None, env_steps: int, wall: float, build_s: float,
                final: float) -> dict:
    """The row every peer reports: ``hit`` is ``(steps, wall, return)`` when the target was
    reached, else the run's totals (``env_steps``, ``wall``, ``final``) are reported."""
    steps, wall, final = hit if hit is not None else (env_steps, wall, final)
    return {
        "peer": peer,
        "seed": seed,
        "reached": hit is not None,
        "env_steps": int(steps),
        "train_wall_s": float(wall),
        "build_s": float(build_s),
        "steps_per_s": float(steps / wall) if wall > 0 else math.nan,
        "final_return": float(final),
    }
