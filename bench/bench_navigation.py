"""Env-only throughput (env steps per second) of the lidar navigation env (``rl_system.envs.navigation``).

Steps ``NavigationVecEnv`` (default layout: 16 static cylinders, 5 moving obstacles, 20 m arena)
with pre-generated uniform random actions, so episodes end often (collisions) and the auto-reset
path is part of the timing. Each row is the best of ``--repeats`` runs of about ``--seconds``;
``wall`` is steps/s by the wall clock, ``cpu`` by this process's CPU time (steadier on a shared
machine). ``ms/step`` is the wall time of one batched ``step``.

``--baselines`` instead prints the outcome rates (success / collision / time-out over
``--episodes`` episodes) of two scripted policies, the reference points for a trained one
(``rl-system eval RUN --deterministic`` prints its rates): ``straight`` flies at full speed
straight at the goal (action = unit goal direction in the goal frame, scaled to the max-norm
box), ``random`` draws uniform actions in ``[-1, 1]^3``.

    python -m bench.bench_navigation [--sizes 256 1024 4096] [--repeats 3] [--seconds 0.5] [--threads 1]
    python -m bench.bench_navigation --baselines [--episodes 1000] [--set num_static=4 arena=10 ...]
"""

from __future__ import annotations

import argparse
import os

import torch

from bench.harness.timing import best_rates
from rl_system.envs.navigation import NavigationVecEnv

N_ACTION_BATCHES = 32


def bench(n: int, seconds: float, repeats: int) -> tuple[float, float, float]:
    env = NavigationVecEnv(n, seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand((n, 3), generator=gen) * 2 - 1 for _ in range(N_ACTION_BATCHES)]
    return best_rates(lambda i: env.step(actions[i % N_ACTION_BATCHES]), n, seconds, repeats, warmup=10,
                      probe_s=0.1, min_calls=5)


def straight_policy(obs: dict[str, torch.Tensor], gen: torch.Generator) -> torch.Tensor:
    unit = obs["state"][:, :3]  # robot -> goal, goal frame
    return unit / unit.abs().amax(1, keepdim=True).clamp_min(1e-6)


def random_policy(obs: dict[str, torch.Tensor], gen: torch.Generator) -> torch.Tensor:
    return torch.rand((obs["state"].shape[0], 3), generator=gen) * 2 - 1


def outcome_rates(policy, episodes: int, num_envs: int = 250, seed: int = 1, **kwargs) -> dict[str, float]:
    """Success / collision / time-out rates and mean length over ``episodes`` episodes; each env
    contributes its first ``ceil(episodes / num_envs)`` (no bias toward short episodes)."""
    env = NavigationVecEnv(num_envs, seed=seed, **kwargs)
    obs, gen = env.reset(), torch.Generator().manual_seed(seed)
    per_env = -(-episodes // num_envs)
    length = torch.zeros(num_envs)
    counts = torch.zeros(num_envs, dtype=torch.int64)
    succ = coll = total = 0
    lengths: list[float] = []
    while total < per_env * num_envs:
        res = env.step(policy(obs, gen))
        length += 1
        done = res.terminated | res.truncated
        take = done & (counts < per_env)
        counts += take.long()
        succ += int((take & res.info["success"]).sum())
        coll += int((take & res.info["collision"]).sum())
        total += int(take.sum())
        lengths += length[take].tolist()
        length[done] = 0
        obs = res.obs
    return {"success": succ / total, "collision": coll / total, "timeout": (total - succ - coll) / total,
            "length": sum(lengths) / len(lengths), "episodes": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baselines", action="store_true", help="outcome rates of scripted policies instead")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="env keyword arguments for --baselines, e.g. num_static=4 arena=10")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.baselines:
        kwargs = {k: (float(v) if "." in v else int(v)) for k, v in (a.split("=", 1) for a in args.set)}
        print(f"env kwargs {kwargs or '(defaults)'}, {args.episodes} episodes each")
        print(f"{'policy':>9} {'success':>8} {'collision':>10} {'timeout':>8} {'length':>7}")
        for name, policy in (("straight", straight_policy), ("random", random_policy)):
            r = outcome_rates(policy, args.episodes, **kwargs)
            print(f"{name:>9} {r['success']:>8.3f} {r['collision']:>10.3f} {r['timeout']:>8.3f} {r['length']:>7.1f}",
                  flush=True)
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, cores={os.cpu_count()}, "
          f"load avg(1m)={load:.2f}")
    print(f"{'num_envs':>8} {'wall steps/s':>14} {'cpu steps/s':>14} {'ms/step':>9}")
    for n in args.sizes:
        wall, cpu, ms = bench(n, args.seconds, args.repeats)
        print(f"{n:>8} {wall:>14,.0f} {cpu:>14,.0f} {ms:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
