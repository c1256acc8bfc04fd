"""HMASD vs flat MAPPO on Alice_and_Bob, over seeds, through the real system (Ray workers,
gate, learner), plus a table of what each learned individual skill does.

For each method (``launch/configs/alice_bob_hmasd.yaml`` and ``alice_bob_mappo.yaml``, the same
code with the hierarchy switched off) and seed, trains until the 100-episode training success
rate reaches ``--target`` (the team reward is 1 on success, so the mean return is the success
rate) -- recorded, training goes on -- and until the env-step budget runs out, then measures the
*test* success rate of the final policy with ``rl_system.policy.evaluation`` (200 episodes on a fresh env
seed, sampling as in training and argmax at both levels). Runs checkpoint as the preset says
(``checkpoint.every_rounds``), and the checkpoint a user keeps as ``best.json`` (the best
*training* return; ``rl-system eval RUN --pick best``) is tested on the same episodes beside it.
Runs reseed on stall as the preset says (``reseed:``); the table's "reseeded at" column gives
the env steps of each reseed, and steps to target count from the run's start across attempts.
"solved at" is where the round's 100-episode training success first reached 0.9 and "lowest
after" its lowest value from then on; the summary counts the runs that fell below 0.5 after
solving (collapses).

    python -m bench.bench_hmasd --size small --steps 100000 --seeds 0 1 2
    python -m bench.bench_hmasd --size default --steps 3000000 --seeds 0   # ~15-20 min a run here

Prints one row per run, a summary per method, and (HMASD) the skill table: for each agent and
individual skill z, the share of steps under that skill spent on each button/diamond cell and in
the start hall / left / right half of the map, and the plan table: which ``(Z, z_Alice, z_Bob)``
the coordinator picks in each skill window of an episode and which diamond gets collected in it.
``--from-outputs FILE ...`` prints one table and summary from the run rows of stored outputs
(seeds run in separate invocations). ``--checkpoint RUN`` prints only those two tables of an
existing run, and a third: its test success with the argmax taken at neither level, at one
(``rl-system eval --greedy-level high|low``) or at both (``--deterministic``), which shows which
level's argmax a policy tolerates:

    python -m bench.bench_hmasd --checkpoint runs/<hmasd run>

It also prints what the actors do (action shares, entropy, cells reached) and a map of how surely
``q_d`` tells Alice's skills apart on each part of the map. Training progress goes to stderr (one
line a minute; ``--quiet`` drops it); the runs' directories are deleted at the end unless ``--keep``.
Test episodes and tables use the run's test env (``env.kwargs`` updated with ``env.eval_kwargs``:
the preset trains with exploring starts and tests on the task's fixed start); ``--test-env
KWARG=VALUE`` overrides it further, e.g. ``--test-env random_start=true``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness.learning import with_test_env
from bench.harness.results import read_text
from bench.hmasd_tables import (
    actor_table,
    discriminator_cells,
    discriminator_map,
    greedy_table,
    hall_trace,
    plan_table,
    skill_table,
)
from rl_system.checkpoint import CheckpointError, keys
from rl_system.checkpoint.store import CheckpointStore
from rl_system.config import RunConfig, load_config
from rl_system.observe.metrics import read_scalars
from rl_system.policy.evaluation import evaluate
from rl_system.run.loop import train

CONFIGS = {"hmasd": "launch/configs/alice_bob_hmasd.yaml", "mappo": "launch/configs/alice_bob_mappo.yaml",
           # the paper's own Alice_and_Bob row (Table 3) and shared settings (Table 1), beside the preset
           "hmasd_paper": "launch/configs/alice_bob_hmasd_paper.yaml"}
# The skill settings the small-map figures (bench/results/hmasd/small.txt, the learning test) were
# measured with; the default map's preset, tuned for exploring its rooms, differs.
SMALL_MAP_SKILLS = ["env.kwargs.own_position=true", "env.kwargs.random_start=false", "hmasd.n_agent_skills=3",
                    "hmasd.lambda_l=0.01", "hmasd.lambda_h=0.01", "hmasd.lambda_d=0.5", "hmasd.logq_floor=false",
                    "hmasd.lambda_e=1.0"]
# Geometry per map: the small map's 30-step episodes want short windows and rollouts.
GEOMETRY = {
    "small": ["workers.num_envs=32", "workers.rollout_len=30", "hmasd.skill_interval=10", "hmasd.lr=0.001",
              *SMALL_MAP_SKILLS],
    "default": [],
    "large": [],
}


SOLVED = 0.9
"""Training success that counts as solved for the stability columns: a run that reached it should
never fall below ``COLLAPSED`` afterwards."""
COLLAPSED = 0.5


def stability(curve: list[tuple[int, float]], solved: float = SOLVED) -> tuple[int | None, float | None]:
    """(env steps at which the training success ``curve`` -- ``(env steps, 100-episode success)``
    per round -- first reached ``solved``, its lowest value from then on); ``(None, None)`` if
    never reached."""
    first = next((i for i, (_, v) in enumerate(curve) if v >= solved), None)
    if first is None:
        return None, None
    return curve[first][0], min(v for _, v in curve[first:])


def bench_config(method: str, size: str, extra: list[str], run: list[str] = ()) -> RunConfig:
    """The method's preset on the map ``size``: then the run's own settings, the map geometry and
    the user's ``--set`` overrides, in that order (later ones win)."""
    return load_config(CONFIGS[method], [f"env.kwargs.size={size}", *run, *GEOMETRY[size], *extra])


def run_one(method: str, seed: int, size: str, steps: int, target: float, root: Path, extra: list[str],
            test_env: list[str], quiet: bool = False) -> dict:
    run_dir = root / f"{method}-s{seed}"
    cfg = bench_config(method, size, extra, [f"seed={seed}", f"max_env_steps={steps}", f"target_return={target}",
                                             "stop_at_target=false", "return_window=100", "tensorboard=true",
                                             "log_every_s=60", "max_wall_s=1800"])
    # The trainer's progress lines (one a minute) go to stderr; stdout keeps only the tables.
    with contextlib.redirect_stdout(sys.stderr):
        summary = train(cfg, run_dir=run_dir, quiet=quiet)
    # The training success every round (100-episode window): when the run solved, how low it fell after.
    solved_at, lowest = stability(read_scalars(run_dir / "tb", "rollout/success_rate").get("rollout/success_rate", []))
    store = CheckpointStore(str(run_dir / "checkpoints"))
    state = store.load_latest_valid()[0]
    tested = with_test_env(state, test_env)  # over the run's own eval_kwargs
    test = evaluate(tested, episodes=200, deterministic=False, seed=10_000 + seed)
    test_argmax = evaluate(tested, episodes=200, deterministic=True, seed=10_000 + seed)
    # The checkpoint a user of `rl-system train` keeps as best.json (chosen by the training return,
    # never by these test episodes), tested on the same episodes as the final policy.
    try:
        best_state = store.load_best()[0]
    except CheckpointError:  # no checkpoint saw a finished episode
        best_state = state
    same = best_state[keys.LEARNER][keys.VERSION] == state[keys.LEARNER][keys.VERSION]  # then the same episodes' result
    best = test if same else evaluate(with_test_env(best_state, test_env), episodes=200, deterministic=False,
                                      seed=10_000 + seed)
    return {"method": method, "seed": seed, "steps_to_target": summary.steps_to_target,
            "time_to_target_s": summary.time_to_target_s, "env_steps": summary.env_steps,
            "wall_s": summary.wall_time_s, "steps_per_s": summary.steps_per_s,
            "train_success": summary.final_rates.get("success", 0.0), "test_success": test.get("success_rate", 0.0),
            "test_success_argmax": test_argmax.get("success_rate", 0.0), "test_length": test["length_mean"],
            "reseeds": [r["env_steps"] for r in summary.reseeds],
            "rollbacks": summary.rollbacks,
            "best_steps": best_state[keys.DRIVER][keys.ENV_STEPS], "best_test_success": best.get("success_rate", 0.0),
            "solved_at": solved_at, "lowest_after_solved": lowest,
            "state": tested}  # the tables below sample the test env too


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="small", choices=sorted(GEOMETRY))
    ap.add_argument("--steps", type=int, default=150_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=["hmasd", "mappo"], choices=sorted(CONFIGS))
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every run (after the preset and the map geometry), repeatable")
    ap.add_argument("--checkpoint", default=None, metavar="RUN",
                    help="only print the skill and plan tables of an existing HMASD run (run dir, checkpoints dir or file)")
    ap.add_argument("--hall-trace", default=None, metavar="RUN_DIR",
                    help="only print the start-hall share at every checkpoint kept in RUN_DIR/checkpoints")
    ap.add_argument("--test-env", action="append", default=[], metavar="KWARG=VALUE",
                    help="env kwarg for the test episodes only (repeatable; wins over the run's env.eval_kwargs), "
                         "e.g. random_start=true")
    ap.add_argument("--quiet", action="store_true", help="no training progress lines on stderr")
    ap.add_argument("--keep", action="store_true",
                    help="keep the runs' directories (final checkpoints, for --checkpoint) instead of deleting them")
    ap.add_argument("--from-outputs", nargs="+", default=None, metavar="FILE",
                    help="only print one table and summary from the run rows of stored bench_hmasd outputs")
    args = ap.parse_args()
    if args.from_outputs is not None:
        report_from_outputs(args.from_outputs)
        return
    if args.hall_trace is not None:
        found = sorted(Path(args.hall_trace, "checkpoints").glob("ckpt-v*.rlck"))
        if not found:
            raise SystemExit(f"bench_hmasd: no checkpoints in {Path(args.hall_trace, 'checkpoints')}")
        print("\n".join(hall_trace(found)))
        return
    if args.checkpoint is not None:
        from rl_system.checkpoint.resume import find_resume

        found = find_resume(args.checkpoint, load_config(None), None)
        state = with_test_env(found.state, args.test_env)
        print(f"skills of {found.path} (v{state[keys.LEARNER][keys.VERSION]}; share of the steps under z on "
              "each object cell and in each part of the map, both levels sampled):")
        print("\n".join(skill_table(state)))
        print("\nhow the coordinator composes them (first episode of 256 fresh envs, both levels sampled):")
        print("\n".join(plan_table(state)))
        print("\nwhat the actors do (both levels sampled; entropy in nats):")
        print("\n".join(actor_table(state)))
        print("\nhow surely q_d tells Alice's skills apart, by where she stands:")
        print("\n".join(discriminator_map(state)))
        print("\nwhich skill q_d credits on each cell, with the other agent on its start (z:log q_d, mean over Z):")
        print("\n".join(discriminator_cells(state)))
        greedy = greedy_table(state)
        if greedy:
            print("\ntest success by the level taking the argmax (200 episodes, `rl-system eval` seed 12345):")
            print("\n".join(greedy))
        return
    check_configs(args)
    root = Path(tempfile.mkdtemp(prefix="bench_hmasd_"))
    try:
        report(args, root)
    finally:
        if args.keep:
            print(f"\nruns kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def check_configs(args: argparse.Namespace) -> None:
    """Every method's config with the overrides, and with the test env kwargs, builds an env and
    a policy: a typo is one line now rather than a traceback after a 20-minute run."""
    from rl_system.config import ConfigError, build_config
    from rl_system.run.startup import probe_specs

    for method in args.methods:
        try:
            cfg = bench_config(method, args.size, args.overrides)
            probe_specs(cfg)
            if args.test_env:
                probe_specs(build_config(with_test_env({keys.CONFIG: cfg.model_dump()}, args.test_env)[keys.CONFIG]))
        except (ConfigError, ValueError) as err:
            raise SystemExit(f"bench_hmasd: {method}: {err}") from None


ROW_HEADER = ("method | seed | reseeded at | steps to target | time to target s | env steps | wall s | steps/s | "
              f"train success | solved (>= {SOLVED}) at | lowest after | test success | test success (argmax) | "
              "test length | best.json at env steps | best.json test success")
ROW_RULE = "---|" * 15 + "---"


def format_row(r: dict) -> str:
    """One run's row of the table under ``ROW_HEADER``."""
    stt = f"{r['steps_to_target']:,}" if r["steps_to_target"] else "not reached"
    ttt = f"{r['time_to_target_s']:.0f}" if r["time_to_target_s"] else "-"
    reseeded = ", ".join(f"{s:,}" for s in r["reseeds"]) or "-"
    solved = f"{r['solved_at']:,}" if r["solved_at"] is not None else "-"
    lowest = f"{r['lowest_after_solved']:.2f}" if r["lowest_after_solved"] is not None else "-"
    return (f"{r['method']} | {r['seed']} | {reseeded} | {stt} | {ttt} | {r['env_steps']:,} | {r['wall_s']:.0f} | "
            f"{r['steps_per_s']:,.0f} | {r['train_success']:.2f} | {solved} | {lowest} | {r['test_success']:.3f} | "
            f"{r['test_success_argmax']:.3f} | {r['test_length']:.1f} | {r['best_steps']:,} | "
            f"{r['best_test_success']:.3f}")


def summary_lines(rows: list[dict]) -> list[str]:
    """Per method: runs reaching the target, median steps to it, mean test successes, final
    policies at >= 0.8, and the runs that fell below ``COLLAPSED`` after solving."""
    header = ("method | runs reaching target | median steps to target | mean test success | mean test success (argmax) "
              f"| mean best.json test success | final test success >= 0.8 | solved, then below {COLLAPSED}")
    lines = [header, "---|---|---|---|---|---|---|---"]
    for method in dict.fromkeys(r["method"] for r in rows):
        rs = [r for r in rows if r["method"] == method]
        hit = [r["steps_to_target"] for r in rs if r["steps_to_target"]]
        med = f"{statistics.median(hit):,.0f}" if hit else "-"
        lines.append(f"{method} | {len(hit)}/{len(rs)} | {med} | {statistics.mean(r['test_success'] for r in rs):.3f} | "
                     f"{statistics.mean(r['test_success_argmax'] for r in rs):.3f} | "
                     f"{statistics.mean(r['best_test_success'] for r in rs):.3f} | "
                     f"{sum(r['test_success'] >= 0.8 for r in rs)}/{len(rs)} | "
                     f"{sum(r['lowest_after_solved'] is not None and r['lowest_after_solved'] < COLLAPSED for r in rs)}")
    return lines


def _number(text: str) -> float | None:
    text = text.strip()
    return None if text in ("-", "not reached", "") else float(text.replace(",", ""))


def parse_rows(text: str) -> list[dict]:
    """The runs' rows of a stored ``bench_hmasd`` output (the table under ``ROW_HEADER``, printed
    by ``format_row``), so that seeds run in separate invocations make one table. Blocks with
    older columns are skipped."""
    rows, header = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if cells[:2] == ["method", "seed"]:
            # Only tables with today's columns: older blocks (before the stability columns) are skipped.
            header = cells if cells == [c.strip() for c in ROW_HEADER.split("|")] else None
        elif header and cells[0] in CONFIGS and len(cells) == len(header):
            cell = dict(zip(header, cells))
            stt = _number(cell["steps to target"])
            ttt = _number(cell["time to target s"])
            solved = _number(cell[f"solved (>= {SOLVED}) at"])
            rows.append({
                "method": cell["method"], "seed": int(cell["seed"]),
                "reseeds": [int(_number(x)) for x in cell["reseeded at"].split(", ") if _number(x) is not None],
                "steps_to_target": int(stt) if stt else None, "time_to_target_s": ttt,
                "env_steps": int(_number(cell["env steps"])), "wall_s": _number(cell["wall s"]),
                "steps_per_s": _number(cell["steps/s"]), "train_success": _number(cell["train success"]),
                "solved_at": int(solved) if solved is not None else None,
                "lowest_after_solved": _number(cell["lowest after"]),
                "test_success": _number(cell["test success"]),
                "test_success_argmax": _number(cell["test success (argmax)"]),
                "test_length": _number(cell["test length"]),
                "best_steps": int(_number(cell["best.json at env steps"])),
                "best_test_success": _number(cell["best.json test success"])})
    return rows


def report_from_outputs(paths: list[str]) -> None:
    """Print one table and summary from the rows of stored outputs (``--from-outputs``)."""
    rows = []
    for path in paths:
        try:
            found = parse_rows(read_text(Path(path)))
        except OSError as err:
            raise SystemExit(f"bench_hmasd: {path}: {err.strerror}") from None
        if not found:
            raise SystemExit(f"bench_hmasd: {path}: no run rows under today's table header "
                             "(not a bench_hmasd output, or one from before the stability columns)")
        rows += found
    print(f"Alice_and_Bob, {len(rows)} runs from {len(paths)} stored output(s): {' '.join(paths)}")
    print(ROW_HEADER)
    print(ROW_RULE)
    for r in sorted(rows, key=lambda r: (r["method"], r["seed"])):
        print(format_row(r))
    print()
    print("\n".join(summary_lines(rows)))


def report(args: argparse.Namespace, root: Path) -> None:
    """Train every (method, seed) under ``root`` and print the tables."""
    rows = []
    print(f"Alice_and_Bob size={args.size}, budget {args.steps:,} env steps, target train success >= {args.target}"
          + (f", overrides {' '.join(args.overrides)}" if args.overrides else "")
          + (f", tested with {' '.join(args.test_env)}" if args.test_env else ""))
    print(ROW_HEADER)
    print(ROW_RULE)
    for method in args.methods:
        for seed in args.seeds:
            r = run_one(method, seed, args.size, args.steps, args.target, root, args.overrides, args.test_env,
                        args.quiet)
            rows.append(r)
            print(format_row(r), flush=True)
    print()
    print("\n".join(summary_lines(rows)))
    for r in rows:
        for b in r["rollbacks"]:
            print(f"{r['method']} seed {r['seed']}: rolled back on collapse at {b['env_steps']:,} env steps "
                  f"(mean return {b['mean_return']:.2f}) to the checkpoint of {b['to_env_steps']:,} "
                  f"(mean return {b['to_mean_return']:.2f}), learning rate x{b['lr_scale']:g}")
    for r in rows:
        table = skill_table(r["state"]) if r["method"].startswith("hmasd") else []
        if table:
            print(f"\nskills of hmasd seed {r['seed']} (share of the steps under z spent on each object cell, "
                  "both levels sampled):")
            print("\n".join(table))
            print("\nhow its coordinator composes them (first episode of 256 fresh envs, both levels sampled):")
            print("\n".join(plan_table(r["state"])))
            break


if __name__ == "__main__":
    main()
