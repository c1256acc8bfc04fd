"""In-process sweep of ``launch/configs/cartpole_memory_ppo.yaml``: each argument is one set of
``--set``-style overrides (space-separated); each set trains in this process (no Ray: the sampler
and trainer of :mod:`rl_system.algos.ppo` on one torch thread, both workers' envs in one batch)
until the 100-episode mean reaches 475 or 1M env steps, and prints the env steps, wall and CPU
seconds. The figures behind docs/ppo.md's recurrent tuning note.

    python -m bench.experiments.sweep_memory "" "ppo.lr=0.003" "ppo.num_minibatches=2" "model.hidden_sizes=[] ppo.lr=0.003"
"""

from __future__ import annotations

import argparse
import time

import torch

from rl_system.algos import get_algorithm
from rl_system.config import load_config
from rl_system.envs import make_env

_PPO = get_algorithm("ppo")  # the factories over a run config
make_policy, make_sampler, make_trainer = _PPO.make_policy, _PPO.make_sampler, _PPO.make_trainer

CONFIG = "launch/configs/cartpole_memory_ppo.yaml"


def solve(overrides: list[str], seed: int = 0, max_steps: int = 1_000_000, target: float = 475.0) -> dict:
    cfg = load_config(CONFIG, [*overrides, f"seed={seed}"])
    torch.manual_seed(seed)
    env = make_env(cfg.env.name, cfg.workers.num_envs * cfg.workers.num_workers, "cpu", seed=seed, **cfg.env.kwargs)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    trainer, sampler = make_trainer(policy, cfg), make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed=seed)
    returns: list[float] = []
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while steps < max_steps:
        cols, episodes = sampler.collect()
        steps += cols["reward"].numel()
        returns += episodes.returns.tolist()
        trainer.update({k: v.clone() for k, v in cols.items()}, steps / max_steps)
        if len(returns) >= 100 and sum(returns[-100:]) / 100 >= target:
            break
    return {"solved": len(returns) >= 100 and sum(returns[-100:]) / 100 >= target, "env_steps": steps,
            "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - c0, 1),
            "last_mean": round(sum(returns[-100:]) / max(len(returns[-100:]), 1), 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", default=[""], metavar="OVERRIDES",
                    help='one set of space-separated KEY=VALUE overrides per argument ("" is the shipped config)')
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for arg in args.sets or [""]:
        print(arg or "(shipped)", solve(arg.split()), flush=True)


if __name__ == "__main__":
    main()
