"""The algorithm registry: every algorithm declares itself once, the run config takes its name and
section from there, and what a run asks of it is checked against its capabilities, in one line
that names who has the capability. Nothing outside ``rl_system/algos`` branches on an algorithm's
name."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from rl_system.algos import get_algorithm, registry
from rl_system.algos import spec as cap
from rl_system.cli.main import main
from rl_system.config import ConfigError, RunConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = "launch/configs/cartpole_ppo.yaml"


def test_every_registered_algorithm_has_its_section_and_factories():
    assert registry.names()[:3] == ["ppo", "mappo", "hmasd"]
    for name, spec in registry.specs().items():
        assert spec.name == name and spec.capabilities <= set(cap.CAPABILITIES)
        assert isinstance(getattr(RunConfig(), name), spec.config)  # the run config carries its section
        module = importlib.import_module(spec.module)
        assert all(callable(getattr(module, f)) for f in ("make_policy", "make_sampler", "make_trainer"))
        assert get_algorithm(name).module is module


def test_an_unknown_algo_names_the_registered_ones(capsys):
    with pytest.raises(ConfigError, match=r"^algo: unknown algorithm 'a3c'; registered: ppo, mappo, hmasd"):
        load_config(CARTPOLE, ["algo=a3c"])
    assert main(["train", CARTPOLE, "--set", "algo=a3c"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "registered: ppo, mappo, hmasd" in err


ASKED = [  # a run's setting, the capability it needs, an algorithm without it
    (["learner.gradients=closed_form"], cap.CLOSED_FORM, "mappo"),
    (["learner.gradients=autograd", "learner.compile=true"], cap.COMPILE, "hmasd"),
    (["learner.gradients=autograd", "ppo.value_target=vtrace", "max_policy_lag=1"], cap.VTRACE, "mappo"),
    (["learner.gradients=autograd", "ppo.ratio_anchor=proximal", "max_policy_lag=1"], cap.PROXIMAL, "hmasd"),
    (["learner.gradients=autograd", "model.network=examples.cue_match.env:CueMatch"], cap.MODEL_SECTION, "mappo"),
    (["learner.gradients=autograd", "selfplay.enabled=true"], cap.SELFPLAY, "hmasd"),
]


@pytest.mark.parametrize("overrides,capability,algo", ASKED, ids=[a[1].key for a in ASKED])
def test_a_capability_the_algorithm_lacks_is_one_line_naming_who_has_it(overrides, capability, algo):
    have = registry.having(capability)
    assert have and algo not in have
    with pytest.raises(ConfigError) as err:
        load_config(CARTPOLE, [*overrides, f"algo={algo}"])
    line = str(err.value)
    assert line.splitlines() == [line]
    assert f"needs {capability.title}, which algo {algo!r} lacks; algo {', '.join(have)} ha" in line
    if capability is not cap.MODEL_SECTION:  # PPO has the rest: the same settings load there
        assert load_config(CARTPOLE, [*overrides, "algo=ppo"]).algo == "ppo"


def test_require_names_the_capability_and_every_algorithm_with_it():
    with pytest.raises(registry.MissingCapability) as err:
        registry.require("hmasd", cap.EXPORT, "rl-system export")
    assert str(err.value) == ("rl-system export: needs ONNX and TorchScript export, which algo 'hmasd' lacks; "
                              "algo ppo, mappo, a2c have it")
    registry.require("mappo", cap.EXPORT, "rl-system export")  # had: nothing raised


def test_a_capability_refused_at_the_command_line_exits_2(capsys):
    assert main(["train", "launch/configs/alice_bob_hmasd.yaml", "--set", "learner.compile=true"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rl-system: config error: learner.compile: needs a compiled loss, which algo 'hmasd' lacks; "
                   "algo ppo has it")


def _names_compared(path: Path, names: set[str]) -> list[str]:
    """``algo == "ppo"``-like comparisons (and ``in ("ppo", ...)``) with a registered name in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                hits = [v.value for v in values if isinstance(v, ast.Constant) and v.value in names]
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {h!r}" for h in hits]
    return found


def test_no_code_outside_the_algorithms_compares_an_algorithms_name():
    names = set(registry.names())
    files = [p for p in [*(ROOT / "rl_system").rglob("*.py"), *(ROOT / "envs").rglob("*.py")]
             if "algos" not in p.relative_to(ROOT).parts]
    found = [hit for p in files for hit in _names_compared(p, names)]
    assert not found, found


def test_the_name_check_sees_a_planted_comparison(tmp_path):
    planted = ROOT / "rl_system" / "_planted_for_test.py"
    try:
        planted.write_text('def f(cfg):\n    return cfg.algo == "mappo" or cfg.algo in ("hmasd",)\n')
        assert [h.split(": ")[1] for h in _names_compared(planted, set(registry.names()))] == ["'mappo'", "'hmasd'"]
    finally:
        planted.unlink()
