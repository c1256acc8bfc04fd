"""Bring your own env and network: entry points, the conformance checker, MultiDiscrete and Dict
spaces, Gymnasium outcomes, and a user-defined env and network trained through the whole system
(real Ray workers, codec, gate, learner, checkpoint, resume, ``rl-system eval``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from rl_system.algos import get_algorithm
from rl_system.cli.main import main
from rl_system.config import load_config
from rl_system.envs import EntryPointError, make_env
from rl_system.envs.base import MultiDiscrete, TensorSpec
from rl_system.envs.checker import check_env

EXAMPLE = "examples/grid_reach/config.yaml"
GRID = "examples.grid_reach.env:GridReach"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- entry points ---------------------------------------------------------------------------------


def test_an_entry_point_names_a_vec_env_class_or_factory():
    env = make_env(GRID, 4, seed=0, size=5)
    assert env.num_envs == 4 and env.size == 5 and isinstance(env.action_spec, MultiDiscrete)
    env = make_env("gym:byo_fixtures:ByoDictMultiDiscrete-v0", 3, seed=0)  # the module registers the id
    assert set(env.observation_spec) == {"pos", "action_mask"}
    env.close()


BAD_INPUT = [
    (["env.name=NoSuchEnv"], r"env\.name: unknown env 'NoSuchEnv'; expected a registered name \(.*CartPole"),
    (["env.name=no_such_pkg.mod:Env"], r"env\.name: .*module 'no_such_pkg\.mod' does not import"),
    (["env.name=examples.grid_reach.env:Nope"], r"env\.name: .*has no attribute 'Nope'"),
    (["env.name=byo_fixtures:not_an_env"], r"env\.name: .*the factory returned dict, expected an rl_system\.envs\.base\.VecEnv"),
    ([f"env.name={GRID}", "model.network=byo_fixtures:NotANetwork"],
     r"model\.network: .*must be a torch\.nn\.Module subclass implementing ActorCriticNetwork"),
    ([f"env.name={GRID}", "model.network=byo_fixtures:NoEvaluate"],
     r"model\.network: .*no evaluate method"),
    ([f"env.name={GRID}", "model.network=nowhere:Net"], r"model\.network: module 'nowhere' does not import"),
    ([f"env.name={GRID}", "model.network=byo_fixtures:RecurrentNoSequence"],
     r"does not implement RecurrentActorCriticNetwork: no evaluate_sequence method"),
    (["env.name=byo_fixtures:WideMask"],
     r"'action_mask' must be bool of shape \(6,\) \(sum\(nvec\) = 6 flags for MultiDiscrete\(\(3, 3\)\)\), got .*\(9,\)"),
    (["env.kwargs={}", "env.name=gym:byo_fixtures:ByoMaskCollision-v0"], r"Dict observation key 'action_mask' collides"),
    (["algo=hmasd", "model.network=byo_fixtures:NoEvaluate"], r"model\.network: needs a network from the model: section, which algo 'hmasd' lacks; algo ppo, a2c have it"),
]


@pytest.mark.parametrize("overrides,expected", BAD_INPUT, ids=[b[0][-1].split("=")[1] for b in BAD_INPUT])
def test_bad_env_or_network_is_one_config_error_line_and_exit_2(capsys, tmp_path, overrides, expected):
    sets = [a for o in overrides for a in ("--set", o)]
    code, out, err = run_cli(capsys, "train", EXAMPLE, "--run-dir", str(tmp_path / "run"), *sets)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rl-system: config error: "), err
    assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "run").exists()  # nothing started


# -- the conformance checker -----------------------------------------------------------------------


@pytest.mark.parametrize("name,kwargs", [
    ("CartPole", {}), ("Chaos", {}), ("Navigation", {}), ("AirCombat", {}), ("AliceBob", {"size": "small"}),
    ("gym:CartPole-v1", {}), ("gym:byo_fixtures:ByoDictMultiDiscrete-v0", {}), (GRID, {}),
    ("CartPole", {"velocities": False}), ("gym:rl_system.envs.minatar_gym:MinAtar/Breakout-v1", {}),
    ("gym:popgym:popgym-RepeatPreviousEasy-v0", {}),
])
def test_every_built_in_and_example_env_conforms(name, kwargs):
    findings = check_env(name, num_envs=4, kwargs=kwargs, steps=120)
    assert not [f.line() for f in findings if f.failed]
    assert {f.check for f in findings} >= {"specs", "reset", "step", "autoreset", "determinism", "state_dict",
                                          "bad_action", "speed"}


@pytest.mark.parametrize("env,check", [
    ("NoAutoReset", "autoreset"), ("Nondeterministic", "determinism"), ("WrongDtype", "step"),
    ("NoLegalAction", "action_mask"),
])
def test_a_broken_env_fails_the_check_that_catches_it(env, check):
    findings = {f.check: f for f in check_env(f"byo_fixtures:{env}", num_envs=6, steps=120)}
    assert findings[check].failed, findings[check].line()
    assert sum(f.failed for f in findings.values()) == 1, [f.line() for f in findings.values() if f.failed]


def test_check_env_command_prints_one_line_per_finding_and_exits_1_on_a_violation(capsys):
    code, out, _ = run_cli(capsys, "check-env", GRID, "--env", "size=5", "--num-envs", "4", "--steps", "60")
    assert code == 0 and out.strip().splitlines()[-1].endswith("conforms"), out
    assert all(re.match(r"(PASS|FAIL|SKIP|INFO) \w+: ", ln) for ln in out.strip().splitlines()[:-1]), out
    code, out, _ = run_cli(capsys, "check-env", "byo_fixtures:WrongDtype", "--steps", "30")
    assert code == 1 and "FAIL step: step().reward has dtype torch.float64, declared torch.float32" in out, out
    code, _, err = run_cli(capsys, "check-env", "NoSuchEnv")
    assert code == 2 and err.count("\n") == 1 and "env.name: unknown env 'NoSuchEnv'" in err


# -- spaces -----------------------------------------------------------------------------------------


def test_multi_discrete_policy_samples_only_legal_sub_actions_and_scores_what_it_sampled():
    cfg = load_config(None, [f"env.name={GRID}"])
    spec = MultiDiscrete((3, 4))
    obs_spec = {"obs": TensorSpec((5,)), "action_mask": TensorSpec((7,), torch.bool)}
    policy = get_algorithm("ppo").make_policy(obs_spec, spec, cfg)
    mask = torch.ones(3000, 7, dtype=torch.bool)
    mask[:, 0] = False      # sub-action 0 never 0
    mask[::2, 3:6] = False  # even rows: sub-action 1 may only be 3
    obs = {"obs": torch.randn(3000, 5), "action_mask": mask}
    action, logp, _ = policy.act(obs)
    assert action.shape == (3000, 2) and action.dtype == torch.int64
    assert (action[:, 0] != 0).all() and (action[::2, 1] == 3).all()
    assert set(action[1::2, 1].tolist()) == {0, 1, 2, 3}
    logp2, entropy, _ = policy.evaluate(obs, action)
    assert torch.allclose(logp, logp2, atol=1e-5) and torch.isfinite(entropy).all()
    assert torch.allclose(logp[::2], policy.evaluate(obs, action)[0][::2])  # one legal choice: log 1 = 0 for it


def test_gymnasium_dict_observations_multi_discrete_actions_and_boolean_outcomes():
    cfg = load_config(None, ["env.name=gym:byo_fixtures:ByoDictMultiDiscrete-v0", "workers.rollout_len=12"])
    algo = get_algorithm("ppo")
    env = make_env(cfg.env.name, 5, seed=0)
    sampler = algo.make_sampler(env, algo.make_policy(env.observation_spec, env.action_spec, cfg), cfg,
                                torch.device("cpu"))
    sampler.reset(seed=0)
    columns, episodes = sampler.collect()
    assert columns["obs.action_mask"].dtype == torch.bool and columns["action"].shape == (12, 5, 2)
    assert (columns["action"][..., 0] == 0).all()  # the mask forbids 1 for sub-action 0
    assert len(episodes) == 15 and set(episodes.outcomes) == {"is_success"}
    # is_success is True exactly where the episode's last action chose 2 for sub-action 1
    done = columns["terminated"] | columns["truncated"]
    assert episodes.outcomes["is_success"].sum() == ((columns["action"][..., 1] == 2) & done).sum()
    env.close()


def test_reward_normalisation_scales_rewards_by_the_return_std_and_survives_a_checkpoint():
    cfg = load_config(None, ["ppo.normalize_reward=true", "workers.rollout_len=64", "env.name=CartPole"])
    algo = get_algorithm("ppo")
    env = make_env("CartPole", 16, seed=0)
    policy = algo.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler, trainer = algo.make_sampler(env, policy, cfg, torch.device("cpu")), algo.make_trainer(policy, cfg)
    sampler.reset(seed=0)
    batch, _ = sampler.collect()
    assert batch["disc_return"].shape == (64, 16) and batch["disc_return"].max() > 10  # CartPole: +1 per step
    trainer.update(batch, 0.0)
    std = float(trainer.return_norm.var.sqrt())
    assert abs(std - float(batch["disc_return"].std())) < 0.3 * std
    state = trainer.state_dict()
    fresh = algo.make_trainer(policy, cfg)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.return_norm.var, trainer.return_norm.var)
    fresh.load_state_dict(state["optimizer"])  # checkpoints holding the optimiser state alone still load


# -- a user's env and network through the whole system ------------------------------------------------


def test_docs_show_the_example_env_as_it_is_in_the_package():
    page = Path("docs/byo_env.md").read_text()
    for path in ("examples/grid_reach/env.py", "examples/grid_reach/config.yaml"):
        assert Path(path).read_text().strip() in page, f"docs/byo_env.md does not show {path} as it is"


@pytest.mark.slow
def test_user_env_and_network_train_checkpoint_resume_and_evaluate(ray_session, capsys, tmp_path):
    run = tmp_path / "run"
    common = ["--set", "model.network=examples.grid_reach.network:SharedTrunk", "--set", "model.kwargs={width: 64}",
              "--set", "tensorboard=false", "--set", "log_every_s=30", "--set", "checkpoint.every_rounds=2",
              "--quiet"]
    code, out, err = run_cli(capsys, "train", EXAMPLE, "--run-dir", str(run), *common,
                             "--set", "stop_at_target=false", "--set", "max_env_steps=40960")
    assert code == 0, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["reached_target"] and summary["dropped_rollouts"] == 0, summary
    assert summary["final_success_rate"] > 0.8, summary
    code, out, err = run_cli(capsys, "train", EXAMPLE, "--resume", str(run), *common,
                             "--set", "stop_at_target=false", "--set", "max_env_steps=53248")
    assert code == 0 and "resuming from" in out, err
    resumed = json.loads((run / "summary.json").read_text())
    assert resumed["env_steps"] == 53248 and resumed["policy_version"] == 13, resumed
    code, out, err = run_cli(capsys, "eval", str(run), "--pick", "latest", "--episodes", "40",
                             "--json", str(tmp_path / "eval.json"))
    assert code == 0, err
    result = json.loads((tmp_path / "eval.json").read_text())
    assert result["env"] == GRID and result["policy_version"] == 13
    assert result["return_mean"] > 1.3 and result["success_rate"] > 0.9, result


def test_a_factory_entry_point_builds_the_env():
    from rl_system.envs import resolve

    with pytest.raises(EntryPointError, match="expected 'package.module:Name'"):
        resolve("pkg.mod:")
    assert resolve(GRID).__name__ == "GridReach"
