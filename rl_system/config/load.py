"""From a YAML file and ``--set a.b=value`` overrides to a validated :class:`RunConfig`; every
validation error becomes one :class:`ConfigError` line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rl_system.config.base import ConfigError
from rl_system.config.run import RunConfig


def _parse_value(text: str) -> Any:
    """``--set`` values are YAML scalars/lists: ``3``, ``1e-3``, ``true``, ``[64, 64]``, ``null``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_override(tree: dict[str, Any], assignment: str) -> None:
    """Apply one ``a.b.c=value`` assignment to a nested dict in place."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. workers.num_envs=256")
    set_key(tree, key.strip(), _parse_value(raw))


def set_key(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set the dotted ``key`` (``ppo.lr``) of a nested dict in place."""
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{key}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def _format_error(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "<root>"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    if first["type"] == "value_error" and not first["loc"]:
        # A whole-config check: its message names the keys itself.
        return str(first["ctx"]["error"])
    got = first.get("input")
    shown = "" if first["type"] == "extra_forbidden" or isinstance(got, dict) else f" (got {got!r})"
    more = f" [+{err.error_count() - 1} more]" if err.error_count() > 1 else ""
    return f"{key}: {msg}{shown}{more}"


def build_config(tree: dict[str, Any]) -> RunConfig:
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Read a YAML config (or defaults when ``path`` is None), apply overrides, validate."""
    tree: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{p}: no such config file")
        try:
            loaded = yaml.safe_load(p.read_text())
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{p}:{where} not valid YAML") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{p}: expected a mapping of keys at the top level")
        tree = loaded or {}
    for assignment in overrides:
        apply_override(tree, assignment)
    return build_config(tree)
