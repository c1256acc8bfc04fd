"""docs/reference.md's config tables say what the code takes: every key of the run config (every
algorithm's section included) has a row, no row names a key the config lacks, and each row's
default is the model's default."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from rl_system.config import RunConfig

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| ((?:`[A-Za-z_0-9\.]+`(?:, )?)+) \| (.*?) \|")
NULL = {"null", "none", "–", "—", "-", "(none)"}


def config_keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> dict[str, object]:
    """Dotted key -> default of every leaf setting of ``model`` (sections recurse)."""
    out: dict[str, object] = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.update(config_keys(ann, f"{prefix}{name}."))
        else:
            out[prefix + name] = field.get_default(call_default_factory=True)
    return out


def reference_rows(text: str) -> dict[str, str]:
    """Dotted key -> the default cell shown for it (a row naming several keys, ``a``, ``b``, shows
    their defaults comma-separated in the same order)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        names = re.findall(r"`([A-Za-z_0-9\.]+)`", m.group(1))
        cells = [c.strip() for c in m.group(2).split(",")] if len(names) > 1 else [m.group(2).strip()]
        for i, name in enumerate(names):
            rows[name] = cells[i] if i < len(cells) else cells[-1]
    return rows


def shows(cell: str, default: object) -> bool:
    """Whether the reference's ``cell`` shows ``default`` (numbers by value, ``1,000`` and ``1e-3`` alike)."""
    text = cell.strip("`").strip().strip("'\"")
    if default is None:
        return text.lower() in NULL
    if isinstance(default, bool):
        return text.lower() == str(default).lower()
    if isinstance(default, (int, float)):
        try:
            return math.isclose(float(text.replace(",", "").replace("_", "")), float(default), rel_tol=1e-9)
        except ValueError:
            return False
    if isinstance(default, (list, tuple, dict)):
        return text.replace(" ", "") in (str(default).replace(" ", "").replace("'", ""),
                                         str(default).replace(" ", "").replace("'", '"'),
                                         str(list(default)).replace(" ", "") if isinstance(default, tuple) else "")
    return text == str(getattr(default, "value", default))


KEYS = config_keys()
ROWS = reference_rows((REPO / "docs" / "reference.md").read_text())


def test_every_config_key_has_a_row_and_every_row_a_key():
    sections = {k.split(".")[0] for k in KEYS}
    undocumented = sorted(k for k in KEYS if k not in ROWS)
    stale = sorted(k for k in ROWS if k.split(".")[0] in sections and k not in KEYS
                   and not any(key.startswith(k + ".") for key in KEYS))
    assert not undocumented and not stale, f"undocumented: {undocumented}; documented but not in the config: {stale}"


@pytest.mark.parametrize("key", sorted(k for k in KEYS if k in ROWS))
def test_each_rows_default_is_the_configs(key):
    assert shows(ROWS[key], KEYS[key]), f"reference.md shows {key} = {ROWS[key]!r}; the config's default is {KEYS[key]!r}"


def test_a_drifted_default_is_caught():
    planted = reference_rows("| `ppo.lr` | 3e-3 | the learning rate |")
    assert not shows(planted["ppo.lr"], KEYS["ppo.lr"]) and shows("2.5e-3", KEYS["ppo.lr"])


def _flags(name: str, parser: argparse.ArgumentParser):
    """``(command, --flag)`` of a parser and its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _flags(f"{name} {sub}".strip(), p)
        else:
            yield from ((name, o) for o in action.option_strings if o.startswith("--") and o != "--help")


def undocumented_flags(parser: argparse.ArgumentParser, reference: str) -> list[str]:
    """The commands' long flags that the reference's CLI section never names."""
    text = reference.split("\n## CLI", 1)[-1]
    return sorted({f"rl-system {cmd} {flag}".replace("  ", " ") for cmd, flag in _flags("", parser)
                   if not re.search(re.escape(flag) + r"(?![\w-])", text)})


def test_every_flag_of_every_command_is_in_the_reference():
    from rl_system.cli.main import parser

    missing = undocumented_flags(parser(), (REPO / "docs" / "reference.md").read_text())
    assert not missing, f"docs/reference.md does not describe {missing}"


def test_a_new_flag_missing_from_the_reference_is_caught():
    from rl_system.cli.main import parser

    p = parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["eval"].add_argument("--planted-flag")
    assert undocumented_flags(p, (REPO / "docs" / "reference.md").read_text()) == ["rl-system eval --planted-flag"]
