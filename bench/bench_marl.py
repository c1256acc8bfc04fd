"""Multi-agent PPO beside BenchMARL: for each task and seed, at the same frame budget, one after
the other on the same machine, each in a subprocess of its own (``--systems``):

* ``benchmarl_mappo``: BenchMARL's MAPPO (:mod:`bench.peers.benchmarl_mappo`: its fine-tuned
  settings on VMAS balance and transport, its defaults on MPE simple_spread);
* ``benchmarl_mappo_our_settings``: BenchMARL's MAPPO with the hyperparameters of rl_system's
  config for the task (``--like``: what BenchMARL can take of them);
* ``rl_system``: rl_system's config for the task (:data:`CONFIGS`: BenchMARL's task, batch,
  network and discounting with rl_system's own update);
* ``rl_system_benchmarl_settings``: rl_system with BenchMARL's settings mapped onto it
  (:data:`BENCHMARL_CONFIGS`: its fine-tuned ones on VMAS, its defaults on MPE);
* ``rl_system_ippo``: the task's IPPO config (:data:`IPPO_CONFIGS`), else its config as IPPO
  (``--set mappo.central_value=per_agent --set mappo.critic=local``);
* ``rl_system_tanh``, ``rl_system_ippo_tanh``: ``rl_system`` and ``rl_system_ippo`` with continuous
  actions squashed into their bounds (``--set mappo.action_dist=tanh_normal``, as BenchMARL's TanhNormal);
* ``rl_system_value_norm``: ``rl_system`` with MAPPO's value normalisation (``--set mappo.value_norm=true``);
* ``random``: the task's random play (uniform random actions, :data:`EVAL_EPISODES` episodes, no
  training).

The table gives per task, seed and system:

* the final evaluation return: the agents' mean episode return over ``--eval-episodes`` episodes
  (default 200, BenchMARL's fine-tuned figure) with deterministic actions, and its standard error
  (BenchMARL: its last ``eval/reward/episode_reward_mean``, every evaluation of the run that many
  episodes; rl_system: ``rl-system eval --deterministic --episodes N`` of the final checkpoint;
  random: its N episodes);
* the final training return: the agents' mean return of the episodes of the last batch, with
  the actions as sampled (BenchMARL: ``collection/agents/reward/episode_reward_mean``; rl_system:
  ``rollout/return_mean`` over the round's 600 episodes), and every other system's wall time to
  ``benchmarl_mappo``'s final training return (the first batch whose training return reaches it;
  BenchMARL's clock counts its evaluations before that batch);
* the training wall time (from the first batch to the end; BenchMARL's includes its evaluation
  after every batch, given apart) and env steps/s with learning (BenchMARL's evaluation time left
  out);
* the whole subprocess (start-up, Ray, the run, shutdown): wall s, CPU s of the process tree
  (``getrusage(RUSAGE_CHILDREN)``; this process is made the children's subreaper so that Ray's
  processes count too) and cores busy (CPU s / wall s).

    python -m bench.bench_marl                                   # every task and system, seed 0, 3M frames
    python -m bench.bench_marl --tasks balance --seeds 0 1 2 --frames 600000 \
        --systems benchmarl_mappo benchmarl_mappo_our_settings rl_system random
    python -m bench.bench_marl --tasks simple_spread --seeds 0 1 2 --frames 60000 --threads 1
    python -m bench.bench_marl --from-runs bench/results/marl/mpe_60k/*.json.xz --out bench/results/marl/mpe_60k

``--frames``: a multiple of BenchMARL's evaluation interval (60,000 frames: one VMAS batch, ten MPE
batches), or on MPE a multiple of one batch (6,000) below it. ``--threads N`` gives each system N
torch threads (BenchMARL's process, rl_system's learner) instead of its own choice.

Writes one ``.json.xz`` per run (``<system>_<task>_s<seed>``: curves and figures) and
``marl.{json,md}`` (the stamp, the runs' files, the table) to ``--out`` (default
``bench/results/marl``). Needs ``pip install 'rl-system[bench,vmas,mpe]'`` (BenchMARL, VMAS, mpe2).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.learning import first_at, read_ours, read_run
from bench.harness.markdown import md_table, num, steps
from bench.harness.process_tree import become_subreaper, run_child
from bench.harness.random_play import random_play
from bench.harness.results import RESULTS, command_line, run_index, write_run, write_suite
from bench.harness.stamp import ROOT, load1, stamp, stamp_line, version, where_it_ran
from bench.peers.benchmarl_mappo import batch_frames, eval_interval

CONFIGS = {"balance": "launch/configs/vmas_balance_mappo.yaml", "transport": "launch/configs/vmas_transport_mappo.yaml",
           "simple_spread": "launch/configs/mpe_simple_spread_mappo.yaml"}
"""rl_system's config of each task (its own settings): one round is one BenchMARL batch (``batch_frames``)."""
BENCHMARL_CONFIGS = {"balance": "launch/configs/vmas_balance_mappo_benchmarl.yaml",
                     "transport": "launch/configs/vmas_transport_mappo_benchmarl.yaml",
                     "simple_spread": "launch/configs/mpe_simple_spread_mappo_benchmarl.yaml"}
"""rl_system's config of each task with BenchMARL's settings mapped onto it (VMAS: its fine-tuned
ones; MPE: its defaults, as it publishes no fine-tuned MPE settings)."""
EVAL_EPISODES = 200
"""BenchMARL's fine-tuned ``evaluation_episodes``; rl_system's final policy is tested on as many."""
EPISODES_PER_ENV = {"simple_spread": 20}
"""Episodes of each env in rl_system's final test where not one: the test runs whole rounds
(``rollout_len`` steps of each env), and simple_spread's 600-step round holds 24 episodes per env,
so 10 envs give 200 episodes in one round (20 of each env's, in order) instead of 4,800."""
SYSTEMS = ("benchmarl_mappo", "benchmarl_mappo_our_settings", "rl_system", "rl_system_tanh", "rl_system_value_norm",
           "rl_system_benchmarl_settings", "rl_system_ippo", "rl_system_ippo_tanh", "random")
IPPO_CONFIGS = {**CONFIGS, "simple_spread": "launch/configs/mpe_simple_spread_ippo.yaml"}
"""rl_system's IPPO config of each task: its own where one ships (MPE: a third of MAPPO's learning
rate), else the MAPPO config with :data:`_IPPO`'s overrides."""
_IPPO, _TANH = ["mappo.central_value=per_agent", "mappo.critic=local"], ["mappo.action_dist=tanh_normal"]
OURS = {"rl_system": (CONFIGS, []), "rl_system_tanh": (CONFIGS, _TANH),
        "rl_system_value_norm": (CONFIGS, ["mappo.value_norm=true"]),
        "rl_system_benchmarl_settings": (BENCHMARL_CONFIGS, []),
        "rl_system_ippo": (IPPO_CONFIGS, _IPPO), "rl_system_ippo_tanh": (IPPO_CONFIGS, _IPPO + _TANH)}
"""rl_system's systems: the configs (per task) and the overrides on them (IPPO: a critic on each
agent's own observation; the configs' joint central value needs a central critic; tanh: continuous
actions squashed into their bounds; value_norm: MAPPO's value normalisation)."""


# -- runs ------------------------------------------------------------------------------------------


def run_benchmarl(task: str, frames: int, seed: int, work: Path, threads: int | None = None,
                  like: str | None = None, episodes: int = EVAL_EPISODES) -> dict[str, Any]:
    """BenchMARL's MAPPO in a subprocess (:mod:`bench.peers.benchmarl_mappo`), with rl_system config
    ``like``'s hyperparameters where given, evaluating ``episodes`` episodes after each batch."""
    name = f"benchmarl{'_like' if like else ''}_{task}_s{seed}"
    out = work / f"{name}.json"
    cmd = [sys.executable, "-m", "bench.peers.benchmarl_mappo", "--task", task, "--frames", str(frames),
           "--seed", str(seed), "--eval-episodes", str(episodes), "--json", str(out)]
    cmd += ["--threads", str(threads)] if threads else []
    proc = run_child(cmd + (["--like", like] if like else []), work / f"{name}.log")
    return {**json.loads(out.read_text()), **proc}


def run_ours(task: str, frames: int, seed: int, work: Path, threads: int | None = None,
             system: str = "rl_system", episodes: int = EVAL_EPISODES, sets: tuple[str, ...] = (),
             label: str | None = None) -> dict[str, Any]:
    """``rl-system train`` of the task's config (with ``system``'s :data:`OURS` overrides, then
    ``sets``; the row named ``<system>_<label>`` where labelled) in a subprocess, then a
    deterministic test of its final checkpoint over ``episodes`` episodes (in this process: not
    part of the run)."""
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.policy.evaluation import evaluate

    name = f"{system}_{label}" if label else system
    run_dir = work / f"{name}_{task}_s{seed}"
    configs, extra = OURS[system]
    overrides = [f"seed={seed}", f"max_env_steps={frames}", *extra, *sets]
    overrides += [f"learner.torch_threads={threads}"] if threads else []
    cmd = [sys.executable, "-m", "rl_system", "train", configs[task], "--quiet", "--run-dir", str(run_dir)]
    proc = run_child(cmd + [arg for o in overrides for arg in ("--set", o)], work / f"{name}_{task}_s{seed}.log")
    row = read_ours(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    state, _, _ = CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()
    test = evaluate(state, episodes=episodes, deterministic=True, num_envs=eval_envs(task, episodes))
    # "curve" stays the training curve (the harness's convention for rl_system rows); no evaluation
    # runs during training, so the final test is the one evaluation point.
    return {**row, "peer": name, "task": task, "config": configs[task], "overrides": overrides,
            "train_cpu_s": summary["cpu_s"]["total"], "startup_s": summary.get("startup_s"), "eval_wall_s": 0.0,
            "final_train_return": row["final_return"], "final_return": test["return_mean"], "test": test,
            "train_curve": row["curve"], **proc}


def eval_envs(task: str, episodes: int) -> int:
    """Envs of rl_system's final test of ``episodes`` episodes (:data:`EPISODES_PER_ENV`)."""
    return max(1, math.ceil(episodes / EPISODES_PER_ENV.get(task, 1)))


def run_random(task: str, seed: int, episodes: int = EVAL_EPISODES) -> dict[str, Any]:
    """The task's random play (its config's env and kwargs) over ``episodes`` episodes, in this
    process."""
    from rl_system.config import load_config

    cfg = load_config(ROOT / CONFIGS[task])
    t0 = time.perf_counter()
    mean, se = random_play(cfg.env.name, dict(cfg.env.kwargs), episodes, seed=seed)
    return {"peer": "random", "task": task, "env": cfg.env.name, "seed": seed, "env_steps": 0,
            "final_return": mean, "final_train_return": None, "train_wall_s": 0.0, "eval_wall_s": 0.0,
            "test": {"return_mean": mean, "return_se": se, "episodes": episodes,
                     "play_wall_s": time.perf_counter() - t0}, "train_curve": []}


def task_of(row: dict[str, Any]) -> str:
    """The task a row ran (rows written before rows named it: VMAS's, from the env)."""
    return row.get("task") or row["env"].removeprefix("vmas:")


def run_file(out: Path, row: dict[str, Any]) -> Path:
    return out / f"{row['peer']}_{task_of(row)}_s{row['seed']}"


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


def final_test(r: dict[str, Any]) -> tuple[int, float | None]:
    """Episodes and standard error of a run's final evaluation (None where not recorded: BenchMARL's
    runs before its rollouts were read)."""
    test = r.get("test") or {}
    if "episodes" not in test:  # BenchMARL's, stored before its test was
        return r.get("settings", {}).get("experiment", {}).get("evaluation_episodes", EVAL_EPISODES), None
    if test.get("return_se") is not None:
        return test["episodes"], test["return_se"]
    std = test.get("return_std")
    return test["episodes"], (std / math.sqrt(test["episodes"]) if std is not None else None)


def system_rank(peer: str) -> int:
    """Where a row's system sorts: its place in :data:`SYSTEMS` (a labelled row,
    ``<system>_<label>``, right after its system's)."""
    base = max((s for s in SYSTEMS if peer == s or peer.startswith(s + "_")), key=len)
    return SYSTEMS.index(base)


def table_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run, ordered by task, seed and system; rl_system's carry the time to BenchMARL's
    final training return of the same task and seed."""
    ref = {(r["env"], r["seed"]): r for r in runs if r["peer"] == "benchmarl_mappo"}
    rows = []
    for r in sorted(runs, key=lambda r: (r["env"], r["seed"], system_rank(r["peer"]), r["peer"])):
        peer = ref.get((r["env"], r["seed"]))
        level = peer["final_train_return"] if peer is not None and r["peer"] not in ("benchmarl_mappo", "random") else None
        rows.append({"env": r["env"], "seed": r["seed"], "system": r["peer"], "env_steps": r["env_steps"],
                     "final_eval_return": r["final_return"], "eval_episodes": final_test(r)[0],
                     "eval_se": final_test(r)[1], "final_train_return": r["final_train_return"],
                     "train_wall_s": r["train_wall_s"], "eval_wall_s": r.get("eval_wall_s", 0.0),
                     "steps_per_s": learning_rate(r), "level": level,
                     "time_to_level_s": time_to(r.get("train_curve", []), level) if level is not None else None,
                     "process_wall_s": r.get("process_wall_s"), "process_cpu_s": r.get("process_cpu_s"),
                     "run_cpu_s": r.get("train_cpu_s"), "cpu_missed": cpu_missed(r),
                     "cores_busy": tree_cpu(r) / r["process_wall_s"] if r.get("process_wall_s") else None,
                     "load": (r.get("load_1m_before"), r.get("load_1m_after"))})
    return rows


COLUMNS = ("Returns are the agents' mean episode return: *eval* over the episodes named (± its standard error where "
           "recorded) with deterministic actions after the last batch (BenchMARL's `eval/reward/episode_reward_mean`; rl_system's final "
           "checkpoint under `rl-system eval --deterministic`; random: uniform random actions, no training), "
           "*training* over the last batch's episodes with sampled actions. rl_system: rl_system's config for the task; "
           "rl_system_benchmarl_settings: BenchMARL's settings mapped onto it (fine-tuned on VMAS, defaults on MPE); "
           "benchmarl_mappo_our_settings: BenchMARL with rl_system's config's hyperparameters (no advantage or value "
           "normalisation: BenchMARL's MAPPO has neither); rl_system_ippo: rl_system's IPPO config for the task "
           "(MPE, from 2026-12-05 23:30 UTC: `mpe_simple_spread_ippo.yaml`, learning rate 1e-4), else its config with "
           "`mappo.critic: local` (and `central_value: per_agent`); *_tanh: `mappo.action_dist: tanh_normal`; "
           "rl_system_value_norm: `mappo.value_norm: true`. Wall s: from the first batch to the end (BenchMARL's includes its evaluations, "
           "in parentheses, which env steps/s leaves out). Process: the whole subprocess, start-up and "
           "shutdown included; cores busy = its process tree's CPU s / its wall s. Load: the 1-minute load average "
           "before and after each run (other work shared the machine where it exceeds 2). \\*: the process tree as "
           "reaped here counted less CPU than the run counted in its own processes (rl_system's Ray actors were "
           "reaped out of this process's view), so the figure is the tree as counted + the run's own count "
           "(workers and learner), a lower bound: Ray's raylet and GCS are in neither.")
"""What the table's columns are, below it."""


def _eval_cell(r: dict[str, Any]) -> str:
    se = "" if r.get("eval_se") is None else f" ± {r['eval_se']:.3f}"
    return f"{num(r['final_eval_return'], 3)}{se} ({num(r.get('eval_episodes'))})"


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
    header = ["task", "seed", "system", "env steps", "final eval return (episodes)", "final training return", "wall s",
              "env steps/s with learning", "time to BenchMARL's final training return", "process wall s",
              "process CPU s", "cores busy", "load before → after"]
    body = [[r["env"], r["seed"], r["system"], steps(r["env_steps"]), _eval_cell(r),
             num(r["final_train_return"], 3), _wall(r), num(r["steps_per_s"]), _to_level(r), num(r["process_wall_s"]),
             _cpu_cell(r), ("≥ " if r["cpu_missed"] else "") + num(r["cores_busy"], 2),
             " → ".join(num(x, 1) for x in r["load"])]
            for r in rows]
    envs = {r["env"].partition(":")[0] for r in rows}
    libs = [("vmas", "VMAS"), ("pettingzoo", "PettingZoo"), ("pettingzoo", "mpe2")]
    env_libs = "".join(f", {label} {meta.get(label.lower())}" for key, label in libs if key in envs or not envs)
    where = (f"`{command}` on {meta.get('lscpu_model') or meta['cpu']} ({meta['cores']} cores); BenchMARL "
             f"{meta.get('benchmarl')}, TorchRL {meta.get('torchrl')}{env_libs}.")
    lines = [f"# Multi-agent PPO: rl_system beside BenchMARL's MAPPO ({meta['date_utc']}, commit {meta['commit']})",
             "", where, ""]
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


def peer_versions(runs: list[dict[str, Any]]) -> dict[str, str]:
    """The BenchMARL, TorchRL and TensorDict versions a stored BenchMARL run was trained with (a
    table built from stored runs names those, not the building machine's)."""
    for r in runs:
        versions = r.get("versions") or {}
        found = {k: versions[k] for k in ("benchmarl", "torchrl", "tensordict") if versions.get(k)}
        if found:
            return found
    return {}


def lscpu_model() -> str | None:
    """``lscpu``'s model name, or None where lscpu is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), None)


def machine() -> dict[str, Any]:
    """The stamp plus the CPU as lscpu names it and the MARL libraries' versions."""
    return {**stamp("vmas", "pettingzoo", "mpe2"), "lscpu_model": lscpu_model(), "benchmarl": version("benchmarl"),
            "torchrl": version("torchrl"), "tensordict": version("tensordict")}


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--frames", type=int, default=3_000_000, help="a multiple of 60,000 (on MPE below that: of 6,000)")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads of each system (BenchMARL's process, rl_system's learner); default: their own")
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="FILE",
                    help="build the table from the per-run files this suite wrote instead of training")
    ap.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES,
                    help="episodes of each final evaluation (BenchMARL: of each of its evaluations)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="an override on every rl_system system's config (with --label)")
    ap.add_argument("--label", default=None, help="rl_system's rows named <system>_<label> (with --set)")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folders (checkpoints, logs); named at the end")
    ap.add_argument("--out", type=Path, default=RESULTS / "marl")
    args = ap.parse_args(argv)
    bad = budget_error(args.tasks, args.frames) or (None if args.eval_episodes > 0 else "--eval-episodes must be positive")
    if bool(args.sets) != bool(args.label):
        bad = bad or "--set and --label go together (a row with other settings needs a name of its own)"
    if bad:
        ap.error(bad)
    meta, command = machine(), command_line("python -m bench.bench_marl", argv)
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs]
        meta.update(peer_versions(runs))
    else:
        become_subreaper()
        runs = train_all(args.tasks, args.seeds, args.frames, args.systems, args.out, command, args.threads,
                         args.eval_episodes, args.keep, tuple(args.sets), args.label)
    meta["load_1m_after"] = load1()
    rows = table_rows(runs)
    trained_by = sittings(runs) if args.from_runs else []
    text = markdown(meta, rows, command, trained_by)
    write_suite(args.out, "marl", {"meta": meta, "runs": run_index(runs, args.out), "table": rows}, text)
    print(text)
    return text


def budget_error(tasks: list[str], frames: int) -> str | None:
    """Why ``frames`` is no budget for ``tasks`` (not a whole number of batches, or not ending on
    one of BenchMARL's evaluations), or None."""
    for task in tasks:
        for step in (batch_frames(task), eval_interval(task, frames)):
            if frames <= 0 or frames % step:
                return (f"--frames must be a multiple of {step:,} for {task} (a whole number of batches, ending "
                        "on BenchMARL's evaluation)")
    return None


def run_system(system: str, task: str, frames: int, seed: int, work: Path, threads: int | None,
               episodes: int = EVAL_EPISODES, sets: tuple[str, ...] = (), label: str | None = None) -> dict[str, Any]:
    if system == "benchmarl_mappo":
        return run_benchmarl(task, frames, seed, work, threads, episodes=episodes)
    if system == "benchmarl_mappo_our_settings":
        return run_benchmarl(task, frames, seed, work, threads, like=CONFIGS[task], episodes=episodes)
    if system == "random":
        return run_random(task, seed, episodes)
    return run_ours(task, frames, seed, work, threads, system, episodes, sets, label)


def train_all(tasks: list[str], seeds: list[int], frames: int, systems: list[str], out: Path,
              command: str, threads: int | None = None, episodes: int = EVAL_EPISODES,
              keep: bool = False, sets: tuple[str, ...] = (), label: str | None = None) -> list[dict[str, Any]]:
    """Every task, seed and system in turn; each run's row written to ``out`` as it ends. The runs'
    folders (rl_system's checkpoints and logs) are removed at the end unless ``keep``."""
    runs, code = [], where_it_ran()  # the code this sitting runs: HEAD now, whatever is committed later
    # Removed only when every run ended: a run whose evaluation fails after an hour of training keeps
    # its checkpoints and logs (the folder is named on the way out).
    tmp = tempfile.mkdtemp(prefix="bench_marl_")
    try:
        for task in tasks:
            for seed in seeds:
                for system in systems:
                    before = load1()
                    print(f"{task} seed {seed}: {system} ... (load {before})", flush=True)
                    # Each run keeps the command and the load it ran under: a table may join runs of
                    # several sittings (--from-runs).
                    row = {**run_system(system, task, frames, seed, Path(tmp), threads, episodes, sets, label),
                           "command": command,
                           "threads_set": threads, "load_1m_before": before,
                           "load_1m_after": load1(), "date_utc": stamp()["date_utc"], **code}
                    row["source"] = str(write_run(run_file(out, row), row))
                    runs.append(row)
                    print(f"  final eval return {row['final_return']:.3f} in {row['train_wall_s']:.0f}s", flush=True)
    except BaseException:
        print(f"bench_marl: runs kept in {tmp}", file=sys.stderr, flush=True)
        raise
    if keep:
        print(f"bench_marl: runs kept in {tmp}", flush=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return runs


if __name__ == "__main__":
    main()
