"""Gymnasium MuJoCo beside Stable-Baselines3: rl_system's shipped configs
(``launch/configs/{halfcheetah,hopper}_ppo.yaml``) and SB3 PPO with the RL Zoo's tuned settings
(:mod:`bench.peers.sb3_ppo`), run one after the other in the same process tree on the same
machine, seed by seed, and the env stepping cost on its own.

For every run the curve (env steps, wall seconds since training started, mean return of the last
100 finished training episodes) is kept. The table gives per env and peer: the final mean return
at the budget, the wall time and steps/s, and the wall time to reach the *common return* -- the
lower of the peers' mean final returns -- which is the "same return" all reach.

    python -m bench.bench_mujoco                                  # both envs, seeds 0 1 2, 1M steps
    python -m bench.bench_mujoco --envs Hopper-v5 --seeds 0 --steps 300000
    python -m bench.bench_mujoco --only stepping                  # the env stepping table alone
    python -m bench.bench_mujoco --envs Hopper-v5 --peers rl_system --set max_policy_lag=1 --tag lag1
    python -m bench.bench_mujoco --from-runs RUNS... [--timing-runs RERUNS...] --only training

Writes one ``.json.xz`` per run (``<peer>_<env>_s<seed>``: its curve and figures) and
``mujoco.{json,md}`` (the stamp, the runs' files, the tables) to ``--out`` (default
``bench/results/mujoco``). Needs
``pip install 'rl-system[bench]'`` (gymnasium[mujoco], stable-baselines3).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.learning import BACKENDS, first_at, read_ours, read_run
from bench.harness.results import RESULTS, run_index, write_run, write_suite
from bench.harness.stamp import stamp, version

CONFIGS = {"HalfCheetah-v5": "launch/configs/halfcheetah_ppo.yaml", "Hopper-v5": "launch/configs/hopper_ppo.yaml"}
REFERENCE = "sb3_zoo"


# -- runs ----------------------------------------------------------------------------------------


def run_ours(env_id: str, steps: int, seed: int, run_root: Path, peer: str = "rl_system",
             overrides: list[str] = (), tag: str | None = None) -> dict[str, Any]:
    """One run of the shipped config (with ``overrides``); a ``tag`` names the variant: its peer
    label is ``<peer>_<tag>``, so its rows and files stand apart from the shipped config's."""
    from rl_system.config import load_config
    from rl_system.run.loop import train

    cfg = load_config(CONFIGS[env_id], [f"seed={seed}", f"max_env_steps={steps}", "log_every_s=30",
                                        "checkpoint.every_rounds=0", f"env.name={BACKENDS[peer]}{env_id}",
                                        *overrides])
    label = f"{peer}_{tag}" if tag else peer
    run_dir = run_root / f"{env_id}-s{seed}" if label == "rl_system" else run_root / f"{env_id}-{label}-s{seed}"
    train(cfg, run_dir=run_dir, quiet=True)
    row = read_ours(run_dir)
    return {**row, "peer": label, "overrides": list(overrides)} if tag else row


def run_sb3(env_id: str, steps: int, seed: int) -> dict[str, Any]:
    from bench.peers.sb3_ppo import run

    return run(env_id, steps, seed)


# -- env stepping ----------------------------------------------------------------------------------


def _steps_per_s(env: Any, low: Any, high: Any, num_envs: int, steps: int) -> float:
    """Env steps/s of a reset vector env stepped ``steps`` times with uniform random actions in
    ``[low, high]`` (drawn beforehand, so only stepping is timed); closes ``env``."""
    import numpy as np

    actions = np.random.default_rng(0).uniform(low, high, size=(64, num_envs, *low.shape)).astype(np.float32)
    start = time.perf_counter()
    for t in range(steps):
        env.step(actions[t % 64])
    rate = steps * num_envs / (time.perf_counter() - start)
    env.close()
    return rate


def stepping(env_id: str, num_envs: int, mode: str, steps: int = 2000) -> float:
    """Env steps/s of ``gymnasium.make_vec(env_id, num_envs, mode)`` with random actions."""
    import gymnasium

    env = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode,
                             vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP})
    env.reset(seed=0)
    space = env.single_action_space
    return _steps_per_s(env, space.low, space.high, num_envs, steps)


def stepping_envpool(env_id: str, num_envs: int, threads: int, steps: int = 2000) -> float:
    """Env steps/s of an EnvPool batch of ``env_id`` (synchronous: ``batch_size = num_envs``)."""
    import envpool

    env = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, num_threads=threads,
                       seed=0)
    env.reset()
    return _steps_per_s(env, env.action_space.low, env.action_space.high, num_envs, steps)


def stepping_table(envs: list[str]) -> list[dict[str, Any]]:
    """Gymnasium's sync and async vector envs at N = 1, 4, 8, and EnvPool where installed."""
    try:
        import envpool  # noqa: F401
    except ImportError:
        envpool = None
    rows = []
    for env_id in envs:
        cases = [("sync", n) for n in (1, 4, 8)] + [("async", n) for n in (4, 8)]
        cases += [(f"envpool {t} thread{'s' if t > 1 else ''}", n) for t in (1, 2) for n in (4, 8)] if envpool else []
        for mode, n in cases:
            steps = max(500, 4000 // n)
            rate = (stepping_envpool(env_id, n, int(mode.split()[1]), steps) if mode.startswith("envpool")
                    else stepping(env_id, n, mode, steps))
            rows.append({"env": env_id, "mode": mode, "num_envs": n, "steps_per_s": rate})
            print(f"  stepping {env_id} {mode} N={n}: {rate:,.0f} env steps/s", flush=True)
    return rows


# -- report -----------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """The stamp (date, commit, CPU, versions) plus the MuJoCo and SB3 versions."""
    meta = stamp("mujoco")
    return {**meta, "date": meta["date_utc"], "cpu": f"{meta['cores']} x {meta['cpu']}",
            "sb3": version("stable_baselines3")}


def run_file(out: Path, row: dict[str, Any]) -> Path:
    """Where a run's row is kept: ``<peer>_<env>_s<seed>`` (SB3's as ``sb3_...``), ``.json.xz``."""
    peer = "sb3" if row["peer"] == REFERENCE else row["peer"]
    return out / f"{peer}_{row['env']}_s{row['seed']}"


def summarise(runs: list[dict[str, Any]], timing: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One row per (env, peer) with the common return and the times to it. A ``timing`` run (the
    same env, peer and seed rerun, possibly to part of the budget, on a quieter machine) replaces
    that seed's curve for the time to the common return only; final returns stay the full runs'."""
    rows = []
    rerun = {(r["env"], r["peer"], r["seed"]): r for r in timing}
    for env_id in sorted({r["env"] for r in runs}):
        mine = [r for r in runs if r["env"] == env_id]
        finals = {p: statistics.fmean(r["final_return"] for r in mine if r["peer"] == p)
                  for p in sorted({r["peer"] for r in mine})}
        common = min(finals.values())
        for peer, mean_final in finals.items():
            its = [r for r in mine if r["peer"] == peer]
            timed = [rerun.get((env_id, peer, r["seed"]), r) for r in its]
            hits = [first_at(r["curve"], common) for r in timed]
            walls = [h[1] for h in hits if h is not None]
            # SB3's curve rows carry CPU seconds too: its time alone on a machine, under any load.
            cpus = [h[3] for h in hits if h is not None and len(h) > 3]
            rows.append({"env": env_id, "peer": peer, "seeds": [r["seed"] for r in its],
                         "final_returns": [round(r["final_return"], 1) for r in its], "final_mean": mean_final,
                         "wall_s": statistics.fmean(r["train_wall_s"] for r in its),
                         "cpu_s": statistics.fmean(r["train_cpu_s"] for r in its) if all("train_cpu_s" in r for r in its)
                         else None,
                         "steps_per_s": statistics.fmean(r["env_steps"] / r["train_wall_s"] for r in its),
                         "common_return": common, "reached": f"{len(walls)}/{len(its)}",
                         "times_from_reruns": sorted(t["seed"] for t, r in zip(timed, its) if t is not r),
                         "times_to_common_s": [None if h is None else round(h[1], 1) for h in hits],
                         "time_to_common_s": statistics.median(walls) if walls else None,
                         "cpu_to_common_s": statistics.median(cpus) if cpus else None})
    return rows


def level_rows(runs: list[dict[str, Any]], timing: list[dict[str, Any]], levels: list[float]) -> list[dict[str, Any]]:
    """Time to each of ``levels`` (training returns) per env and peer: how the speed ratio moves with
    the return, where the common return alone depends on one low or collapsed seed. A peer's time is
    its CPU seconds where its curve has them (SB3: its time alone on a machine), else wall seconds;
    ``ratio`` is the other peer's median over ours, given only when every seed of both reached it.
    A ``timing`` rerun's curve stands for its seed here too, so a rerun to part of the budget
    shows only the levels reached within it. With both rl_system backends in the runs, ``ratios``
    holds one ratio per backend (``ratio`` stays the Gymnasium one's)."""
    rerun = {(r["env"], r["peer"], r["seed"]): r for r in timing}
    rows = []
    for env_id in sorted({r["env"] for r in runs}):
        mine = [rerun.get((env_id, r["peer"], r["seed"]), r) for r in runs if r["env"] == env_id]
        for level in levels:
            row: dict[str, Any] = {"env": env_id, "return": level, "peers": {}}
            for peer in sorted({r["peer"] for r in mine}):
                times = []
                for r in (r for r in mine if r["peer"] == peer):
                    hit = first_at(r["curve"], level)
                    times.append(None if hit is None else (hit[3] if len(hit) > 3 else hit[1]))
                got = [t for t in times if t is not None]
                row["peers"][peer] = {"reached": f"{len(got)}/{len(times)}", "all": len(got) == len(times),
                                      "median_s": statistics.median(got) if got else None,
                                      "clock": "CPU" if any(len(r["curve"][0]) > 3 for r in mine if r["peer"] == peer)
                                      else "wall"}
            ref = row["peers"].get(REFERENCE)
            row["ratios"] = {p: ref["median_s"] / v["median_s"] if ref and ref["all"] and v["all"] else None
                             for p, v in row["peers"].items() if p != REFERENCE}
            row["ratio"] = row["ratios"].get("rl_system")
            rows.append(row)
    return rows


def level_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The ``level_rows`` table."""
    if not rows:
        return []
    # Peers over all envs (an env may lack one: its cells are "—").
    peers = sorted({p for r in rows for p in r["peers"]})
    ours = sorted({p for r in rows for p in r["ratios"]})
    heads = ["ratio"] if ours == ["rl_system"] else [f"ratio, {p}" for p in ours]
    lines = ["Time to each training return (median over the seeds that reached it; SB3 in CPU seconds):", "",
             "| env | return | " + " | ".join(f"{p}: reached, median s" for p in peers) + " | " + " | ".join(heads) + " |",
             "|---|---:|" + "---|" * len(peers) + "---:|" * len(heads)]
    for r in rows:
        cells = ["—" if v is None else f"{v['reached']}, " +
                 ("—" if v["median_s"] is None else f"{v['median_s']:.0f} {v['clock']} s")
                 for v in (r["peers"].get(p) for p in peers)]
        cells += [f"{x:.1f}×" if x is not None else "—" for x in (r["ratios"].get(p) for p in ours)]
        lines.append(f"| {r['env']} | {r['return']:.0f} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], step_rows: list[dict[str, Any]], argv: str,
             levels: list[dict[str, Any]] = ()) -> str:
    lines = [f"# Gymnasium MuJoCo: rl_system beside Stable-Baselines3 ({meta['date']}, commit {meta['commit']})", "",
             f"`{argv}` on {meta['cpu']}; Python {meta['python']}, torch {meta['torch']}, Ray {meta['ray']}, "
             f"Gymnasium {meta['gymnasium']}, MuJoCo {meta['mujoco']}, SB3 {meta['sb3']}.", ""]
    if rows:
        lines += ["| env | peer | seeds | final mean return (per seed) | wall s (CPU s) | env steps/s | common return | "
                  "reached | median time to it [per seed] |", "|---|---|---|---|---:|---:|---:|---|---:|"]
        for r in rows:
            ttc = f"{r['time_to_common_s']:.0f} s" if r["time_to_common_s"] is not None else "—"
            if r.get("cpu_to_common_s") is not None:
                ttc += f" ({r['cpu_to_common_s']:.0f} CPU s)"
            if len(r.get("times_to_common_s", [])) > 1:
                ttc += " [" + ", ".join("—" if t is None else f"{t:.0f}" for t in r["times_to_common_s"]) + "]"
            if r.get("times_from_reruns"):
                ttc += f" (seeds {', '.join(map(str, r['times_from_reruns']))}: reruns)"
            cpu = f" ({r['cpu_s']:.0f})" if r.get("cpu_s") is not None else ""
            lines.append(f"| {r['env']} | {r['peer']} | {' '.join(map(str, r['seeds']))} | {r['final_mean']:.0f} "
                         f"({', '.join(f'{x:.0f}' for x in r['final_returns'])}) | {r['wall_s']:.0f}{cpu} | "
                         f"{r['steps_per_s']:,.0f} | {r['common_return']:.0f} | {r['reached']} | {ttc} |")
        lines.append("")
    lines += level_markdown(list(levels))
    if step_rows:
        lines += ["Env stepping alone (random actions, `gymnasium.make_vec`):", "",
                  "| env | vectorization | N | env steps/s |", "|---|---|---:|---:|"]
        lines += [f"| {r['env']} | {r['mode']} | {r['num_envs']} | {r['steps_per_s']:,.0f} |" for r in step_rows]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--peers", nargs="+", default=["rl_system", REFERENCE], choices=[*BACKENDS, REFERENCE],
                    help="rl_system_envpool: the same configs on EnvPool's MuJoCo (pip install 'rl-system[envpool]')")
    ap.add_argument("--only", choices=["training", "stepping"], default=None)
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="PATH",
                    help="build the table from finished runs instead of training: rl_system run dirs, the "
                         "per-run files this suite writes and bench.peers.sb3_ppo --json files")
    ap.add_argument("--timing-runs", nargs="+", type=Path, default=[], metavar="PATH",
                    help="with --from-runs: reruns of some seeds (run dirs or per-run files, possibly to part of "
                         "the budget) whose curves replace those seeds' for the time to the common return only")
    ap.add_argument("--levels", nargs="+", type=float, default=[], metavar="RETURN",
                    help="also print the time to each of these training returns, per env (with --from-runs "
                         "or after training)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of rl_system's configs (repeatable; recorded in the run's file)")
    ap.add_argument("--tag", default=None,
                    help="names runs trained with --set: peer rl_system_<tag>, files rl_system_<tag>_<env>_s<seed>")
    ap.add_argument("--out", type=Path, default=RESULTS / "mujoco")
    args = ap.parse_args()
    if args.set and not args.tag:
        ap.error("--set needs --tag: runs with overrides must not replace the shipped configs' files")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = machine()
    runs: list[dict[str, Any]] = []
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs]
    elif args.only != "stepping":
        run_root = args.out / "runs"
        for env_id in args.envs:
            for seed in args.seeds:
                for peer in args.peers:
                    print(f"{env_id} seed {seed}: {peer} ...", flush=True)
                    r = run_ours(env_id, args.steps, seed, run_root, peer, args.set, args.tag) if peer in BACKENDS else \
                        run_sb3(env_id, args.steps, seed)
                    r["source"] = str(write_run(run_file(args.out, r), r))
                    runs.append(r)
                    print(f"  {peer}: final {r['final_return']:.0f} in {r['train_wall_s']:.0f}s", flush=True)
    step_rows = stepping_table(args.envs) if args.only != "training" else []
    timing = [read_run(p) for p in args.timing_runs]
    rows = summarise(runs, timing) if runs else []
    levels = level_rows(runs, timing, args.levels) if runs else []
    text = markdown(meta, rows, step_rows, "python -m bench.bench_mujoco " + " ".join(sys.argv[1:]), levels)
    write_suite(args.out, "mujoco", {"meta": meta, "runs": run_index(runs, args.out),
                                     "timing_runs": run_index(timing, args.out), "summary": rows,
                                     "levels": levels, "stepping": step_rows}, text)
    print(text)

if __name__ == "__main__":
    main()
