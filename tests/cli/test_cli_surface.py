"""The user surface as a whole: every flag of every ``rl-system`` command says what it does, every
``--help`` exits 0, and ``rl-system eval``, ``rl-system export`` and the Python API
(``evaluate``, ``load_policy``, ``export``) read the same checkpoint of a run for the same
``--pick`` / ``pick=``, by default and for each choice, under the same option names."""

from __future__ import annotations

import argparse
import inspect

import pytest
from policy_checkpoint import write_policy_checkpoint

import rl_system
from rl_system.cli.main import main, parser


def _commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(words, parser)`` for ``p`` and every subcommand under it, nested ones included."""
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(parser()))


def test_every_option_and_positional_of_every_command_has_help_text():
    missing = [f"rl-system {' '.join(words)} {action.option_strings[0] if action.option_strings else action.dest}"
               for words, p in COMMANDS for action in p._actions
               if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
               and not (action.help or "").strip()]
    assert not missing, "flags without help=: " + ", ".join(missing)
    assert len(COMMANDS) >= 12  # rl-system, its 9 commands, air-combat range-map, rollouts inspect


@pytest.mark.parametrize("words", [words for words, _ in COMMANDS], ids=lambda w: " ".join(w) or "rl-system")
def test_help_of_every_command_exits_0(words, capsys):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args([*words, "--help"])
    assert stop.value.code == 0 and "usage: rl-system" in capsys.readouterr().out


# -- one pick of a run's checkpoint ----------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``scored``: a CartPole run holding v1, v2, v3 with training mean returns 5, 9, 2 (v0, unscored,
    pruned); ``unscored``: v0 and v1 with no mean return (the default falls back to the latest)."""
    from rl_system.checkpoint import CheckpointStore

    root = tmp_path_factory.mktemp("picks")
    out = {}
    for name, returns in (("scored", {1: 5.0, 2: 9.0, 3: 2.0}), ("unscored", {1: None})):
        run = write_policy_checkpoint(root / name, "cartpole_ppo.yaml")
        store = CheckpointStore(str(run / "checkpoints"))
        state, _ = store.load("ckpt-v00000000.rlck")
        for version, mean_return in returns.items():
            state["learner"]["version"] = version
            fields = {"policy_version": version} | ({"mean_return": mean_return} if mean_return is not None else {})
            store.save(state, fields)
        out[name] = run
    return out


@pytest.fixture
def read_versions(monkeypatch, tmp_path):
    """``read(run, pick) -> {surface: version read}`` for the five ways a user reads a run's policy;
    the statistics and the export itself are stubbed (what is compared is which checkpoint each read)."""
    import rl_system.policy.evaluation as evaluation
    import rl_system.policy.export as export

    seen = {}

    def fake_evaluate(state, **kwargs):
        seen["evaluated"] = int(state["learner"]["version"])
        return {"env": "CartPole", "policy_version": seen["evaluated"], "return_mean": 0.0, "return_std": 0.0,
                "length_mean": 1.0, "length_std": 0.0, "episodes": 1, "env_steps": 1, "opponent_version": None}

    def fake_export(policy, fmt, out, agent=None):
        seen["exported"] = policy.version
        return out

    monkeypatch.setattr(evaluation, "evaluate", fake_evaluate)
    monkeypatch.setattr(export, "export_policy", fake_export)

    def read(run, pick: str | None) -> dict[str, int]:
        flags = [] if pick is None else ["--pick", pick]
        kw = {} if pick is None else {"pick": pick}
        got = {}
        assert main(["eval", str(run), *flags, "--json", str(tmp_path / "eval.json")]) == 0
        got["rl-system eval"] = seen.pop("evaluated")
        assert main(["export", str(run), "--format", "torchscript", "--out", str(tmp_path / "p.pt"), *flags]) == 0
        got["rl-system export"] = seen.pop("exported")
        got["rl_system.evaluate"] = rl_system.evaluate(run, **kw)["policy_version"]
        got["rl_system.load_policy"] = rl_system.load_policy(run, **kw).version
        rl_system.export(run, "torchscript", tmp_path / "p.pt", **kw)
        got["rl_system.export"] = seen.pop("exported")
        return got

    return read


@pytest.mark.parametrize("run, pick, version", [
    ("scored", None, 2), ("scored", "best", 2), ("scored", "latest", 3), ("scored", "final", 3),
    ("scored", "v1", 1), ("unscored", None, 1), ("unscored", "best", 1), ("unscored", "v0", 0),
], ids=lambda v: str(v))
def test_eval_export_and_the_python_api_read_the_same_checkpoint_for_each_pick(runs, read_versions, run, pick,
                                                                               version, capsys):
    got = read_versions(runs[run], pick)
    assert got == dict.fromkeys(got, version), got
    capsys.readouterr()


def test_a_pick_the_run_lacks_is_one_line_naming_what_it_has(runs, capsys):
    run = runs["scored"]
    assert main(["eval", str(run), "--pick", "v7"]) == 2
    assert main(["export", str(run), "--format", "onnx", "--out", str(run / "p.onnx"), "--pick", "v7"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("rl-system: cannot ") for line in err), err
    assert all(line.endswith("has no checkpoint v7; it has v1, v2, v3 (best v2)") for line in err), err
    for read in (rl_system.evaluate, rl_system.load_policy):
        with pytest.raises(ValueError, match=r"has no checkpoint v7; it has v1, v2, v3 \(best v2\)$"):
            read(run, pick="v7")
    one_file = run / "checkpoints" / "ckpt-v00000002.rlck"
    with pytest.raises(ValueError, match="is one checkpoint, v2, not v3$"):
        rl_system.load_policy(one_file, pick="v3")
    assert rl_system.load_policy(one_file, pick="best").version == 2  # a file holds just itself
    with pytest.raises(SystemExit):
        parser().parse_args(["eval", str(run), "--pick", "worst"])
    assert "pick must be best, latest, final or v<N>" in capsys.readouterr().err


def test_eval_and_the_python_api_share_option_names_and_defaults():
    """``rl-system eval``'s options that ``rl_system.evaluate`` also takes have the same names
    (flag ``--num-envs`` is ``num_envs``) and defaults; export and load_policy pick as eval does."""
    eval_parser = dict(COMMANDS)[("eval",)]
    flags = {a.dest: a.default for a in eval_parser._actions}
    params = {name: p.default for name, p in inspect.signature(rl_system.evaluate).parameters.items()}
    shared = ("episodes", "seed", "deterministic", "num_envs", "device", "pick")
    assert {k: flags[k] for k in shared} == {k: params[k] for k in shared}
    export_flags = {a.dest: a.default for a in dict(COMMANDS)[("export",)]._actions}
    for function in (rl_system.load_policy, rl_system.export):
        assert inspect.signature(function).parameters["pick"].default == flags["pick"] == export_flags["pick"]
    assert inspect.signature(rl_system.export).parameters["agent"].default is export_flags["agent"] is None
    assert inspect.signature(rl_system.load_policy).parameters["device"].default == flags["device"]


def test_a_number_of_episodes_below_1_is_refused_alike_before_the_checkpoint_is_read(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nowhere"), "--episodes", "0"]) == 2
    assert capsys.readouterr().err.strip() == "rl-system: --episodes: expected a positive number"
    with pytest.raises(ValueError, match="^episodes: expected a positive number, got 0$"):
        rl_system.evaluate(tmp_path / "nowhere", episodes=0)


@pytest.mark.parametrize("argv", [
    ["train", "{missing}.yaml"],
    ["tune", "{missing}.yaml", "--search", "seed=grid(0, 1)"],
    ["eval", "{missing}"],
    ["eval", "{run}", "--opponent", "{missing}"],
    ["export", "{missing}", "--format", "onnx", "--out", "{missing}.onnx"],
    ["rollouts", "inspect", "{missing}.arrow"],
    ["check-env", "no_such_env"],
], ids=lambda argv: argv[0] + ("_opponent" if "--opponent" in argv else ""))
def test_every_command_given_what_is_not_there_says_so_in_one_line_and_exits_2(argv, tmp_path, capsys):
    """Exit 2 is bad input on every command (a path, a name, a config); 1 is a run that failed."""
    missing = str(tmp_path / "nowhere")
    run = str(write_policy_checkpoint(tmp_path / "run", "cartpole_ppo.yaml")) if "{run}" in argv else ""
    code = main([a.replace("{missing}", missing).replace("{run}", run) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("rl-system: "), (code, err)
