"""``rl-system`` command line. Every expected failure ends in one line on stderr and a
non-zero exit: 2 for bad input (config, flags), 1 for a run that failed, 130 for Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rl_system.config import ConfigError, load_config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rl-system", description="Distributed actor-learner RL on Ray.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train with a YAML config")
    t.add_argument("config", help="YAML config file, e.g. launch/configs/cartpole_ppo.yaml")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set workers.num_envs=256 (repeatable)")
    t.add_argument("--address", default=None,
                   help="Ray cluster to join ('auto' or HOST:PORT); default: start Ray on this machine")
    t.add_argument("--run-dir", default=None, type=Path, help="directory for this run's outputs")
    t.add_argument("--quiet", action="store_true", help="no per-round console lines")

    r = sub.add_parser("rollouts", help="work with rollout archives")
    rsub = r.add_subparsers(dest="rollouts_command", required=True)
    ri = rsub.add_parser("inspect", help="schema, size, compression and column statistics of an archive")
    ri.add_argument("file", help="an archive written with archive_every > 0 (rollouts-r*.arrow)")
    return p


def _fail(msg: str, code: int) -> int:
    print(f"rl-system: {msg}", file=sys.stderr)
    return code


def cmd_train(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    from rl_system.driver import TrainingError, train  # imports Ray: keep `--help` fast

    try:
        summary = train(cfg, run_dir=args.run_dir, address=args.address, quiet=args.quiet)
    except TrainingError as err:
        return _fail(f"error: {err}", 1)
    ttt = summary["time_to_target_s"]
    reached = f"target reached in {ttt:.2f}s / {summary['steps_to_target']:,} steps" if ttt is not None else "target not reached"
    print(f"done: {summary['env_steps']:,} env steps in {summary['wall_time_s']:.2f}s "
          f"({summary['steps_per_s']:,.0f} steps/s), final mean return {summary['final_mean_return']}, {reached}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "rollouts":
            from rl_system.archive import cmd_rollouts_inspect

            return cmd_rollouts_inspect(args.file)
    except ConfigError as err:
        return _fail(f"config error: {err}", 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    return _fail(f"unknown command {args.command!r}", 2)


if __name__ == "__main__":
    sys.exit(main())
