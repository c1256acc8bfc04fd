"""rl_system.policy.evaluation: the per-env episode quota that keeps short episodes from dominating;
``rl-system eval``'s env overrides, checkpoint picks and flag conflicts; each agent's return beside
the team's on a multi-agent run."""

import pytest
import torch

from rl_system.config import RunConfig
from rl_system.policy.evaluation import _within_quota


def test_quota_keeps_each_envs_first_episodes_in_finishing_order():
    counts = torch.zeros(3, dtype=torch.int64)
    keep = _within_quota(torch.tensor([0, 1, 0, 0, 2, 1]), counts, per_env=2)
    assert keep.tolist() == [True, True, True, False, True, True] and counts.tolist() == [2, 2, 1]
    keep = _within_quota(torch.tensor([1, 2, 2, 0]), counts, per_env=2)  # the next rollout
    assert keep.tolist() == [False, True, False, False] and counts.tolist() == [2, 2, 2]
    assert _within_quota(torch.tensor([], dtype=torch.int64), counts, per_env=2).numel() == 0


# -- `rl-system eval RUN --env KWARG=VALUE` ------------------------------------------------------

def _alice_bob_checkpoint(run_dir):
    """A freshly initialised HMASD policy on the small Alice_and_Bob map, saved as training does."""
    from rl_system.algos import get_algorithm
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.config import load_config
    from rl_system.envs import make_env

    cfg = load_config(None, ["algo=hmasd", "env.name=AliceBob", "env.kwargs={size: small}",
                             "workers.num_envs=4", "workers.rollout_len=30", "hmasd.skill_interval=10"])
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.kwargs)
    torch.manual_seed(0)
    policy = get_algorithm(cfg.algo).make_policy(env.observation_spec, env.action_spec, cfg)
    state = {"config": cfg.model_dump(), "learner": {"model": policy.state_dict(), "version": 1}}
    CheckpointStore(str(run_dir / "checkpoints")).save(state, {"policy_version": 1})
    return state


def test_eval_env_override_changes_only_the_env_kwargs_of_a_copy(tmp_path):
    import json

    from rl_system.cli.common import with_env_kwargs
    from rl_system.cli.main import main

    state = _alice_bob_checkpoint(tmp_path / "run")
    changed = with_env_kwargs(state, ["random_start=true", "max_episode_steps=12"])
    # The overrides go where a tested policy's env is built from: they win over kwargs and eval_kwargs.
    assert changed["config"]["env"]["eval_kwargs"] == {"random_start": True, "max_episode_steps": 12}
    assert RunConfig.model_validate(changed["config"]).env.test_kwargs() == {
        "size": "small", "random_start": True, "max_episode_steps": 12}
    assert state["config"]["env"] == {"name": "AliceBob", "kwargs": {"size": "small"}, "eval_kwargs": {}}
    out = tmp_path / "eval.json"
    assert main(["eval", str(tmp_path / "run"), "--episodes", "8", "--env", "max_episode_steps=12",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["episodes"] == 8 and result["length_mean"] <= 12  # the overridden time limit


def test_eval_kwargs_of_the_run_config_apply_to_tests_not_to_training(tmp_path):
    """A run trained with ``env.eval_kwargs`` is tested under them by default (here a shorter
    time limit), and ``--env`` still overrides them."""
    from rl_system.cli.common import with_env_kwargs
    from rl_system.policy.evaluation import evaluate

    state = _alice_bob_checkpoint(tmp_path / "run")
    state["config"]["env"]["eval_kwargs"] = {"max_episode_steps": 7}
    assert evaluate(state, episodes=8, seed=1)["length_mean"] <= 7
    longer = with_env_kwargs(state, ["max_episode_steps=30"])
    assert evaluate(longer, episodes=8, seed=1)["length_mean"] > 7  # an untrained policy rarely solves it


@pytest.mark.parametrize("override, needle", [
    ("bogus=1", "cannot evaluate: env 'AliceBob': "),
    ("view_radius=1", "cannot evaluate: the checkpoint's weights do not fit env 'AliceBob'"),
    ("random_start", "config error: --env 'random_start': expected KWARG=VALUE"),
])
def test_eval_env_override_errors_are_one_line_and_exit_2(tmp_path, capsys, override, needle):
    from rl_system.cli.main import main

    _alice_bob_checkpoint(tmp_path / "run")
    assert main(["eval", str(tmp_path / "run"), "--episodes", "2", "--env", override]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"rl-system: {needle}"), err


def test_eval_picks_the_checkpoint_with_the_best_training_return_by_default(tmp_path, capsys):
    import json

    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.cli.main import main

    state = _alice_bob_checkpoint(tmp_path / "run")
    store = CheckpointStore(str(tmp_path / "run" / "checkpoints"))
    for version, mean_return in ((2, 0.9), (3, 0.1)):
        state["learner"]["version"] = version
        store.save(state, {"policy_version": version, "mean_return": mean_return})
    out = tmp_path / "eval.json"
    for pick, version in (([], 2), (["--pick", "latest"], 3), (["--pick", "best"], 2)):
        assert main(["eval", str(tmp_path / "run"), *pick, "--episodes", "2", "--json", str(out)]) == 0
        assert json.loads(out.read_text())["checkpoint"].endswith(f"ckpt-v{version:08d}.rlck")
    capsys.readouterr()
    one_file = str(tmp_path / "run" / "checkpoints" / "ckpt-v00000002.rlck")
    assert main(["eval", one_file, "--pick", "v3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith("ckpt-v00000002.rlck is one checkpoint, v2, not v3"), err


@pytest.mark.parametrize("flags, says", [
    (["--render", "a.png", "--video", "a.mp4"], "--render and --video: one at a time"),
    (["--render", "a.png", "--opponent", "run"],
     "--opponent does not apply to --render (the episode is against the scripted opponent)"),
    (["--video", "a.mp4", "--greedy-level", "high"], "--greedy-level does not apply to --video"),
    (["--launch-map", "m.png", "--opponent", "run"],
     "--launch-map does not combine with --render, --video, --opponent or --greedy-level"),
    (["--launch-map", "m.png", "--video", "a.mp4", "--render", "a.png"], "--render and --video: one at a time"),
    (["--launch-map", "m.png", "--deterministic"], None),
    (["--opponent", "run", "--greedy-level", "low"], None),
])
def test_eval_flags_that_do_not_combine_are_refused_by_the_first_rule_that_applies(flags, says):
    from rl_system.cli.evaluate import conflict
    from rl_system.cli.main import parser

    assert conflict(parser().parse_args(["eval", "run", *flags])) == says


# -- each agent's return on a multi-agent run ----------------------------------------------------

def test_a_multi_agent_eval_reports_each_agents_return_beside_the_teams_mean(tmp_path, capsys):
    """The cue game with agent 0 leaving halfway (it earns at most 4 of 8 steps): the CLI's line and
    JSON and rl_system.evaluate give each agent's mean and std, whose mean is the team's return."""
    import json

    from policy_checkpoint import REPO, write_policy_checkpoint

    import rl_system
    from rl_system.cli.main import main

    run = write_policy_checkpoint(tmp_path / "run", str(REPO / "examples/cue_match/config.yaml"),
                                  ["env.kwargs={num_agents: 3, k: 4, horizon: 8, early: true}"], perturb=0.5)
    assert main(["eval", str(run), "--episodes", "40", "--deterministic", "--json", str(tmp_path / "e.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    from_cli = json.loads((tmp_path / "e.json").read_text())
    from_api = rl_system.evaluate(run, episodes=40, deterministic=True)
    for result in (from_cli, from_api):
        means, stds = result["agent_return_mean"], result["agent_return_std"]
        assert len(means) == len(stds) == 3 and sum(means) / 3 == pytest.approx(result["return_mean"])
        assert 0 <= means[0] <= 4 and all(0 <= m <= 8 for m in means) and all(s >= 0 for s in stds)
    assert from_api["agent_return_mean"] == from_cli["agent_return_mean"]  # same seed, same episodes
    shown = ", ".join(f"{i} {m:.2f} ± {s:.2f}" for i, (m, s) in enumerate(zip(means, stds)))
    assert lines[1] == f"  per agent: {shown}", lines


def test_hmasd_reports_each_agent_the_team_reward_and_a_single_agent_run_no_agents(tmp_path):
    """AliceBob gives one team reward: each agent's return is the team's. CartPole: no per-agent keys."""
    from policy_checkpoint import write_policy_checkpoint

    import rl_system
    from rl_system.cli.common import with_env_kwargs
    from rl_system.policy.evaluation import evaluate

    state = with_env_kwargs(_alice_bob_checkpoint(tmp_path / "hmasd"), ["max_episode_steps=12"])
    result = evaluate(state, episodes=4, seed=1)
    assert result["agent_return_mean"] == [result["return_mean"]] * 2
    write_policy_checkpoint(tmp_path / "ppo", "cartpole_ppo.yaml")
    single = rl_system.evaluate(tmp_path / "ppo", episodes=2)
    assert not [k for k in single if k.startswith("agent_")] and single["return_mean"] > 0
