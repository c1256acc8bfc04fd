"""docs/reference.md's tables are generated from the code (``bench.publish.reference_tables``): every
key of the run config (every algorithm's section included) with its type, default and help from the
pydantic models, every command's flags with their defaults and help from the argparse parsers. A key,
default, flag or help that changes in the code leaves the page stale, and ``python -m
bench.publish.pages --check`` (tests/bench/test_pages.py) fails until the page is regenerated; each
test below plants such a change and sees it caught."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import Field, create_model

from bench.publish import pages, reference_tables
from bench.publish.report_md import ReportError
from rl_system.algos.ppo.config import PPOConfig
from rl_system.config import RunConfig

REPO = Path(__file__).resolve().parents[2]
REFERENCE = (REPO / "docs" / "reference.md").read_text()
CONFIG_BLOCKS = tuple(b for b in pages.BLOCKS if b.name.startswith("config"))
CLI_BLOCKS = tuple(b for b in pages.BLOCKS if b.name.startswith("cli."))


def test_every_key_and_every_flag_is_in_the_reference():
    keys = [key for key, _, _ in reference_tables.leaves(RunConfig)]
    assert len(keys) > 150 and not [k for k in keys if f"| `{k}` |" not in REFERENCE]
    helpless = [k for k, _, doc in reference_tables.leaves(RunConfig) if not doc.strip()]
    assert not helpless, f"config keys without a docstring: {helpless}"
    for command, parser in reference_tables.commands():
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                flag = max(action.option_strings, key=len)
                assert f"| `{flag}" in pages.current(next(b for b in CLI_BLOCKS if b.name == "cli." +
                                                           command.replace(" ", "."))), (command, flag)


def test_every_option_with_a_default_states_it_in_its_help():
    """``rl-system CMD --help`` shows every default (a switch is off, a repeatable flag empty)."""
    silent = [(command, action.dest) for command, parser in reference_tables.commands() for action in parser._actions
              if action.option_strings and action.nargs != 0 and action.default not in (None, [], ())
              and "default" not in (action.help or "")]
    assert not silent, f"flags whose help does not state their default: {silent}"


def _with_ppo(monkeypatch, **fields) -> None:
    """The run config as the generator sees it, with PPO's section replaced by one with ``fields``."""
    planted = create_model("PlantedPPOConfig", __base__=PPOConfig, **fields)
    run = create_model("PlantedRunConfig", __base__=RunConfig, ppo=(planted, Field(default_factory=planted)))
    monkeypatch.setattr(reference_tables, "_config", lambda: run)


@pytest.mark.parametrize("planted", [
    {"planted_key": (int, Field(3, ge=1, description="a key the page lacks"))},  # a new key
    {"lr": (float, Field(3e-3, gt=0))},  # a changed default (the help is still the docstring under PPOConfig.lr)
    {"lr": (float, Field(2.5e-3, gt=0, description="another help"))},  # a changed help
    {"lr": (float, Field(2.5e-3, ge=0))},  # another bound
], ids=["new-key", "default", "help", "bound"])
def test_a_drifted_config_key_is_caught(monkeypatch, planted):
    assert pages.stale(CONFIG_BLOCKS) == []
    _with_ppo(monkeypatch, **planted)
    assert pages.stale(CONFIG_BLOCKS) == ["config.ppo"]


def _planted(monkeypatch, command: str, change: Callable[[argparse.ArgumentParser], object]) -> None:
    """``rl-system`` as the generator sees it, with ``change`` applied to ``command``'s parser."""
    from rl_system.cli import main

    real = main.parser

    def planted() -> argparse.ArgumentParser:
        top = p = real()
        for name in command.split():
            p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        change(p)
        return top

    monkeypatch.setattr(main, "parser", planted)


def test_a_new_flag_is_caught_in_its_table_and_the_synopsis(monkeypatch):
    assert pages.stale(CLI_BLOCKS) == []
    _planted(monkeypatch, "eval", lambda p: p.add_argument("--planted-flag", type=int, default=7,
                                                             help="a flag the page lacks (default 7)"))
    assert pages.stale(CLI_BLOCKS) == ["cli.synopsis", "cli.eval"]


def test_a_changed_default_is_caught(monkeypatch):
    """A default the help states through ``%(default)s`` follows the parser into the page."""
    _planted(monkeypatch, "check-env", lambda p: p.set_defaults(steps=300))
    assert pages.stale(CLI_BLOCKS) == ["cli.check-env"]


def test_a_default_the_help_writes_out_and_the_parser_lacks_stops_the_generator(monkeypatch):
    _planted(monkeypatch, "air-combat range-map", lambda p: p.set_defaults(trace_aspects=[0.0, 45.0]))
    with pytest.raises(ReportError, match="its help says default '0 90 180', the parser's is '0 45'"):
        pages.stale(CLI_BLOCKS)


def test_a_section_or_command_without_its_markers_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    page = tmp_path / "reference.md"
    page.write_text(REFERENCE.replace("<!-- generated:config.a2c -->\n", "", 1))
    import dataclasses

    monkeypatch.setattr(pages, "BLOCKS", tuple(dataclasses.replace(b, page=page) for b in CONFIG_BLOCKS))
    assert pages.main(["--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "generated:config.a2c" in err


@pytest.mark.parametrize(("field", "shown"), [
    ("workers.num_envs", "int > 0"), ("compression_level", "int in [0, 16]"), ("max_wall_s", "float > 0 or null"),
    ("workers.torch_threads", "int ≥ 1 or `auto`"), ("compression", "`auto` | `lz4` | `none`"),
    ("reseed.at_env_steps", "list of int"), ("workers.resources", "mapping to float"),
    ("selfplay.latest_prob", "float in [0, 1]"), ("rollback.lr_scale", "float in (0, 1]"),
])
def test_types_read_as_a_user_types_them(field, shown):
    fields = {key: f for key, f, _ in reference_tables.leaves(RunConfig)}
    assert reference_tables.type_name(fields[field]) == shown


def test_defaults_read_as_yaml():
    assert [reference_tables._value(v) for v in (None, True, 1_000_000, 2.5e-3, 1e-5, 300.0, [64, 64], {})] == \
        ["null", "true", "1,000,000", "0.0025", "1e-5", "300.0", "[64, 64]", "{}"]
