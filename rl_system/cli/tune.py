"""``rl-system tune``: its flags and the command (the sweep itself is :mod:`rl_system.tuning`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from rl_system.config import ConfigError, load_config
from rl_system.errors import one_line


def add_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("tune", help="hyperparameter sweep of whole runs on Ray Tune (fifo, ASHA, PBT)")
    t.add_argument("config", nargs="?", metavar="CONFIG",
                   help="YAML config every trial starts from (not with --resume)")
    t.add_argument("--search", action="append", default=[], metavar="KEY=SPEC",
                   help="a searched key (repeatable): choice(a,b,..) grid(a,b,..) uniform(lo,hi) loguniform(lo,hi) "
                        "randint(lo,hi), e.g. --search ppo.lr=loguniform(1e-4,1e-2)")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key for every trial (repeatable)")
    t.add_argument("--num-samples", type=int, default=8, metavar="N",
                   help="trials drawn (each grid() combination that many times; default: %(default)s)")
    t.add_argument("--scheduler", choices=("fifo", "asha", "pbt"), default="asha",
                   help="fifo (every trial runs to the end), asha (stops the worse early, rungs in env steps) or "
                        "pbt (population-based training); default %(default)s")
    t.add_argument("--metric", default="return", metavar="return|<outcome>_rate",
                   help="what every scheduler maximises: return or <outcome>_rate (success_rate, win_rate; "
                        "default: %(default)s)")
    t.add_argument("--max-concurrent", type=int, default=0, metavar="K",
                   help="trials at once (default %(default)s: as many as fit)")
    t.add_argument("--grace-steps", type=int, default=None, metavar="STEPS",
                   help="ASHA: env steps before the first cut "
                   "(default max_env_steps/16)")
    t.add_argument("--perturbation-steps", type=int, default=None, metavar="STEPS",
                   help="PBT: env steps between exploits "
                   "(default max_env_steps/10)")
    t.add_argument("--pbt-synch", action="store_true", help="PBT: trials wait for each other at every perturbation "
                   "point (fair at equal env steps; a restart of each trial per point)")
    t.add_argument("--pbt-start", choices=("sampled", "config"), default="sampled",
                   help="PBT: the perturbed keys' first values: drawn from their SPEC, or the config's own "
                        "(start every member at a tuned preset; grid() keys still set each member; default: %(default)s)")
    t.add_argument("--seed", type=int, default=None, metavar="S",
                   help="the search's own random state (trials train with the config's seed)")
    t.add_argument("--address", default=None, metavar="auto|HOST:PORT",
                   help="join this Ray cluster; default: start Ray on this machine")
    t.add_argument("--out", type=Path, default=Path("runs/tune"), metavar="DIR",
                   help="parent of the experiment directory, OUT/NAME (default: %(default)s)")
    t.add_argument("--name", default=None, help="the experiment's name (default tune-<env>-<time>)")
    t.add_argument("--resume", type=Path, default=None, metavar="EXPERIMENT_DIR",
                   help="continue a sweep stopped by Ctrl-C or a crash (its own settings; other flags ignored)")
    t.add_argument("--top-k", type=int, default=5, metavar="K",
                   help="trials to print at the end (default: %(default)s)")
    t.set_defaults(handler=cmd_tune)


def _sweep_of(args: argparse.Namespace):  # -> tuple[Sweep, Path]
    from rl_system.tuning.sweep import SWEEP_FILE, Sweep

    if args.config is None:
        raise ConfigError("tune: give a CONFIG (or --resume EXPERIMENT_DIR)")
    cfg = load_config(args.config, args.overrides)
    sweep = Sweep(config=cfg.model_dump(), search=args.search, scheduler=args.scheduler, metric=args.metric,
                  num_samples=args.num_samples, max_concurrent=args.max_concurrent, grace_steps=args.grace_steps,
                  perturbation_steps=args.perturbation_steps, pbt_synch=args.pbt_synch,
                  pbt_start=args.pbt_start, seed=args.seed)
    sweep.check()
    name = args.name or f"tune-{cfg.env.name.split(':')[-1].replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    exp_dir = args.out / name
    if (exp_dir / SWEEP_FILE).exists():
        raise ConfigError(f"{exp_dir} holds a sweep already: continue it with --resume {exp_dir}, or pick --name")
    return sweep, exp_dir


def cmd_tune(args: argparse.Namespace) -> int:
    from rl_system.tuning.sweep import Sweep, local_cpus, restore, tuner

    if args.resume is not None:
        sweep, exp_dir = Sweep.load(args.resume), args.resume
        sweep.check()
    else:
        sweep, exp_dir = _sweep_of(args)
    from rl_system.run.startup import join_ray, probe_specs, start_embedded_ray

    probe_specs(sweep.base)  # an env or algorithm that rejects the config: one line, before Ray
    try:
        if args.address:
            join_ray(args.address)
        else:  # as `rl-system train`: no dashboard unless the config asks
            start_embedded_ray(local_cpus(sweep), sweep.base.ray_dashboard)
    except Exception as err:  # noqa: BLE001 - Ray raises a bare Exception when its node fails to start
        print(f"rl-system: cannot start or join Ray ({args.address or 'local'}): {one_line(err)}", file=sys.stderr)
        return 1
    # SIGTERM (`ray job stop`, a batch scheduler) ends the sweep as Ctrl-C does: Tune's SIGUSR1
    # handler saves the experiment's state for --resume (ray.init's own SIGTERM handler aborts).
    signal.signal(signal.SIGTERM, lambda signum, frame: os.kill(os.getpid(), signal.SIGUSR1))
    if args.resume is not None:
        sweep, t = restore(exp_dir)
        print(f"resuming the sweep in {exp_dir}")
    else:
        t = tuner(sweep, exp_dir)
        print(f"sweep in {exp_dir}: {sweep.num_samples} samples, {sweep.scheduler}, maximising {sweep.metric}")
    grid = t.fit()
    return _report(grid, sweep, exp_dir, args.top_k)


def _report(grid, sweep, exp_dir: Path, top_k: int) -> int:
    from rl_system.tuning.results import print_top, write_outputs

    table, best = write_outputs(grid, sweep, exp_dir)
    if not table.empty:
        print_top(table, sweep, top_k)
    print(f"results: {exp_dir / 'results.parquet'}")
    if best is not None:
        print(f"best config: {best}  (rl-system train {best})")
    unfinished = int((table["status"] == "unfinished").sum()) if not table.empty else 0
    if unfinished:
        print(f"rl-system: interrupted with {unfinished} trial(s) unfinished; continue with "
              f"rl-system tune --resume {exp_dir}", file=sys.stderr)
        return 130
    failed = table[table["status"] == "error"] if not table.empty else table
    if not table.empty and len(failed) == len(table):
        print(f"rl-system: error: every trial failed; first: {failed.iloc[0]['error']}", file=sys.stderr)
        return 1
    return 0
