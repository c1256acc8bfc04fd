#!/usr/bin/env python
"""Train on a running Ray cluster: ``rl-system train`` that joins the cluster by default.

    ray submit cluster.yaml launch/train.py -- launch/configs/cartpole_ppo.yaml --set workers.num_workers=8

``ray submit`` copies this file to ``~/train.py`` on the head node and runs it there, inside the
container, with the arguments after ``--``. Those are ``rl-system train``'s arguments (CONFIG,
``--set KEY=VALUE``, ``--run-dir``, ``--resume``, ``--quiet``, ``--log-level``); ``--address auto``
is added unless you pass ``--address`` yourself. The exit status is the CLI's (0 done, 1 run failed, 2 bad config
or flags, 130 interrupted).

A relative CONFIG that does not exist in the current directory is looked up in the project
checkout (the directory above ``launch/``, or ``$RL_SYSTEM_HOME``, where docker/Dockerfile puts
it), so ``launch/configs/...`` paths work on the cluster as they do locally.

The same run through the Ray Jobs API (the driver then runs on the head with ``RAY_ADDRESS`` set,
so ``--address auto`` joins that cluster); with the dashboard on loopback, first run
``ray dashboard cluster.yaml`` in another terminal:

    ray job submit --address http://localhost:8265 --working-dir . -- \\
        rl-system train launch/configs/cartpole_ppo.yaml --address auto --run-dir /home/ray/runs/cp

If ``rl_system`` is not installed where this runs, the checkout it belongs to is put on
``sys.path`` and shipped to the actors with the Ray job (``runtime_env`` ``py_modules``), so a
plain checkout works too (its dependencies must still be installed on every node).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# `rl-system train` options that take a value (kept in step with rl_system/cli/train.py by
# tests/run/test_cluster_config.py); everything else that starts with "-" is a flag.
VALUE_OPTIONS = frozenset({"--set", "--address", "--run-dir", "--resume", "--log-level"})
PACKAGES = ("rl_system", "envs")


def repo_roots() -> list[Path]:
    """Where a project checkout may be: above this file, ``$RL_SYSTEM_HOME``, the current dir."""
    roots = [Path(__file__).resolve().parent.parent]
    if os.environ.get("RL_SYSTEM_HOME"):
        roots.append(Path(os.environ["RL_SYSTEM_HOME"]).expanduser())
    roots.append(Path.cwd())
    return roots


def _is_checkout(root: Path) -> bool:
    return all((root / pkg / "__init__.py").is_file() for pkg in PACKAGES)


def ensure_importable() -> Path | None:
    """Make ``rl_system`` importable. Returns the checkout put on ``sys.path``, or None if the
    package was importable already (installed, or on PYTHONPATH as under ``--working-dir``)."""
    try:
        import rl_system  # noqa: F401
        import rl_system.envs  # noqa: F401
        return None
    except ImportError:
        pass
    for root in repo_roots():
        if _is_checkout(root):
            sys.path.insert(0, str(root))
            return root
    raise SystemExit("train.py: cannot import rl_system: install it (pip install .) or run this "
                     "file from a project checkout (or set RL_SYSTEM_HOME to one)")


def _address(argv: list[str]) -> str | None:
    """The value of ``--address`` in ``argv`` (last one wins, as in argparse), or None."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--address" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--address="):
            found = arg.split("=", 1)[1]
    return found


def _config_index(argv: list[str]) -> int | None:
    """Index of the CONFIG positional: the first argument that is neither an option nor the value
    of one."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i + 1 if i + 1 < len(argv) else None
        if arg in VALUE_OPTIONS:
            i += 2
            continue
        if not arg.startswith("-"):
            return i
        i += 1
    return None


def resolve_config(path: str, roots: list[Path]) -> str:
    """``path`` if it exists (or is absolute), else the first checkout that has it, else ``path``
    (the CLI then reports it)."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return path
    for root in roots:
        if (root / p).is_file():
            return str(root / p)
    return path


def build_argv(argv: list[str], roots: list[Path] | None = None) -> list[str]:
    """``rl-system`` arguments for ``train.py`` arguments: ``train``, CONFIG resolved against the
    checkout, and ``--address auto`` unless an address was given."""
    argv = list(argv)
    idx = _config_index(argv)
    if idx is not None:
        argv[idx] = resolve_config(argv[idx], roots if roots is not None else repo_roots())
    if _address(argv) is None:
        argv += ["--address", "auto"]
    return ["train", *argv]


def _connect_shipping(root: Path, address: str) -> None:
    """Join the cluster with the checkout's packages in the job's runtime env, so actors on any
    node import the same code as this driver (the CLI then finds Ray initialised)."""
    import ray

    ray.init(address=address, runtime_env={"py_modules": [str(root / pkg) for pkg in PACKAGES]})


def main(argv: list[str] | None = None) -> int:
    argv = build_argv(sys.argv[1:] if argv is None else argv)
    added = ensure_importable()
    from rl_system.cli.main import main as cli_main

    address = _address(argv)
    try:
        if added is not None and not any(a in ("-h", "--help") for a in argv):
            _connect_shipping(added, address)
        return cli_main(argv)
    except ConnectionError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"train.py: cannot join the Ray cluster at {address!r}: {first} "
              "(run this on a cluster node, e.g. with `ray submit cluster.yaml launch/train.py -- CONFIG`, "
              "or pass --address HOST:PORT)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
