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
    python -m bench.bench_marl --tasks transport --seeds 0 1 2 --frames 1920000 --systems rl_system \
        --eval-episodes 2000 --set mappo.lr=0.001 --label lr1e-3 --keep

``--eval-episodes N``: every final evaluation (and each of BenchMARL's) over N episodes instead of
200. ``--set KEY=VALUE --label NAME``: rl_system's systems with an override, as rows
``<system>_<NAME>``. ``--keep``: the runs' folders (rl_system's checkpoints and logs) stay.

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

from bench.harness.learning import read_ours, read_run
from bench.harness.process_tree import become_subreaper, run_child
from bench.harness.random_play import random_play
from bench.harness.results import RESULTS, command_line, run_index, write_run, write_suite
from bench.harness.stamp import ROOT, load1, stamp, version, where_it_ran
from bench.marl_table import EVAL_EPISODES, SYSTEMS, markdown, peer_versions, sittings, table_rows
from bench.peers.benchmarl_mappo import batch_frames, eval_interval

CONFIGS = {"balance": "launch/configs/vmas_balance_mappo.yaml", "transport": "launch/configs/vmas_transport_mappo.yaml",
           "simple_spread": "launch/configs/mpe_simple_spread_mappo.yaml"}
"""rl_system's config of each task (its own settings): one round is one BenchMARL batch (``batch_frames``)."""
BENCHMARL_CONFIGS = {"balance": "launch/configs/vmas_balance_mappo_benchmarl.yaml",
                     "transport": "launch/configs/vmas_transport_mappo_benchmarl.yaml",
                     "simple_spread": "launch/configs/mpe_simple_spread_mappo_benchmarl.yaml"}
"""rl_system's config of each task with BenchMARL's settings mapped onto it (VMAS: its fine-tuned
ones; MPE: its defaults, as it publishes no fine-tuned MPE settings)."""
EPISODES_PER_ENV = {"simple_spread": 20}
"""Episodes of each env in rl_system's final test where not one: the test runs whole rounds
(``rollout_len`` steps of each env), and simple_spread's 600-step round holds 24 episodes per env,
so 10 envs give 200 episodes in one round (20 of each env's, in order) instead of 4,800."""
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
    return {**row, "peer": name, "task": task, "config": configs[task], "overrides": overrides, "sets": list(sets),
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
    bad = usage_error(args)
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


def usage_error(args: argparse.Namespace) -> str | None:
    """What makes the command line unusable (:func:`budget_error`, the evaluation's episodes, a
    ``--set`` without its ``--label``), or None."""
    bad = budget_error(args.tasks, args.frames)
    if bad:
        return bad
    if args.eval_episodes <= 0:
        return "--eval-episodes must be positive"
    if bool(args.sets) != bool(args.label):
        return "--set and --label go together (a row with other settings needs a name of its own)"
    return None


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
