"""``rl-system check-env``: the conformance check of an env (:mod:`rl_system.envs.checker`), one
line per finding."""

from __future__ import annotations

import argparse

from rl_system.cli.common import env_kwarg, fail
from rl_system.config import apply_override
from rl_system.errors import one_line


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("check-env", help="conformance check of an env: specs, auto-reset, seeding, state, speed")
    c.add_argument("name", metavar="NAME",
                   help="a registered env, 'package.module:Name', 'gym:<id>', 'envpool:<id>', 'vmas:<scenario>', "
                        "'pettingzoo:<module>:<env_fn>' or 'magym:<id>' (as env.name in a config)")
    c.add_argument("--env", dest="env_kwargs", action="append", default=[], metavar="KWARG=VALUE",
                   help="an env constructor kwarg (repeatable), e.g. --env size=small")
    c.add_argument("--num-envs", type=int, default=8, metavar="N", help="batch size N to check and time (default %(default)s)")
    c.add_argument("--steps", type=int, default=200, metavar="S", help="random steps per check (default %(default)s)")
    c.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the env copies and the random actions (default %(default)s)")
    c.add_argument("--device", default="cpu", metavar="DEV", help="torch device to build the env on (default %(default)s)")
    c.set_defaults(handler=cmd_check_env)


def cmd_check_env(args: argparse.Namespace) -> int:
    from rl_system.envs import EntryPointError
    from rl_system.envs.checker import check_env

    if args.num_envs < 1 or args.steps < 1:
        return fail("--num-envs and --steps must be positive", 2)
    tree: dict = {}
    for assignment in args.env_kwargs:
        apply_override(tree, env_kwarg(assignment))
    try:
        findings = check_env(args.name, args.num_envs, tree, steps=args.steps, seed=args.seed, device=args.device)
    except EntryPointError as err:
        return fail(f"env.name: {err}", 2)
    except Exception as err:  # noqa: BLE001 - the env could not be built: that is the finding
        print(f"FAIL build: {type(err).__name__}: {one_line(err)}")
        return 1
    for finding in findings:
        print(finding.line())
    failed = sum(f.failed for f in findings)
    print(f"{args.name}: {'conforms' if not failed else f'{failed} violation(s)'}")
    return 1 if failed else 0
