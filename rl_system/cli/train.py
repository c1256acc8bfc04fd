"""``rl-system train``: :func:`rl_system.api.run_training` with the console's lines, exit codes
and the process's start-up phases."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from rl_system.cli.common import fail
from rl_system.config import load_config
from rl_system.run.summary import RunSummary


def add_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="train with a YAML config")
    t.add_argument("config", metavar="CONFIG", help="YAML config file, e.g. launch/configs/cartpole_ppo.yaml")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set workers.num_envs=256 (repeatable)")
    t.add_argument("--address", default=None, metavar="auto|HOST:PORT",
                   help="join this Ray cluster ('auto': the one this machine belongs to); default: Ray starts "
                        "embedded in the process, sized for the run")
    t.add_argument("--run-dir", default=None, type=Path, metavar="DIR",
                   help="directory for this run's outputs (default: the config's run_dir/run_name, "
                        "runs/<env>-<algo>-<YYYYmmdd-HHMMSS> unless it sets them)")
    t.add_argument("--quiet", action="store_true", help="no per-round console lines (the same as --log-level warning)")
    t.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                   help="what the console shows: debug (also the full text behind each one-line error), info "
                        "(progress), warning (only what went wrong or was recovered), error; every level goes to "
                        "<run dir>/console.log (default: %(default)s)")
    t.add_argument("--resume", default=None, metavar="RUN_DIR|CHECKPOINT|latest",
                   help="continue from a checkpoint: a run directory or checkpoints directory (its newest checkpoint "
                        "that loads), one .rlck file (local path or URI), or latest (the newest run under run_dir "
                        "that has checkpoints, or the --run-dir given)")
    t.set_defaults(handler=cmd_train)


def _on_sigterm(signum, frame):  # noqa: ARG001
    # SIGTERM (e.g. `ray job stop`, a scheduler) takes the Ctrl-C path: flush checkpoints, exit.
    raise KeyboardInterrupt


def cmd_train(args: argparse.Namespace) -> int:
    from rl_system.run.phases import PhaseClock, process_age_s

    debug = (lambda text: print(f"debug: {text}", file=sys.stderr, flush=True)) if args.log_level == "debug" else None
    clock = PhaseClock(say=debug)
    age = process_age_s()
    if age is not None:
        clock.record("interpreter", age)
    with clock.phase("config"):
        cfg = load_config(args.config, args.overrides)
    with clock.phase("imports"):  # Ray, torch and the run's modules (kept out of `--help`)
        import rl_system.run.loop  # noqa: F401 - timed here; run_training uses it
        from rl_system.api import run_training
        from rl_system.errors import EnvBrokeContract, RayStartError, ResumeError, TrainingError
        from rl_system.observe.metrics import console_level

    def say(text: str, warning: bool = False) -> None:
        print(f"rl-system: {text}" if warning else text, file=sys.stderr if warning else sys.stdout)

    def on_ray_started() -> None:
        # After ray.init, which installs its own SIGTERM handler (that one aborts the process).
        signal.signal(signal.SIGTERM, _on_sigterm)

    try:
        summary = run_training(cfg, run_dir=args.run_dir, address=args.address, resume=args.resume,
                               log_level=console_level(args.log_level, args.quiet), clock=clock, say=say,
                               on_ray_started=on_ray_started)
    except (ResumeError, RayStartError) as err:
        return fail(str(err), 1)
    except EnvBrokeContract as err:
        return fail(str(err), 2)
    except TrainingError as err:
        return fail(f"error: {err}", 1)
    _print_done(cfg, summary)
    _record_phases(summary, clock)
    return 0


def _print_done(cfg, summary: RunSummary) -> None:
    ttt = summary.time_to_target_s
    if cfg.target_return is None:
        reached = ""  # no target configured: nothing was to be reached
    elif ttt is not None:
        reached = f", target reached in {ttt:.2f}s / {summary.steps_to_target:,} steps"
    else:
        reached = ", target not reached"
    reseeds = summary.reseeds
    at = ", ".join(f"{r['env_steps']:,}" for r in reseeds)
    reseeded = f", reseeded on stall at {at} steps" if reseeds else ""
    rollbacks = summary.rollbacks
    back = ", ".join(f"{r['env_steps']:,} (to {r['to_env_steps']:,})" for r in rollbacks)
    rolled = f", rolled back on collapse at {back} steps" if rollbacks else ""
    print(f"done: {summary.env_steps:,} env steps in {summary.wall_time_s:.2f}s "
          f"({summary.steps_per_s:,.0f} steps/s), final mean return {_fmt(summary.final_mean_return)}{reached}"
          f"{reseeded}{rolled}")


def _record_phases(summary: RunSummary, clock) -> None:
    """The whole process's phases into ``summary.json`` (the run wrote it before Ray stopped)."""
    from rl_system.filesystems import write_json

    summary.phases_s = dict(clock.seconds)
    if summary.run_dir:
        try:
            write_json(Path(summary.run_dir) / "summary.json", summary.to_json())
        except OSError:
            pass  # the run's own summary stays; these figures are for people


def _fmt(value: float | None) -> str:
    """A return for a person, without float noise: two decimals (1.5000000453 -> 1.50), whole
    numbers from 10,000 up."""
    return "none" if value is None else f"{value:.2f}" if abs(value) < 1e4 else f"{value:,.0f}"
