"""``rl-system`` command line: the parser and the dispatch. Every expected failure ends in one line
on stderr and a non-zero exit: 2 for bad input (config, flags, a path or name that is not there:
tests/cli/test_cli_surface.py walks the commands), 1 for a run that failed, 130 for
Ctrl-C.

Each command lives in a module of its own that adds its subparser and sets its handler
(``handler``): :mod:`.train`, :mod:`.evaluate`, :mod:`.export`, :mod:`.check_env`,
:mod:`.monitor` (status, grafana-dashboard), :mod:`.air_combat`, :mod:`.tune`, :mod:`.rollouts`."""

from __future__ import annotations

import argparse
import os
import sys

from rl_system import __version__, openmp

openmp.begin_sample()  # the machine's load over this module's imports picks OpenMP's wait policy (run())

from rl_system.cli import air_combat, check_env, evaluate, export, monitor, rollouts, train, tune
from rl_system.cli.common import fail
from rl_system.config import ConfigError

# In the order `rl-system --help` lists them. air_combat also adds --launch-map to eval: it is
# imported (and registers it) before the eval parser is built.
COMMANDS = (train.add_parser, evaluate.add_parser, export.add_parser, check_env.add_parser,
            monitor.add_status_parser, air_combat.add_parser, tune.add_parser, monitor.add_grafana_parser,
            rollouts.add_parser)


def parser() -> argparse.ArgumentParser:
    """The whole command line (the docs' commands are checked against it: tests/docs/test_doc_commands.py)."""
    p = argparse.ArgumentParser(prog="rl-system", description="Distributed actor-learner RL on Ray.")
    p.add_argument("--version", action="version", version=f"rl-system {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add_parser in COMMANDS:
        add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # Entry points (env.name, model.network) resolve from the current directory too, as under
    # `python -m`; Ray's local workers start in it as well.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return args.handler(args)
    except ConfigError as err:
        return fail(f"config error: {err}", 2)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        # The reader went away (`rl-system eval ... | head -1`): stop quietly, as Unix tools do.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE


def run() -> None:
    """The ``rl-system`` executable: :func:`main`, then a quick exit.

    Once a command has returned, its files are closed, its checkpoints flushed and Ray stopped;
    what is left is the interpreter tearing down torch, Ray and their threads, most of a second
    that nobody waits for on purpose. The streams are flushed and the process ends with the code.
    (:func:`main` itself returns normally, for callers in the same process.)"""
    openmp.set_default()  # before any command imports torch; from the load sampled since the imports began
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    import ray

    if ray.is_initialized():  # a command that joined a cluster: leave it as a normal exit would
        ray.shutdown()
    os._exit(code)


if __name__ == "__main__":
    run()
