"""RLlib PPO beside rl_system on every built-in env, the same wall-clock training budget each, in
one run: env steps, env steps/s with learning, and the training return and outcome rate (the last
100 finished episodes) at the end, and where the two stood after the same number of env steps.

    python -m bench.bench_rllib_envs                               # CartPole, Navigation, AirCombat, AliceBob
    python -m bench.bench_rllib_envs --envs CartPole --seconds 60

rl_system trains each env's shipped config (``launch/configs/``; AliceBob: the flat MAPPO preset,
RLlib's multi-agent PPO being flat too) with ``max_wall_s`` = the budget. RLlib trains the same env
through its registry id (:mod:`rl_system.rllib`) with that config's PPO hyperparameters and
network where RLlib has them (:mod:`bench.peers.rllib_builtin` says which); it stops at the first
``train()`` iteration that ends past the budget. Both get ``max_env_steps`` 1e9 so the wall budget
ends them (which also leaves rl_system's linear ``lr`` annealing to ``max_env_steps`` negligible). Start-up (Ray, actors, RLlib's build) is not in
the budget for either and is printed apart. One seed per env: this is a throughput and
learning-speed comparison in wall time, not a final-performance study.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from rl_system.config import RunConfig, load_config
from rl_system.run.loop import RunLoop

# env -> (shipped config, the outcome flag its info reports at episode end, or None)
ENVS: dict[str, tuple[str, str | None]] = {
    "CartPole": ("launch/configs/cartpole_ppo.yaml", None),
    "Navigation": ("launch/configs/navigation_ppo.yaml", "success"),
    "AirCombat": ("launch/configs/air_combat_ppo.yaml", "win"),
    "AliceBob": ("launch/configs/alice_bob_mappo.yaml", "success"),
}


class CurveRecorder:
    """A :class:`rl_system.run.loop.RoundReporter` that keeps ``(env_steps, wall_s, mean return,
    outcome rate)`` after every round; ``wall_s`` counts from the first round's start."""

    stop_requested = False

    def __init__(self, outcome: str | None):
        self.outcome, self.curve = outcome, []
        self._t0: float | None = None

    def checkpoint_due(self, steps_before: int, steps_now: int) -> bool:
        return False

    def after_round(self, run: Any, checkpointed: bool, last: bool = False) -> None:
        if last:
            return
        now = time.perf_counter()
        if self._t0 is None:  # the first round has just ended: its time is already spent
            self._t0 = now - run.stats.time_round
        w = run.window
        rate = w.rates.get(self.outcome, math.nan) if self.outcome else math.nan
        self.curve.append((run.stats.env_steps, now - self._t0, w.mean if w.returns else math.nan, rate))


def ours(cfg: RunConfig, outcome: str | None, run_dir: Path) -> dict[str, Any]:
    rec = CurveRecorder(outcome)
    s = RunLoop(cfg, run_dir, log_level="warning", reporter=rec).run()
    steps, wall = rec.curve[-1][:2] if rec.curve else (0, 0.0)
    return {"peer": "rl_system", "env_steps": steps, "wall_s": wall, "build_s": s.startup_s,
            "steps_per_s": steps / wall if wall else math.nan, "curve": rec.curve}


def at_steps(curve: list[tuple], steps: int) -> tuple:
    """The curve's first point at or past ``steps`` env steps (its last if none)."""
    return next((p for p in curve if p[0] >= steps), curve[-1]) if curve else (0, math.nan, math.nan, math.nan)


def first_reaching(curve: list[tuple], level: float, index: int) -> tuple | None:
    return next((p for p in curve if not math.isnan(p[index]) and p[index] >= level), None)


def run_env(name: str, seconds: float, seed: int, root: Path) -> list[dict[str, Any]]:
    from bench.peers import rllib_builtin

    path, outcome = ENVS[name]
    cfg = load_config(path, [f"seed={seed}", f"max_wall_s={seconds}", "tensorboard=false", "log_every_s=1000",
                             "checkpoint.every_rounds=0", "stop_at_target=false", "max_env_steps=1000000000"])
    rows = [ours(cfg, outcome, root / name)]
    rows.append(rllib_builtin.run(cfg, seconds, outcome))
    for r in rows:
        r["env"], r["outcome"] = name, outcome
        r["final"] = r["curve"][-1] if r["curve"] else (0, math.nan, math.nan, math.nan)
    return rows


def _f(v: float, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    """One line per (env, peer); then, per env, rl_system at RLlib's env steps and its wall time to
    RLlib's final level."""
    head = (f"{'env':<11} {'peer':<10} {'start-up s':>10} {'train s':>8} {'env steps':>12} {'steps/s':>9} "
            f"{'return':>9} {'outcome':>12}")
    out = [head, "-" * len(head)]
    for r in rows:
        steps, wall, ret, rate = r["final"]
        oc = f"{r['outcome']} {_f(rate, '.2f')}" if r["outcome"] else "-"
        out.append(f"{r['env']:<11} {r['peer']:<10} {r['build_s']:>10.1f} {wall:>8.1f} {steps:>12,} "
                   f"{_f(r['steps_per_s'], ',.0f'):>9} {_f(ret, '.2f'):>9} {oc:>12}")
    out.append("")
    for ours_row, peer in zip(rows[::2], rows[1::2]):
        p_steps, _, p_ret, p_rate = peer["final"]
        o = at_steps(ours_row["curve"], p_steps)
        index, level = (3, p_rate) if peer["outcome"] and not math.isnan(p_rate) else (2, p_ret)
        what = f"{peer['outcome']} rate" if index == 3 else "return"
        first = ours_row["curve"][0][index] if ours_row["curve"] else math.nan
        hit = first_reaching(ours_row["curve"], level, index) if not math.isnan(level) else None
        if hit and not first < level:  # nothing to learn to get there: no time to report
            reach = f"at or above RLlib's final {what} {_f(level, '.2f')} from its first round"
        elif hit:
            reach = f"reached RLlib's final {what} {_f(level, '.2f')} after {hit[1]:.1f} s ({hit[0]:,} steps)"
        else:
            reach = f"did not reach RLlib's final {what} {_f(level, '.2f')}"
        out.append(f"{ours_row['env']}: rl_system at RLlib's {p_steps:,} env steps: return {_f(o[2], '.2f')}"
                   + (f", {peer['outcome']} {_f(o[3], '.2f')}" if peer["outcome"] else "") + f"; {reach}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", nargs="+", choices=list(ENVS), default=list(ENVS))
    ap.add_argument("--seconds", type=float, default=120.0, help="training wall time per env and peer")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    # As `rl-system train` starts it: with at least the CPUs the actors ask for (rounds are synchronous).
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, 3), include_dashboard=False, log_to_driver=False)
    from rl_system.rllib import register

    register()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_rllib_envs_") as tmp:
        for name in args.envs:
            rows += run_env(name, args.seconds, args.seed, Path(tmp))
            print(table(rows[-2:]), flush=True)
    print(f"\nRLlib PPO beside rl_system, {args.seconds:.0f} s of training each, seed {args.seed}\n")
    print(table(rows))
    ray.shutdown()


if __name__ == "__main__":
    main()
