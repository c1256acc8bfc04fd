"""The table of :mod:`bench.bench_marl`: one row per run (rl_system's, BenchMARL's, random
play's), the time of each to BenchMARL's final training return, and the Markdown the suite writes.
"""

from __future__ import annotations

import math
from typing import Any

from bench.harness.learning import first_at
from bench.harness.markdown import md_table, num, steps
from bench.harness.stamp import stamp_line

SYSTEMS = ("benchmarl_mappo", "benchmarl_mappo_our_settings", "rl_system", "rl_system_tanh", "rl_system_value_norm",
           "rl_system_benchmarl_settings", "rl_system_ippo", "rl_system_ippo_tanh", "random")
"""The suite's systems, in the table's order (:mod:`bench.bench_marl` says what each is)."""
EVAL_EPISODES = 200
"""BenchMARL's fine-tuned ``evaluation_episodes``: the final evaluation's episodes unless the suite
is given others (``--eval-episodes``)."""


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


def run_sets(r: dict[str, Any]) -> list[str]:
    """The overrides a run took beyond its system's: ``sets`` where recorded, else its overrides
    less the seed, the budget and the threads, which every run of the suite sets."""
    if r.get("sets") is not None:
        return r["sets"]
    return [o for o in r.get("overrides") or [] if o.split("=")[0] not in ("seed", "max_env_steps", "learner.torch_threads")]


def table_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run, ordered by task, seed and system; rl_system's carry the time to BenchMARL's
    final training return of the same task and seed."""
    ref = {(r["env"], r["seed"]): r for r in runs if r["peer"] == "benchmarl_mappo"}
    rows = []
    for r in sorted(runs, key=lambda r: (r["env"], r["seed"], system_rank(r["peer"]), r["peer"])):
        peer = ref.get((r["env"], r["seed"]))
        episodes, se = final_test(r)
        level = peer["final_train_return"] if peer is not None and r["peer"] not in ("benchmarl_mappo", "random") else None
        rows.append({"env": r["env"], "seed": r["seed"], "system": r["peer"], "env_steps": r["env_steps"],
                     "final_eval_return": r["final_return"], "eval_episodes": episodes, "eval_se": se,
                     "sets": run_sets(r), "final_train_return": r["final_train_return"],
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
    labelled = {r["system"]: r["sets"] for r in rows if r["system"] not in SYSTEMS and r.get("sets")}
    also = "".join(f" {name}: its system with `{' '.join('--set ' + x for x in sets)}`." for name, sets in labelled.items())
    lines += [*md_table(header, body), "", COLUMNS + also, ""]
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
