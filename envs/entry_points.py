"""Names that stand for Python objects (``"package.module:Name"``): how an env, a network or a
factory named in a config is imported on every worker, with one line saying what went wrong."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any


class EntryPointError(ValueError):
    """A name that does not resolve to what it should (an env constructor, a network class): one
    line saying what was expected."""


def import_entry_point(target: str, what: str) -> Any:
    """The object ``"package.module:Name"`` names (``Name`` may be dotted: ``Outer.Inner``).
    Raises :class:`EntryPointError` with one line for a malformed target, a module that does not
    import (with the import's own error) or a missing attribute. ``what`` names the setting."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr or ":" in attr:
        raise EntryPointError(f"{what}: expected 'package.module:Name', got {target!r}")
    obj: Any = _import_module(module_name, what)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise EntryPointError(f"{what}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


# Modules that moved, by their old names: configs, checkpoints and scripts from before a move name
# them in entry points (``rl_system.envs.air_combat_render:AirCombatRenderer``), and those still load.
MOVED_MODULES = {f"rl_system.envs.air_combat_{part}": f"rl_system.envs.air_combat.{part}"
                 for part in ("spec", "rewards", "envelope", "envelope_plot", "render", "launches")}


def own_module_name(module_name: str) -> str:
    """``module_name``, or the name it has now for a module of ours that was known by another one:
    ``rl_system.envs.<module>`` for an ``envs.<module>``, and the new name of a moved module
    (:data:`MOVED_MODULES`).

    The built-in envs once installed as a top-level ``envs`` package, and configs, checkpoints and
    scripts from then name them ``envs.<module>``. That name is also the usual one for a project's
    own folder of environments, so ``envs.<module>`` stays the user's wherever their ``envs``
    package has that module; otherwise (no such package, it lacks the module, or it is this
    repository's own ``envs/`` folder, as when running from a checkout) it means ours."""
    if module_name != "envs" and not module_name.startswith("envs."):
        return MOVED_MODULES.get(module_name, module_name)
    ours = f"rl_system.{module_name}"
    ours = MOVED_MODULES.get(ours, ours)
    if importlib.util.find_spec(ours) is None:
        return module_name
    theirs = importlib.util.find_spec("envs")  # top level: found, not imported
    here = Path(__file__).resolve().parent
    if theirs is None or any(Path(p).resolve() == here for p in theirs.submodule_search_locations or ()):
        return ours
    try:
        return module_name if importlib.util.find_spec(module_name) is not None else ours
    except ImportError:
        return ours


def _import_module(module_name: str, what: str) -> Any:
    module_name = own_module_name(module_name)
    try:
        return importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - a user's module can fail to import in any way
        first = str(err).splitlines()[0] if str(err) else ""
        raise EntryPointError(f"{what}: module {module_name!r} does not import ({type(err).__name__}: {first})") from None


