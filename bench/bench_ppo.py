"""End-to-end PPO benchmark: time to a 100-episode mean return of 475 on CartPole and training
throughput, for rl_system and for peers (RLlib PPO, a CleanRL-style loop) in the same run.

    python -m bench.bench_ppo                       # everything (takes several minutes)
    python -m bench.bench_ppo --skip-peers --seeds 0 1 2

Wall times: "train" is from the first round to the round that reached the target (actors
already up); "startup" is Ray + actor start-up, reported separately. Peers are timed the same
way (RLlib: from the first ``train()`` call, build time separate). Writes ``bench_ppo.json``
(stamped figures) and ``bench_ppo.md`` (the tables) to ``--out`` (default ``bench/results/ppo``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import ray

from bench.harness.markdown import md_table
from bench.harness.results import RESULTS, write_suite
from bench.harness.stamp import load1, stamp
from rl_system.config import load_config
from rl_system.run.loop import train

CONFIG = "launch/configs/cartpole_ppo.yaml"
THROUGHPUT_CONFIG = "launch/configs/cartpole_ppo_throughput.yaml"


def ours_time_to_target(seed: int, run_root: Path, extra: list[str]) -> dict:
    cfg = load_config(CONFIG, [f"seed={seed}", "tensorboard=false", "log_every_s=1000",
                               "checkpoint.every_rounds=0", *extra])
    s = train(cfg, run_dir=run_root / f"ttt-{seed}", quiet=True)
    return {"peer": "rl_system", "seed": seed, "reached": s.reached_target,
            "env_steps": s.steps_to_target or s.env_steps, "train_wall_s": s.time_to_target_s or s.wall_time_s,
            "startup_s": s.startup_s, "steps_per_s": s.steps_per_s, "final_return": s.final_mean_return}


def ours_throughput(run_root: Path, steps: int, extra: list[str]) -> dict:
    cfg = load_config(THROUGHPUT_CONFIG, ["tensorboard=false", "log_every_s=1000", f"max_env_steps={steps}",
                                          "target_return=null", "checkpoint.every_rounds=0", *extra])
    s = train(cfg, run_dir=run_root / "throughput", quiet=True)
    return {"peer": "rl_system", "env_steps": s.env_steps, "wall_s": s.wall_time_s, "steps_per_s": s.steps_per_s,
            "epochs": cfg.ppo.num_epochs, "breakdown": asdict(s.time_breakdown_s)}


def _table(title: str, rows: list[dict], cols: list[str]) -> str:
    cells = [[f"{r.get(c):,.2f}" if isinstance(r.get(c), float) else r.get(c) for c in cols] for r in rows]
    return "\n".join(["", f"{title}:", "", *md_table(cols, cells)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--peer-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--throughput-steps", type=int, default=3_000_000)
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="extra config overrides for our runs")
    ap.add_argument("--out", type=Path, default=RESULTS / "ppo", help="writes bench_ppo.json and bench_ppo.md there")
    args = ap.parse_args()
    st = stamp()
    run_root = Path("/tmp/rl_system_bench")

    t0 = time.perf_counter()
    ray.init(num_cpus=max(os.cpu_count() or 1, 3), include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_init_s = time.perf_counter() - t0
    ttt = [ours_time_to_target(seed, run_root, args.overrides) for seed in args.seeds]
    thr = ours_throughput(run_root, args.throughput_steps, args.overrides)
    ray.shutdown()

    peer_ttt, peer_thr = [], []
    if not args.skip_peers:
        from bench.peers.cleanrl_ppo import run_cleanrl_ppo
        from bench.peers.rllib_ppo import run_rllib_ppo, run_rllib_throughput

        for seed in args.peer_seeds:
            peer_ttt.append(run_rllib_ppo(seed=seed, time_budget_s=120, config_name="tuned"))
        for name in ("tuned", "throughput"):
            sps = run_rllib_throughput(seconds=30, config_name=name)
            peer_thr.append({"peer": f"rllib [{name}]", **_as_dict(sps)})
        for seed in args.peer_seeds:
            peer_ttt.append(run_cleanrl_ppo(seed=seed, time_budget_s=120, variant="fast"))

    st["load_1m_after"] = load1()
    cols = ["peer", "seed", "reached", "env_steps", "train_wall_s", "steps_per_s"]
    ours_worst = max(r["train_wall_s"] for r in ttt)
    lines = [f"`{' '.join(['python -m bench.bench_ppo', *sys.argv[1:]])}`", "",
             f"Measured {st['date_utc']} at commit `{st['commit']}` on {st['cpu']} ({st['cores']} cores), torch "
             f"{st['torch']}, Ray {st['ray']}; ray.init {ray_init_s:.1f} s.",
             _table("Time to 100-episode mean return >= 475 (CartPole)", ttt + peer_ttt, cols + ["startup_s"]), "",
             f"rl_system: worst seed {ours_worst:.2f} s, median {statistics.median(r['train_wall_s'] for r in ttt):.2f} s",
             _table("Training throughput (learning on, 4 epochs)", [thr, *peer_thr], ["peer", "env_steps", "steps_per_s"]),
             "", f"rl_system time breakdown: {thr['breakdown']}"]
    lines += [f"ratio rl_system / {p['peer']}: {thr['steps_per_s'] / p['steps_per_s']:.1f}x" for p in peer_thr]
    text = "\n".join(lines) + "\n"
    print(text)
    write_suite(args.out, "bench_ppo", {"stamp": st, "ttt": ttt, "peer_ttt": peer_ttt, "throughput": thr,
                                        "peer_throughput": peer_thr}, text)


def _as_dict(value) -> dict:
    return value if isinstance(value, dict) else {"steps_per_s": float(value)}


if __name__ == "__main__":
    main()
