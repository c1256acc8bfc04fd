"""HMASD and flat MAPPO on Overcooked with the HMASD paper's settings, toward its budget of 1e7 env
steps, beside the paper's Table 4 (Yang et al., "Hierarchical Multi-Agent Skill Discovery",
NeurIPS 2023: HMASD's final episode reward over 5 seeds, +20 a soup, horizon 400).

    python -m bench.bench_overcooked_train --layouts cramped_room coordination_ring --methods hmasd mappo \\
        --seeds 0 1 2 --steps 10000000 --threads 1 --jobs 2 --max-wall-s 9000

Each run is ``rl-system train launch/configs/overcooked_<layout>_<method>.yaml`` in a subprocess,
its run folder ``--work/<layout>_<method>_s<seed>``. A 1e7-step seed takes hours on a CPU, so a run
goes in *sittings*: ``--max-wall-s`` ends a sitting (the run checkpoints at its end), and the same
command later resumes every run that has not reached ``--steps`` from its newest checkpoint
(``rl-system train --resume``; the torch env's state is in the checkpoint, so the run goes on
bit-exactly). Each sitting's ``summary.json`` is kept in the run folder's ``sittings.jsonl``.

The table (``--out``: ``overcooked_train.md``/``.json`` and one ``.json.xz`` per run with its
curve) gives per run the env steps reached, the final episode reward (the mean return of the
run's last ``return_window`` training episodes, sampled actions: the paper's "final episode
reward" is its training curve's end), the return at each quarter of the budget, wall time, env
steps/s with learning, the update's share of a round and the cores kept busy, summed over
sittings. ``--from-runs RUN_DIR ...`` builds the table from run folders without training (runs
started by ``rl-system train`` directly count as one sitting each).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.harness.learning import tb_curve
from bench.harness.markdown import md_table, num, steps
from bench.harness.process_tree import become_subreaper, run_child
from bench.harness.results import RESULTS, command_line, run_index, write_run, write_suite
from bench.harness.stamp import ROOT, cpu_model, load1, stamp, stamp_line

LAYOUTS = ("cramped_room", "coordination_ring")
"""The layouts with shipped paper presets (``launch/configs/overcooked_<layout>_<method>.yaml``)."""
METHODS = ("hmasd", "mappo")
PAPER = {"cramped_room": (236.0, 8.0), "asymmetric_advantages": (295.1, 84.5), "coordination_ring": (80.0, 97.9)}
"""HMASD's final episode reward after 1e7 env steps, mean and std over 5 seeds (the paper's Table 4)."""
SITTINGS = "sittings.jsonl"
SUITE = "overcooked_train"


def config_path(layout: str, method: str) -> str:
    return f"launch/configs/overcooked_{layout}_{method}.yaml"


def run_name(layout: str, method: str, seed: int) -> str:
    return f"{layout}_{method}_s{seed}"


def env_steps_done(run_dir: Path) -> int:
    """Env steps of the run's newest valid checkpoint (0 where it has none)."""
    from rl_system.checkpoint.format import CheckpointError
    from rl_system.checkpoint.store import CheckpointStore

    ckpts = run_dir / "checkpoints"
    if not ckpts.is_dir():
        return 0
    try:
        _, manifest, _ = CheckpointStore(str(ckpts)).load_latest_valid()
    except CheckpointError:
        return 0
    return int(manifest["env_steps"])


def sitting(layout: str, method: str, seed: int, total_steps: int, work: Path, threads: int | None = None,
            max_wall_s: float | None = None, extra: tuple[str, ...] = ()) -> Path:
    """Train one run to ``total_steps`` (or until ``max_wall_s``), resuming its newest checkpoint
    where it has one; appends the sitting's summary to ``sittings.jsonl``. Returns the run folder."""
    run_dir = work / run_name(layout, method, seed)
    done = env_steps_done(run_dir)
    if done >= total_steps:
        return run_dir
    overrides = [f"seed={seed}", f"max_env_steps={total_steps}"]
    overrides += [f"learner.torch_threads={threads}"] if threads else []
    overrides += [f"max_wall_s={max_wall_s}"] if max_wall_s else []
    overrides += list(extra)
    cmd = [sys.executable, "-m", "rl_system", "train", config_path(layout, method), "--quiet"]
    cmd += ["--resume", str(run_dir)] if done else ["--run-dir", str(run_dir)]
    run_dir.mkdir(parents=True, exist_ok=True)
    if done and not (run_dir / SITTINGS).exists():  # a run started by rl-system train: keep its own sitting
        _append(run_dir, sittings_of(run_dir)[0])
    st = stamp()  # its load_1m_before is the sitting's
    proc = run_child(cmd + [a for o in overrides for a in ("--set", o)], run_dir / f"sitting_{done}.log")
    summary = json.loads((run_dir / "summary.json").read_text())
    record = {"date_utc": st["date_utc"], "commit": st["commit"], "cpu": st["cpu"], "cores": st["cores"],
              "command": " ".join(cmd[1:]), "overrides": overrides, "env_steps_from": done,
              "load_1m_before": st["load_1m_before"], "load_1m_after": load1(), **proc, "summary": summary}
    _append(run_dir, record)
    return run_dir


def _append(run_dir: Path, record: dict[str, Any]) -> None:
    with open(run_dir / SITTINGS, "a") as f:
        f.write(json.dumps(record) + "\n")


def sittings_of(run_dir: Path) -> list[dict[str, Any]]:
    """The run's sittings; a run folder without ``sittings.jsonl`` is one sitting, its summary."""
    path = run_dir / SITTINGS
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    summary = json.loads((run_dir / "summary.json").read_text())
    # Not started here: what trained it is not recorded (the folder is taken to be this machine's).
    return [{"env_steps_from": 0, "summary": summary, "commit": "?", "cpu": cpu_model()}]


def read_run_dir(run_dir: Path, budget: int) -> dict[str, Any]:
    """One run folder as a bench row: config, curve, final and best window, and its sittings' sums."""
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    layout = cfg["env"]["kwargs"]["layout"]
    method = "hmasd" if cfg["hmasd"]["hierarchy"] else "mappo"
    sits = sittings_of(run_dir)
    last = sits[-1]["summary"]
    curve = [list(row) for row in tb_curve(run_dir / "tb")]
    total = {k: sum(s["summary"]["time_breakdown_s"][k] for s in sits) for k in ("rounds", "update")}
    wall = sum(s["summary"]["wall_time_s"] for s in sits)
    trained = sum(s["summary"]["env_steps"] - s.get("env_steps_from", 0) for s in sits)
    cpu = sum(s["summary"]["cpu_s"]["total"] for s in sits)
    train_s = sum(s["summary"]["phases_s"].get("train", s["summary"]["wall_time_s"]) for s in sits)
    return {"peer": f"rl_system_{method}", "env": "Overcooked", "layout": layout, "method": method,
            "seed": cfg["seed"], "env_steps": last["env_steps"], "budget": budget,
            "final_return": last["final_mean_return"], "best_return": last["best_mean_return"],
            "return_window": cfg.get("return_window"), "curve": curve, "train_wall_s": wall,
            "steps_per_s": trained / wall if wall else None,
            "update_share": total["update"] / total["rounds"] if total["rounds"] else None,
            "cores_busy": cpu / train_s if train_s else None, "sittings": len(sits),
            "trained_at": sorted({f"`{s.get('commit', '?')}` on {s.get('cpu', '?')}" for s in sits}),
            "loads": [(s.get("load_1m_before"), s.get("load_1m_after")) for s in sits],
            "paper": PAPER.get(layout), "run_dir": str(run_dir), "config": config_path(layout, method)}


def return_at(curve: list, at: int) -> float | None:
    """The training mean return of the last curve row at or before ``at`` env steps."""
    rows = [r for r in curve if r[0] <= at]
    return rows[-1][2] if rows else None


def markdown(meta: dict[str, Any], runs: list[dict[str, Any]], command: str, budget: int,
             from_runs: bool = False) -> str:
    quarters = [budget * q // 4 for q in (1, 2, 3, 4)]
    header = (["layout", "method", "seed", "env steps", "final episode reward", "best window"]
              + [f"at {steps(q)}" for q in quarters]
              + ["the paper's HMASD (Table 4)", "wall s", "env steps/s with learning", "update's share of a round",
                 "cores busy", "sittings"])
    rows = []
    for r in sorted(runs, key=lambda r: (r["layout"], METHODS.index(r["method"]), r["seed"])):
        paper = f"{r['paper'][0]:g} ± {r['paper'][1]:g}" if r.get("paper") and r["method"] == "hmasd" else "–"
        share = f"{100 * r['update_share']:.0f}%" if r.get("update_share") is not None else "–"
        rows.append([r["layout"], r["method"], r["seed"], steps(r["env_steps"]), num(r["final_return"], 1),
                     num(r["best_return"], 1), *[num(return_at(r["curve"], q), 1) if r["env_steps"] >= q else "–"
                                                  for q in quarters],
                     paper, num(r["train_wall_s"]), num(r["steps_per_s"]), share, num(r["cores_busy"], 2),
                     r["sittings"]])
    title = (f"# Overcooked with the HMASD paper's settings, toward {steps(budget)} env steps "
             f"({meta['date_utc']}, commit {meta['commit']})")
    legend = ("Final episode reward: the mean return of the run's last `return_window` training episodes (sampled "
              "actions; +20 a soup, horizon 400), as the paper's Table 4 reports its training curves' end. "
              "*at N*: the same window's mean at the last round at or before N env steps (– where the run has not "
              "reached N). Wall s, env steps/s, the update's share and cores busy (the run's CPU s over its "
              "training s) are summed over the run's sittings (`sittings.jsonl` in its folder).")
    built = (f"Built {meta['date_utc']} at commit `{meta['commit']}` from stored run folders; where and under "
             "what load they trained is below." if from_runs else stamp_line(meta))
    lines = [title, "", f"`{command}`", "", built, "", *md_table(header, rows), "", legend, ""]
    where = sorted({w for r in runs for w in r["trained_at"]})
    loads = "; ".join(f"{r['layout']} {r['method']} s{r['seed']}: " + ", ".join(
        f"{num(a, 2)} → {num(b, 2)}" for a, b in r["loads"]) for r in runs)
    lines.append(f"Trained at {', '.join(where)}; 1-minute load before → after each sitting (– where the run was "
                 f"not started by this suite): {loads}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=10_000_000, help="each run's budget (the paper's: 1e7)")
    ap.add_argument("--threads", type=int, default=1, help="the learner's torch threads (0: the config's)")
    ap.add_argument("--jobs", type=int, default=1, help="runs side by side")
    ap.add_argument("--max-wall-s", type=float, default=None, help="end each run's sitting after this many s")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a key of every run's config, as rl-system train --set")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "overcooked_paper", help="the runs' folders")
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="RUN_DIR",
                    help="build the table from these run folders instead of training")
    ap.add_argument("--out", type=Path, default=RESULTS / "overcooked" / "paper")
    args = ap.parse_args(argv)
    command = command_line("python -m bench.bench_overcooked_train", argv)
    meta = stamp()
    if args.from_runs:
        run_dirs = args.from_runs
    else:
        become_subreaper()
        todo = [(lay, m, s) for lay in args.layouts for m in args.methods for s in args.seeds]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            run_dirs = list(pool.map(lambda job: sitting(*job, args.steps, args.work, args.threads or None,
                                                         args.max_wall_s, tuple(args.overrides)), todo))
    runs = []
    for d in run_dirs:
        row = read_run_dir(Path(d), args.steps)
        row["source"] = str(write_run(args.out / run_name(row["layout"], row["method"], row["seed"]), row))
        runs.append(row)
    meta["load_1m_after"] = load1()
    text = markdown(meta, runs, command, args.steps, from_runs=bool(args.from_runs))
    write_suite(args.out, SUITE, {"meta": meta, "runs": run_index(runs, args.out)}, text)
    print(text)
    return text


if __name__ == "__main__":
    main()
