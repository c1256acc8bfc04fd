"""The registered algorithms: each package's :class:`~rl_system.algos.spec.AlgorithmSpec`, by name.

An algorithm is one line of :data:`PACKAGES` (and its own folder): the run config takes its name
for ``algo:`` and its section, the CLI, evaluation, export and the API find it here, and the docs'
tables list it with its capabilities. Torch-free: the config imports it.
"""

from __future__ import annotations

import importlib
from functools import cache

from rl_system.algos.spec import AlgorithmSpec, Capability

PACKAGES = (
    "rl_system.algos.ppo",
    "rl_system.algos.mappo",
    "rl_system.algos.hmasd",
    "rl_system.algos.a2c",
)
"""One line per algorithm: the package whose ``spec`` module declares ``SPEC``."""


class UnknownAlgorithm(ValueError):
    """``algo`` names no registered algorithm (the message lists them)."""


class MissingCapability(ValueError):
    """A run asks for a capability its algorithm lacks (the message names who has it)."""


@cache
def specs() -> dict[str, AlgorithmSpec]:
    """Every registered algorithm's spec by name, in :data:`PACKAGES` order."""
    out = {}
    for package in PACKAGES:
        spec = importlib.import_module(f"{package}.spec").SPEC
        if spec.name in out:
            raise RuntimeError(f"two registered algorithms are named {spec.name!r}")
        out[spec.name] = spec
    return out


def names() -> list[str]:
    return list(specs())


def get_spec(name: str) -> AlgorithmSpec:
    """The spec of ``name``; :class:`UnknownAlgorithm` (one line, the registered names) if none."""
    try:
        return specs()[name]
    except KeyError:
        raise UnknownAlgorithm(f"unknown algo {name!r}; registered: {', '.join(names())}") from None


def having(capability: Capability) -> list[str]:
    """The names of the algorithms that have ``capability``."""
    return [name for name, spec in specs().items() if spec.has(capability)]


def require(algo: str, capability: Capability, asked_by: str) -> None:
    """:class:`MissingCapability` where ``algo`` lacks ``capability``: one line that names what asked
    for it (a config key, a command), the capability and the algorithms that have it."""
    if get_spec(algo).has(capability):
        return
    who = having(capability)
    has = f"algo {', '.join(who)} {'has' if len(who) == 1 else 'have'} it" if who else "no algorithm has it"
    raise MissingCapability(f"{asked_by}: needs {capability}, which algo {algo!r} lacks; {has}")
