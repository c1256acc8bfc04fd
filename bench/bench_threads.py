"""The learner's torch threads and OpenMP's wait policy, on an idle machine and on a shared one:
each config's update timed with 1 and 2 threads under each wait policy, first with the machine to
itself and then with each of ``--hogs`` other processes spinning on one core (a Python busy loop:
what another job, a test run or a browser tab does to a laptop's cores).

    python -m bench.bench_threads [--configs NAME ...] [--variants NAME ...] [--hogs 0 1]
                                  [--repeats 3] [--set KEY=VALUE ...] [--runs] [--out DIR]

Every cell is ``python -m bench.bench_update --configs CONFIG --threads T --repeats R`` in a fresh
process (OpenMP reads its wait policy once, at start-up) with the variant's environment; the cell
is that run's median update. The update is the config's own (its ``learner.gradients``), not
bench_update's autograd default. ``--runs`` makes each cell whole ``rl-system train`` runs instead
(``--repeats`` of them, the variants in turn), on the performance gate's budget for the config
(:data:`bench.perf_gate.CASES`): env steps/s and the update's seconds per round, as a user gets
them, with the run's other processes (workers, checkpointer, Ray's daemons) beside the learner. Torch's CPU wheels run their intra-op parallelism on GNU OpenMP:
a thread that reaches a barrier first spins ``GOMP_SPINCOUNT`` times before it sleeps (300,000
by default, none under ``OMP_WAIT_POLICY=PASSIVE``, without end under ``ACTIVE``). Spinning wakes
a partner at once, so small parallel regions stay cheap; on a core another process holds it burns
the time slice its partner needs.

Prints a table per config and writes ``threads.json`` / ``threads.md`` (``threads_runs`` with
``--runs``) to ``--out`` (default ``bench/results/threads/``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.learning import read_summary, train_command
from bench.harness.markdown import md_table, num
from bench.harness.results import RESULTS, command_line, write_suite
from bench.harness.stamp import ROOT, load1, stamp, stamp_line

VARIANTS: dict[str, tuple[int, dict[str, str]] | tuple[int, dict[str, str], tuple[str, ...]]] = {
    "1 thread": (1, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "2 threads, passive": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "2 threads, spin 10k": (2, {"GOMP_SPINCOUNT": "10000"}),
    "2 threads, spin 300k (libgomp's default)": (2, {"GOMP_SPINCOUNT": "300000"}),
    "2 threads, active": (2, {"OMP_WAIT_POLICY": "ACTIVE"}),
    "2 threads, rl_system's choice": (2, {}),
    "1 thread, critic on a second thread": (1, {}, ("learner.head_threads=2",)),
    "1 thread, heads by rl_system's choice": (1, {}, ("learner.head_threads=auto",)),
}
"""Each variant: its torch threads, OpenMP's environment (the variables not named are unset) and
config overrides (``learner.head_threads``: the closed-form update's critic on its own thread;
"1 thread" keeps it on one, its passive environment telling ``auto`` so). rl_system's choices
(:mod:`rl_system.openmp`) are made by the command line, so only whole runs (``--runs``) have them."""
CHOSEN = "2 threads, rl_system's choice"
OPENMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
DEFAULT_CONFIGS = ["cartpole_ppo_throughput", "minatar_breakout_ppo", "vmas_balance_mappo", "alice_bob_hmasd"]
HOG = "while True: pass"


def shipped_gradients(config: str) -> str:
    """The ``learner.gradients`` that ``config`` ships (bench_update times autograd unless told)."""
    from rl_system.config import load_config

    return load_config(str(ROOT / "launch" / "configs" / f"{config}.yaml")).learner.gradients


def update_cell(config: str, threads: int, env: dict[str, str], repeats: int, sets: list[str]) -> dict[str, Any]:
    """One bench_update run in a fresh process: its median update, every update, the wall s."""
    with tempfile.TemporaryDirectory(prefix="bench_threads_") as tmp:
        cmd = [sys.executable, "-m", "bench.bench_update", "--configs", config, "--threads", str(threads),
               "--repeats", str(repeats), "--out", tmp, *(a for kv in sets for a in ("--set", kv))]
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=variant_env(env), check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        result = json.loads(next(Path(tmp).glob("update_*.json")).read_text())
    row = result["rows"][0]
    if "skipped" in row:
        raise SystemExit(f"bench_threads: {config}: {row['skipped']}")
    return {"update_s": row["update_s"], "times": row["times"], "samples": row["samples"], "process_wall_s": wall}


def variant_env(env: dict[str, str]) -> dict[str, str]:
    """This process's environment with OpenMP's variables as the variant sets them, and no others."""
    return {**{k: v for k, v in os.environ.items() if k not in OPENMP_VARS}, **env}


def run_cell(config: str, threads: int, env: dict[str, str], sets: list[str], present: set[int]) -> dict[str, Any]:
    """One whole ``rl-system train`` of ``config`` on the gate's budget: env steps/s, update s per round.
    It starts once the Ray processes of the run before it are gone (``present``: those that were
    there before the bench), as a user's run would: their teardown is load that the run's choice
    of wait policy would see."""
    from bench.bench_startup import wait_for_quiet
    from bench.perf_gate import CASES

    wait_for_quiet(present)
    budget = next((list(c.sets) for c in CASES if c.config == f"{config}.yaml"), [])
    with tempfile.TemporaryDirectory(prefix="bench_threads_") as tmp:
        cmd = train_command(sys.executable, ROOT / "launch" / "configs" / f"{config}.yaml", Path(tmp, "run"),
                            [*budget, f"learner.torch_threads={threads}", *sets])
        subprocess.run(cmd, cwd=tmp, env=variant_env(env), check=True, capture_output=True, text=True)
        s = read_summary(Path(tmp, "run"))
    update = s["time_breakdown_s"]["update"] / s["rounds"]
    return {"update_s": update, "steps_per_s": s["steps_per_s"], "learner_cpu_s": s["cpu_s"]["learner"],
            "rounds": s["rounds"], "samples": s["env_steps"] // s["rounds"]}


def measure(configs: list[str], variants: list[str], hogs: list[int], repeats: int, sets: list[str],
            runs: bool = False) -> list[dict[str, Any]]:
    """A row per (config, hogs, variant); under each number of hogs, every config's variants in turn
    (with ``runs``, ``repeats`` whole runs of each, the variants alternating)."""
    from bench.bench_startup import ray_pids

    rows, present = [], ray_pids()
    grads = {c: shipped_gradients(c) for c in configs}
    for n in hogs:
        spinners = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]
        try:
            for config in configs:
                mine = {name: {"config": config, "hogs": n, "variant": name, "threads": VARIANTS[name][0],
                               "env": VARIANTS[name][1], "cells": [], "load_1m_before": load1()} for name in variants}
                for i in range(repeats if runs else 1):
                    for name in (variants if i % 2 == 0 else variants[::-1]):
                        threads, env, *more = VARIANTS[name]
                        own = [*(more[0] if more else ()), *sets]
                        cell = (run_cell(config, threads, env, own, present) if runs else
                                update_cell(config, threads, env, repeats, [f"learner.gradients={grads[config]}", *own]))
                        mine[name]["cells"].append(cell)
                        print(f"{config} | hogs {n} | {name}: update {cell['update_s']:.3f} s"
                              + (f", {cell['steps_per_s']:,.0f} env steps/s" if runs else ""), flush=True)
                for row in mine.values():
                    rows.append(summarise(row, runs))
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    return rows


def summarise(row: dict[str, Any], runs: bool) -> dict[str, Any]:
    """A row's figures: bench_update's own cell, or the median of its runs (and each run's)."""
    cells = row.pop("cells")
    row["load_1m_after"] = load1()
    if not runs:
        return {**row, **cells[0]}
    return {**row, "samples": cells[0]["samples"], "times": [c["update_s"] for c in cells],
            "update_s": statistics.median(c["update_s"] for c in cells),
            "steps_per_s": statistics.median(c["steps_per_s"] for c in cells),
            "each_steps_per_s": [c["steps_per_s"] for c in cells]}


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], command: str, runs: bool = False) -> str:
    out = [f"# The learner's threads and OpenMP's wait policy ({meta['date_utc']}, commit {meta['commit']})", "",
           f"`{command}`", "", stamp_line(meta), ""]
    header = ["other processes spinning", "variant", "update (median)", "each", "against 1 thread",
              *(["env steps/s (median)", "each"] if runs else []), "load before → after"]
    for config in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["config"] == config]
        base = {r["hogs"]: r["update_s"] for r in mine if r["variant"] == "1 thread"}
        body = [[r["hogs"], r["variant"], f"{num(r['update_s'] * 1e3, 1)} ms",
                 " · ".join(num(t * 1e3, 1) for t in r["times"]),
                 f"{r['update_s'] / base[r['hogs']]:.2f}×" if r["hogs"] in base else "–",
                 *([num(r["steps_per_s"]), " · ".join(num(x) for x in r["each_steps_per_s"])] if runs else []),
                 f"{num(r['load_1m_before'], 1)} → {num(r['load_1m_after'], 1)}"] for r in mine]
        what = "env steps a round" if runs else "samples an update"
        out += [f"## `{config}` ({mine[0]['samples']:,} {what})", "", *md_table(header, body), ""]
    out.append(("Whole `rl-system train` runs on the performance gate's budget (`bench.perf_gate`), the variants "
                "alternating; the update is the run's seconds per round." if runs else
                "One update of each config's batch with its own gradients, `bench.bench_update` in a fresh process "
                "per cell.") + " Each other process is a Python busy loop on one core. Spin counts are "
               "`GOMP_SPINCOUNT` with `OMP_WAIT_POLICY` unset; passive and active are `OMP_WAIT_POLICY`.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS), metavar="NAME",
                    help=f"of: {', '.join(repr(v) for v in VARIANTS)} (default: all)")
    ap.add_argument("--hogs", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--runs", action="store_true", help="whole rl-system train runs instead of bench_update's updates")
    ap.add_argument("--out", type=Path, default=RESULTS / "threads")
    args = ap.parse_args(argv)
    if CHOSEN in args.variants and not args.runs:
        if args.variants != list(VARIANTS):
            ap.error(f"{CHOSEN!r} is made by the command line: only --runs has it")
        args.variants = [v for v in args.variants if v != CHOSEN]
    meta, command = stamp(), command_line("python -m bench.bench_threads", argv)
    rows = measure(args.configs, args.variants, args.hogs, args.repeats, args.set, args.runs)
    meta["load_1m_after"] = load1()
    text = markdown(meta, rows, command, args.runs)
    write_suite(args.out, "threads_runs" if args.runs else "threads",
                {"meta": meta, "configs": args.configs, "set": args.set, "runs": args.runs, "rows": rows}, text)
    print(text)
    return text


if __name__ == "__main__":
    main()
