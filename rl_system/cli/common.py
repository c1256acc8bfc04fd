"""What the command modules share: the one line every expected failure ends in, the
``--env KWARG=VALUE`` assignments (``eval``, ``check-env``, ``air-combat range-map``) and the
``--pick`` of a run's checkpoint (``eval``, ``export``: :mod:`rl_system.checkpoint.pick`).

Kept apart from :mod:`rl_system.cli.main` so that the command modules import it and ``main``
imports them, never the other way round."""

from __future__ import annotations

import argparse
import copy
import sys

from rl_system.config import ConfigError, apply_override, build_config


def fail(msg: str, code: int = 2) -> int:
    """Print ``rl-system: msg`` on stderr; returns ``code`` (2: bad input, 1: a failed run)."""
    print(f"rl-system: {msg}", file=sys.stderr)
    return code


def add_pick_flag(parser: argparse.ArgumentParser) -> None:
    """``--pick best|latest|final|vN``, as the Python API's ``pick=`` (same names, same default)."""
    from rl_system.checkpoint.pick import DEFAULT_PICK, PICK_HELP, check_pick

    def pick(text: str) -> str:
        try:
            return check_pick(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parser.add_argument("--pick", type=pick, default=DEFAULT_PICK, metavar="best|latest|final|vN", help=PICK_HELP)


def env_kwarg(assignment: str) -> str:
    """``assignment`` if it reads ``KWARG=VALUE`` (an ``--env`` flag), else ConfigError."""
    if "=" not in assignment or assignment.startswith("="):
        raise ConfigError(f"--env {assignment!r}: expected KWARG=VALUE, e.g. random_start=false")
    return assignment


def with_env_kwargs(state: dict, assignments: list[str]) -> dict:
    """``state`` with ``KWARG=VALUE`` assignments applied to the env kwargs its policy is tested
    under (``env.eval_kwargs``, which win over ``env.kwargs``; a copy: the checkpoint's own dict is
    left alone). ConfigError on a malformed assignment."""
    from rl_system.checkpoint import keys  # the checkpoint package loads torch: not at `rl-system --help`

    tree = copy.deepcopy(state[keys.CONFIG])
    for assignment in assignments:
        apply_override(tree, f"env.eval_kwargs.{env_kwarg(assignment)}")
    build_config(tree)
    return {**state, keys.CONFIG: tree}
