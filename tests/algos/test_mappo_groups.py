"""Agent groups: agents of different kinds (observation widths, action kinds and shapes) train
together, a policy per group (:mod:`rl_system.algos.mappo.groups`, :mod:`.grouped`)."""

from __future__ import annotations

import pytest
import torch
from in_process import train_rounds

from examples.cue_match.env import CueMatch
from examples.cue_match.mixed import MixedCues
from rl_system.algos import get_algorithm
from rl_system.algos.mappo.grouped import GroupedActorCritic, RecurrentGroupedActorCritic
from rl_system.algos.mappo.groups import make_groups
from rl_system.algos.mappo.networks import MultiAgentActorCritic
from rl_system.config import ConfigError, load_config
from rl_system.envs.base import AgentBox, AgentDiscrete, AgentMultiDiscrete

MAPPO = get_algorithm("mappo")
MIXED = "examples.cue_match.mixed:MixedCues"


def _cfg(*overrides: str, env: str = MIXED):
    return load_config(None, ["algo=mappo", f"env.name={env}", *overrides])


def _env(num_envs: int = 8, **kwargs) -> MixedCues:
    return MixedCues(num_envs, seed=0, **{"callers": 2, **kwargs})


def test_by_default_a_group_is_the_agents_of_identical_spaces_named_after_them():
    env = _env()
    groups = make_groups(env.observation_spec, env.action_spec)
    assert [(g.name, g.agents, g.obs_width) for g in groups] == [("caller", (0, 1), 3), ("mover", (2,), 2),
                                                                 ("picker", (3,), 5)]
    assert [type(g.action) for g in groups] == [AgentDiscrete, AgentBox, AgentMultiDiscrete]
    assert groups[0].action.num_agents == 2


def test_agents_all_alike_are_one_group_and_keep_the_one_network():
    env = CueMatch(4, seed=0, num_agents=3)
    policy = MAPPO.make_policy(env.observation_spec, env.action_spec, _cfg(env="examples.cue_match.env:CueMatch"))
    assert type(policy) is MultiAgentActorCritic  # the network, its parameter names and init as before groups
    assert [g.name for g in make_groups(env.observation_spec, env.action_spec)] == ["agent"]  # agent_0, agent_1, ..


@pytest.mark.parametrize("critic", ["central", "local"])
@pytest.mark.parametrize("share", ["true", "false"])
@pytest.mark.parametrize("recurrent", ["none", "gru"])
def test_each_group_acts_in_its_own_kind_and_scores_what_it_did(critic, share, recurrent):
    env = _env()
    cfg = _cfg(f"mappo.critic={critic}", f"mappo.share_params={share}", f"mappo.recurrent={recurrent}",
               "mappo.value_norm=true")
    policy = MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)
    assert isinstance(policy, RecurrentGroupedActorCritic if recurrent == "gru" else GroupedActorCritic)
    assert set(policy.groups) == {"caller", "mover", "picker"}
    obs = env.reset(seed=1)
    if recurrent == "none":
        action, logp, value = policy.act(obs)
        logp2, entropy, value2 = policy.evaluate(obs, action)
    else:
        state = policy.initial_state(8)
        action, logp, value, new_state = policy.act(obs, state)
        assert new_state.shape == state.shape
        seq = {k: v.unsqueeze(0) for k, v in obs.items()}
        logp2, entropy, value2 = (x[0] for x in policy.evaluate_sequence(seq, action.unsqueeze(0), state,
                                                                         torch.zeros(1, 8, dtype=torch.bool)))
    assert action.shape == (8, 4, 2) and action.dtype == torch.float32  # AgentMixed rows
    said, moved, picked = action[:, :2, 0], action[:, 2], action[:, 3]
    assert (said == said.round()).all() and said.max() <= 2 and (action[:, :2, 1] == 0).all()
    assert (picked == picked.round()).all() and picked[:, 0].max() <= 1 and picked[:, 1].max() <= 2
    assert moved.abs().max() > 0
    assert logp.shape == value.shape == entropy.shape == (8, 4)
    torch.testing.assert_close(logp2, logp, atol=1e-5, rtol=0)
    torch.testing.assert_close(value2, value)
    logp2.sum().backward()
    actors = [p for name, p in policy.named_parameters() if ".actor" in name]
    assert actors and all(p.grad is not None for p in actors)


def _train(rounds: int, *overrides: str) -> list[float]:
    """Each round's mean episode return of in-process training on 32 MixedCues envs."""
    torch.set_num_threads(1)
    cfg = _cfg("workers.rollout_len=16", "mappo.lr=3e-3", "mappo.ent_coef=0", *overrides)
    env = _env(32)
    torch.manual_seed(0)
    policy = MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler, trainer = MAPPO.make_sampler(env, policy, cfg, torch.device("cpu")), MAPPO.make_trainer(policy, cfg)
    sampler.reset(seed=0)
    return train_rounds(sampler, trainer, rounds)


@pytest.mark.parametrize("critic", ["central", "local"])
def test_a_discrete_a_continuous_and_a_multi_discrete_group_learn_together(critic):
    returns = _train(15, f"mappo.critic={critic}")
    assert returns[0] < 3.5 and returns[-1] >= 6.3, returns  # random ~2.9 an episode of 8, answered exactly 8


def test_named_groups_split_alike_agents_and_bad_maps_are_one_line():
    env = _env()
    spec, act = env.observation_spec, env.action_spec
    named = {"first": ["caller_0"], "second": ["caller_1"], "mover": ["mover_0"], "picker": ["picker_0"]}
    groups = make_groups(spec, act, named)
    assert [(g.name, g.agents) for g in groups] == [("first", (0,)), ("second", (1,)), ("mover", (2,)),
                                                    ("picker", (3,))]
    policy = MAPPO.make_policy(spec, act, _cfg())
    assert policy.num_agents == 4
    bad = {
        "unknown": ({**named, "first": ["caller_9"]}, "group 'first' names agent 'caller_9', which the env does not "
                                                      "have (its agents: caller_0, caller_1, mover_0, picker_0)"),
        "left out": ({"callers": ["caller_0", "caller_1"], "mover": ["mover_0"]},
                     "mappo.groups leaves agent 'picker_0' out of every group"),
        "twice": ({**named, "second": ["caller_1", "caller_0"]}, "agent 'caller_0' is in groups 'first' and 'second'"),
        "unlike": ({"callers": ["caller_0", "mover_0"], "rest": ["caller_1", "picker_0"]},
                   "group 'callers' holds agent 'caller_0' (obs width 3, Discrete(3)) and agent 'mover_0' (obs width "
                   "2, Box(shape=(2,), low=-1.0, high=1.0)); a group's agents need the same spaces"),
    }
    for case, (groups_map, says) in bad.items():
        with pytest.raises(ValueError) as err:
            make_groups(spec, act, groups_map)
        assert says in str(err.value) and "\n" not in str(err.value), case


def test_a_bad_group_map_stops_train_with_one_line_and_exit_2(capsys, tmp_path):
    from rl_system.cli.main import main

    code = main(["train", "examples/cue_match/config_mixed.yaml", "--run-dir", str(tmp_path / "run"),
                 "--set", "mappo.groups={callers: [caller_0, caller_1], movers: [mover_0]}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0] == ("rl-system: config error: mappo on env 'examples.cue_match.mixed:MixedCues': mappo.groups "
                        "leaves agent 'picker_0' out of every group (the env's agents: caller_0, caller_1, mover_0, "
                        "picker_0)"), lines
    assert not (tmp_path / "run").exists()


def test_hmasd_says_in_one_line_that_it_takes_one_action_kind():
    from rl_system.run.startup import probe_specs

    with pytest.raises(ConfigError, match=r"^env 'examples.cue_match.mixed:MixedCues' \(its agents' actions differ in "
                                          r"kind or shape\): needs agents of different kinds, a policy per agent "
                                          r"group, which algo 'hmasd' lacks; algo mappo has it$"):
        probe_specs(load_config(None, ["algo=hmasd", f"env.name={MIXED}"]))
    with pytest.raises(ValueError, match=r"^algo hmasd takes agents of one action kind and shape; this env's differ "
                                         r"\(AgentMixed\(Discrete\(3\), .*algo mappo trains them as agent groups$"):
        env = _env()
        get_algorithm("hmasd").make_policy(env.observation_spec, env.action_spec, load_config(None, ["algo=hmasd"]))


def test_groups_act_at_random_on_request_and_a_checkpoint_round_trip_keeps_every_group():
    env = _env()
    cfg = _cfg()
    torch.manual_seed(0)
    policy = MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)
    again = MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)
    again.load_state_dict(policy.state_dict())
    obs = env.reset(seed=2)
    want, _, _ = policy.act(obs, deterministic=True)
    got, _, _ = again.act(obs, deterministic=True)
    assert torch.equal(want, got)
    again.acting_at_random = frozenset({"mover"})
    torch.manual_seed(1)
    drawn = torch.stack([again.act(obs, deterministic=True)[0] for _ in range(2)])
    assert torch.equal(drawn[0, :, [0, 1, 3]], want[:, [0, 1, 3]])  # the trained groups as they were
    assert not torch.equal(drawn[0, :, 2], drawn[1, :, 2]) and drawn[:, :, 2].abs().max() <= 1  # uniform in bounds


def test_a_grouped_run_trains_through_ray_resumes_and_evaluates_and_exports_per_group(tmp_path):
    import json

    from rl_system import load_policy, train
    from rl_system.cli.main import main

    overrides = ["workers.num_workers=1", "workers.num_envs=64", "workers.rollout_len=16", "mappo.lr=3e-3",
                 "mappo.ent_coef=0", "target_return=6.5", "return_window=64", "max_env_steps=200000",
                 "checkpoint.every_rounds=5", "tensorboard=false", "env.kwargs={callers: 2}"]
    result = train(_cfg(*overrides), run_dir=tmp_path / "run")
    assert result.reached_target, result
    again = train(_cfg(*overrides, "stop_at_target=false", f"max_env_steps={result.env_steps + 2048}"),
                  run_dir=tmp_path / "resumed", resume=tmp_path / "run")
    assert again.env_steps > result.env_steps
    scores = {}
    for name, extra in (("trained", []), ("mover_random", ["--random-groups", "mover"]),
                        ("all_random", ["--random-groups", "caller", "mover", "picker"])):
        out = tmp_path / f"{name}.json"
        assert main(["eval", str(tmp_path / "run"), "--episodes", "64", "--deterministic", "--json", str(out),
                     *extra]) == 0  # a group at random draws uniformly all the same
        scores[name] = json.loads(out.read_text())["group_return_mean"]
    assert scores["trained"]["caller"] >= 7.0 and scores["all_random"]["caller"] < 4.0, scores
    assert scores["mover_random"]["mover"] < scores["trained"]["mover"] - 1.0, scores
    assert abs(scores["mover_random"]["picker"] - scores["trained"]["picker"]) < 0.5, scores  # the others unchanged
    # The mover's graph alone takes its own 2 values and moves as the grouped policy does.
    assert main(["export", str(tmp_path / "run"), "--format", "torchscript", "--agent", "2",
                 "--out", str(tmp_path / "mover.pt")]) == 0
    graph, policy = torch.jit.load(str(tmp_path / "mover.pt")), load_policy(tmp_path / "run")
    obs = _env(16).reset(seed=5)
    want, _ = policy.act(obs, deterministic=True)
    got = graph(obs["obs"][:, 2, :2])[0]
    torch.testing.assert_close(got, want[:, 2], atol=1e-5, rtol=0)


def test_an_env_that_names_its_agents_spaces_wrongly_is_told_in_one_line():
    from rl_system.envs.base import AgentMixed, AgentSpace, TensorSpec, validate_specs

    specs = {"state": TensorSpec((6,)), "obs": TensorSpec((2, 3))}
    one = AgentDiscrete(3, 1)
    cases = [
        (AgentDiscrete(3, 2, (AgentSpace("a", 3, one),)), "names 1 agents' spaces (agents) for 2 agents"),
        (AgentDiscrete(3, 2, (AgentSpace("a", 3, one), AgentSpace("b", 4, one))),
         "agent 'b': obs_width 4 must be within the rows' 3"),
        (AgentDiscrete(3, 2, (AgentSpace("a", 3, one), AgentSpace("b", 3, AgentDiscrete(3, 2)))),
         "agent 'b': its own action must be of one agent"),
    ]
    for spec, says in cases:
        with pytest.raises(ValueError) as err:
            validate_specs(specs, spec)
        assert says in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="agent 'b''s action must be an AgentDiscrete, AgentMultiDiscrete or "
                                         "AgentBox of one agent"):
        AgentMixed((AgentSpace("a", 3, one), AgentSpace("b", 3, AgentBox((2,), (0.0,) * 2, (1.0,) * 2, 2))))
