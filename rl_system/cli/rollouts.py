"""``rl-system rollouts inspect``: a rollout archive's schema, size, compression and column
statistics (:mod:`rl_system.rollout.archive_inspect`)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("rollouts", help="work with rollout archives")
    rsub = r.add_subparsers(dest="rollouts_command", required=True)
    ri = rsub.add_parser("inspect", help="schema, size, compression and column statistics of an archive")
    ri.add_argument("file", metavar="FILE", help="an archive written with archive_every > 0 (rollouts-r*.arrow)")
    ri.set_defaults(handler=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    from rl_system.rollout.archive_inspect import cmd_rollouts_inspect

    return cmd_rollouts_inspect(args.file)
