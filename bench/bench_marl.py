"""VMAS multi-agent PPO beside BenchMARL: for each task and seed, BenchMARL's MAPPO with its
fine-tuned VMAS settings (:mod:`bench.peers.benchmarl_mappo`) and rl_system's
``launch/configs/vmas_<task>_mappo.yaml`` (the same settings mapped onto rl_system's), at the same
frame budget, one after the other on the same machine, each in a subprocess of its own.

The table gives per task, seed and system:

* the final evaluation return: the agents' mean episode return over 200 episodes with
  deterministic actions (BenchMARL: its last ``eval/agents/reward/episode_reward_mean``;
  rl_system: ``rl-system eval --deterministic --episodes 200`` of the final checkpoint);
* the final training return: the agents' mean return of the episodes of the last batch, with
  the actions as sampled (BenchMARL: ``collection/agents/reward/episode_reward_mean``; rl_system:
  ``rollout/return_mean`` over the round's 600 episodes), and rl_system's wall time to
  BenchMARL's final training return (the first round whose training return reaches it);
* the training wall time (from the first batch to the end; BenchMARL's includes its evaluation
  after every batch, given apart) and env steps/s with learning (BenchMARL's evaluation time left
  out);
* the whole subprocess (start-up, Ray, the run, shutdown): wall s, CPU s of the process tree
  (``getrusage(RUSAGE_CHILDREN)``; this process is made the children's subreaper so that Ray's
  processes count too) and cores busy (CPU s / wall s).

    python -m bench.bench_marl                                   # balance and transport, seed 0, 3M frames
    python -m bench.bench_marl --tasks balance --seeds 0 1 --frames 300000
    python -m bench.bench_marl --from-runs bench/results/marl/*.json.xz   # the table again

Writes one ``.json.xz`` per run (``<system>_<task>_s<seed>``: curves and figures) and
``marl.{json,md}`` (the stamp, the runs' files, the table) to ``--out`` (default
``bench/results/marl``). Needs ``pip install 'rl-system[bench,vmas]'`` (BenchMARL, VMAS).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.learning import first_at, read_ours, read_run
from bench.harness.markdown import md_table, num, steps
from bench.harness.results import RESULTS, command_line, run_index, write_run, write_suite
from bench.harness.stamp import ROOT, load1, stamp, stamp_line, version, where_it_ran

CONFIGS = {"balance": "launch/configs/vmas_balance_mappo.yaml", "transport": "launch/configs/vmas_transport_mappo.yaml"}
FRAMES_PER_BATCH = 60_000
"""One BenchMARL batch and one rl_system round: budgets are multiples of it."""
EVAL_EPISODES = 200
"""BenchMARL's fine-tuned ``evaluation_episodes``; rl_system's final policy is tested on as many."""
SYSTEMS = ("benchmarl_mappo", "rl_system")
PR_SET_CHILD_SUBREAPER = 36


# -- processes -------------------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux): Ray's processes, orphaned when
    their parent exits, are then reaped here and their CPU time reaches ``RUSAGE_CHILDREN``."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def reap_orphans(timeout_s: float = 30.0) -> tuple[dict[str, float], list[str]]:
    """Wait for the descendants left behind (Ray's, after its driver exits), up to ``timeout_s``:
    ``({name: CPU s of the reaped processes of that name}, names of those still running)``."""
    reaped: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            # Peek first (WNOWAIT) so that the zombie's name can still be read, then reap it.
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped, []
        if info is None:
            time.sleep(0.2)
            continue
        name = _comm(info.si_pid)
        _, _, usage = os.wait4(info.si_pid, 0)
        reaped[name] = reaped.get(name, 0.0) + _cpu(usage)
    left = [_comm(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == os.getpid()]
    return reaped, left


def _ppid(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def run_child(cmd: list[str], log: Path) -> dict[str, Any]:
    """Run ``cmd`` (output to ``log``), raise on failure; its wall s, the CPU s of its process tree,
    and where that CPU went: the command itself (with the descendants it waited for) and the
    orphans reaped here, by name, and any still running after the wait (their CPU is missing)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    reaped, left = reap_orphans()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}; the end of {log}:\n{tail}")
    return {"process_wall_s": wall, "process_cpu_s": _cpu(after) - _cpu(before),
            "cpu_by_process": {"command": _cpu(usage), **reaped}, "still_running": left}


# -- runs ------------------------------------------------------------------------------------------


def run_benchmarl(task: str, frames: int, seed: int, work: Path) -> dict[str, Any]:
    """BenchMARL's MAPPO in a subprocess (:mod:`bench.peers.benchmarl_mappo`)."""
    out = work / f"benchmarl_{task}_s{seed}.json"
    proc = run_child([sys.executable, "-m", "bench.peers.benchmarl_mappo", "--task", task, "--frames", str(frames),
                      "--seed", str(seed), "--json", str(out)], work / f"benchmarl_{task}_s{seed}.log")
    return {**json.loads(out.read_text()), **proc}


def run_ours(task: str, frames: int, seed: int, work: Path) -> dict[str, Any]:
    """``rl-system train`` of the task's config in a subprocess, then a deterministic test of its
    final checkpoint over :data:`EVAL_EPISODES` episodes (in this process: not part of the run)."""
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.policy.evaluation import evaluate

    run_dir = work / f"rl_system_{task}_s{seed}"
    cmd = [sys.executable, "-m", "rl_system", "train", CONFIGS[task], "--quiet", "--run-dir", str(run_dir),
           "--set", f"seed={seed}", "--set", f"max_env_steps={frames}"]
    proc = run_child(cmd, work / f"rl_system_{task}_s{seed}.log")
    row = read_ours(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    state, _, _ = CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()
    test = evaluate(state, episodes=EVAL_EPISODES, deterministic=True, num_envs=EVAL_EPISODES)
    # "curve" stays the training curve (the harness's convention for rl_system rows); no evaluation
    # runs during training, so the final test is the one evaluation point.
    return {**row, "peer": "rl_system", "config": CONFIGS[task], "train_cpu_s": summary["cpu_s"]["total"],
            "startup_s": summary.get("startup_s"), "eval_wall_s": 0.0, "final_train_return": row["final_return"],
            "final_return": test["return_mean"], "test": test, "train_curve": row["curve"], **proc}


def run_file(out: Path, row: dict[str, Any]) -> Path:
    return out / f"{row['peer']}_{row['env'].removeprefix('vmas:')}_s{row['seed']}"


# -- the table -------------------------------------------------------------------------------------


def learning_rate(row: dict[str, Any]) -> float:
    """Env steps per wall second of learning (BenchMARL's evaluation time left out)."""
    wall = row["train_wall_s"] - row.get("eval_wall_s", 0.0)
    return row["env_steps"] / wall if wall > 0 else math.nan


def time_to(curve: list, level: float) -> float | None:
    """Wall s of the first curve row whose return reaches ``level``, or None."""
    hit = first_at(curve, level) if curve and level is not None and math.isfinite(level) else None
    return None if hit is None else hit[1]


def cpu_missed(r: dict[str, Any]) -> bool:
    """Less CPU for the whole process tree than the run counted in its own processes: some of them
    (Ray's actors) were reaped outside this process's view."""
    return bool(r.get("process_cpu_s") is not None and r.get("train_cpu_s") and r["process_cpu_s"] < r["train_cpu_s"])


def tree_cpu(r: dict[str, Any]) -> float:
    """The process tree's CPU s; where :func:`cpu_missed`, the tree as counted plus the run's own
    count (a lower bound: Ray's raylet and GCS are in neither)."""
    return r["process_cpu_s"] + (r["train_cpu_s"] if cpu_missed(r) else 0.0)


def table_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run, ordered by task, seed and system; rl_system's carry the time to BenchMARL's
    final training return of the same task and seed."""
    ref = {(r["env"], r["seed"]): r for r in runs if r["peer"] == "benchmarl_mappo"}
    rows = []
    for r in sorted(runs, key=lambda r: (r["env"], r["seed"], SYSTEMS.index(r["peer"]))):
        peer = ref.get((r["env"], r["seed"]))
        level = peer["final_train_return"] if peer is not None and r["peer"] == "rl_system" else None
        rows.append({"env": r["env"], "seed": r["seed"], "system": r["peer"], "env_steps": r["env_steps"],
                     "final_eval_return": r["final_return"], "final_train_return": r["final_train_return"],
                     "train_wall_s": r["train_wall_s"], "eval_wall_s": r.get("eval_wall_s", 0.0),
                     "steps_per_s": learning_rate(r), "level": level,
                     "time_to_level_s": time_to(r.get("train_curve", []), level) if level is not None else None,
                     "process_wall_s": r.get("process_wall_s"), "process_cpu_s": r.get("process_cpu_s"),
                     "run_cpu_s": r.get("train_cpu_s"), "cpu_missed": cpu_missed(r),
                     "cores_busy": tree_cpu(r) / r["process_wall_s"] if r.get("process_wall_s") else None,
                     "load": (r.get("load_1m_before"), r.get("load_1m_after"))})
    return rows


COLUMNS = (f"Returns are the agents' mean episode return: *eval* over {EVAL_EPISODES} episodes with deterministic "
           "actions after the last batch (BenchMARL's `eval/agents/reward/episode_reward_mean`; rl_system's final "
           "checkpoint under `rl-system eval --deterministic`), *training* over the last batch's episodes with "
           "sampled actions. Wall s: from the first batch to the end (BenchMARL's includes its evaluation after every "
           "batch, in parentheses, which env steps/s leaves out). Process: the whole subprocess, start-up and "
           "shutdown included; cores busy = its process tree's CPU s / its wall s. Load: the 1-minute load average "
           "before and after each run (other work shared the machine where it exceeds 2). \\*: the process tree as "
           "reaped here counted less CPU than the run counted in its own processes (rl_system's Ray actors were "
           "reaped out of this process's view), so the figure is the tree as counted + the run's own count "
           "(workers and learner), a lower bound: Ray's raylet and GCS are in neither.")
"""What the table's columns are, below it."""


def _wall(r: dict[str, Any]) -> str:
    return num(r["train_wall_s"]) + (f" ({num(r['eval_wall_s'])} eval)" if r["eval_wall_s"] else "")


def _cpu_cell(r: dict[str, Any]) -> str:
    if not r["cpu_missed"]:
        return num(r["process_cpu_s"])
    return f"≥ {num(r['process_cpu_s'] + r['run_cpu_s'])}* ({num(r['process_cpu_s'])} + {num(r['run_cpu_s'])})"


def _to_level(r: dict[str, Any]) -> str:
    if r["level"] is None:
        return "–"
    got = "not reached" if r["time_to_level_s"] is None else f"{num(r['time_to_level_s'])} s"
    return f"{got} (to {r['level']:.3f})"


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], command: str, run_commands: list[str] = ()) -> str:
    """The suite's Markdown: title, machine and command, the table, what the columns are;
    ``run_commands``: the commands that trained the runs, where the table was built from their files."""
    header = ["task", "seed", "system", "env steps", "final eval return", "final training return", "wall s",
              "env steps/s with learning", "time to BenchMARL's final training return", "process wall s",
              "process CPU s", "cores busy", "load before → after"]
    body = [[r["env"], r["seed"], r["system"], steps(r["env_steps"]), num(r["final_eval_return"], 3),
             num(r["final_train_return"], 3), _wall(r), num(r["steps_per_s"]), _to_level(r), num(r["process_wall_s"]),
             _cpu_cell(r), ("≥ " if r["cpu_missed"] else "") + num(r["cores_busy"], 2),
             " → ".join(num(x, 1) for x in r["load"])]
            for r in rows]
    where = (f"`{command}` on {meta.get('lscpu_model') or meta['cpu']} ({meta['cores']} cores); BenchMARL "
             f"{meta.get('benchmarl')}, TorchRL {meta.get('torchrl')}, VMAS {meta.get('vmas')}.")
    lines = [f"# VMAS: rl_system's MAPPO beside BenchMARL's ({meta['date_utc']}, commit {meta['commit']})", "",
             where, ""]
    if run_commands:  # the stamp is the table's; the runs' commits, dates and loads are their own
        lines += [f"Built {meta['date_utc']} at commit `{meta['commit']}` from stored runs, trained on this machine "
                  f"({meta['cpu']}, {meta['cores']} cores; Python {meta['python']}, torch {meta['torch']}, Ray "
                  f"{meta['ray']}) by " + "; ".join(run_commands) + ".", ""]
    else:
        lines += [stamp_line(meta), ""]
    lines += [*md_table(header, body), "", COLUMNS, ""]
    return "\n".join(lines)


def sittings(runs: list[dict[str, Any]]) -> list[str]:
    """Each command that trained some of ``runs``, with its commit and the dates its runs ended."""
    by: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        if r.get("command"):
            by.setdefault((r["command"], r.get("commit", "?")), []).append(r.get("date_utc", "?"))
    return [f"`{cmd}` (commit {commit}, runs ended {min(dates)}" + (f" to {max(dates)}" if len(set(dates)) > 1 else "")
            + ")" for (cmd, commit), dates in sorted(by.items())]


def lscpu_model() -> str | None:
    """``lscpu``'s model name, or None where lscpu is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), None)


def machine() -> dict[str, Any]:
    """The stamp plus the CPU as lscpu names it and the MARL libraries' versions."""
    return {**stamp("vmas"), "lscpu_model": lscpu_model(), "benchmarl": version("benchmarl"),
            "torchrl": version("torchrl"), "tensordict": version("tensordict")}


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--frames", type=int, default=3_000_000, help=f"a multiple of {FRAMES_PER_BATCH:,}")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="FILE",
                    help="build the table from the per-run files this suite wrote instead of training")
    ap.add_argument("--out", type=Path, default=RESULTS / "marl")
    args = ap.parse_args(argv)
    if args.frames % FRAMES_PER_BATCH:
        ap.error(f"--frames must be a multiple of {FRAMES_PER_BATCH:,} (one batch of both systems)")
    meta, command = machine(), command_line("python -m bench.bench_marl", argv)
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs]
    else:
        become_subreaper()
        runs = train_all(args.tasks, args.seeds, args.frames, args.systems, args.out, command)
    meta["load_1m_after"] = load1()
    rows = table_rows(runs)
    trained_by = sittings(runs) if args.from_runs else []
    text = markdown(meta, rows, command, trained_by)
    write_suite(args.out, "marl", {"meta": meta, "runs": run_index(runs, args.out), "table": rows}, text)
    print(text)
    return text


def train_all(tasks: list[str], seeds: list[int], frames: int, systems: list[str], out: Path,
              command: str) -> list[dict[str, Any]]:
    """Every task, seed and system in turn; each run's row written to ``out`` as it ends."""
    runs, code = [], where_it_ran()  # the code this sitting runs: HEAD now, whatever is committed later
    with tempfile.TemporaryDirectory(prefix="bench_marl_") as tmp:
        for task in tasks:
            for seed in seeds:
                for system in systems:
                    before = load1()
                    print(f"vmas:{task} seed {seed}: {system} ... (load {before})", flush=True)
                    run = run_benchmarl if system == "benchmarl_mappo" else run_ours
                    # Each run keeps the command and the load it ran under: a table may join runs of
                    # several sittings (--from-runs).
                    row = {**run(task, frames, seed, Path(tmp)), "command": command, "load_1m_before": before,
                           "load_1m_after": load1(), "date_utc": stamp()["date_utc"], **code}
                    row["source"] = str(write_run(run_file(out, row), row))
                    runs.append(row)
                    print(f"  final eval return {row['final_return']:.3f} in {row['train_wall_s']:.0f}s", flush=True)
    return runs


if __name__ == "__main__":
    main()
