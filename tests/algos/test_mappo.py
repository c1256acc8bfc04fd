"""Multi-agent PPO (``algo: mappo``): the network's shapes for every per-agent action kind, shared and
per-agent parameters, central (MAPPO) and local (IPPO) critics, a central critic run per agent or
jointly (``mappo.central_value``); learning a cooperative cue game in-process (discrete,
continuous, agents that leave early, a joint critic); a run through Ray to its target."""

from __future__ import annotations

import pytest
import torch

from examples.cue_match.env import CueMatch
from rl_system.algos import get_algorithm
from rl_system.algos.mappo import columns as col
from rl_system.algos.update import Minibatch
from rl_system.checkpoint.store import CheckpointStore
from rl_system.config import ConfigError, load_config
from rl_system.envs.base import AgentBox, AgentDiscrete, AgentMultiDiscrete, TensorSpec

MAPPO = get_algorithm("mappo")
SPECS = {"state": TensorSpec((6,)), "obs": TensorSpec((3, 4))}


def _cfg(*overrides: str):
    return load_config(None, ["algo=mappo", "env.name=examples.cue_match.env:CueMatch", *overrides])


@pytest.mark.parametrize("action_spec", [AgentDiscrete(5, 3), AgentMultiDiscrete((2, 3), 3),
                                         AgentBox((2,), (-1.0, -1.0), (1.0, 1.0), 3)], ids=str)
@pytest.mark.parametrize("share", ["true", "false"])
@pytest.mark.parametrize("critic", ["central", "local"])
def test_act_and_evaluate_give_one_value_per_agent(action_spec, share, critic):
    policy = MAPPO.make_policy(SPECS, action_spec, _cfg(f"mappo.share_params={share}", f"mappo.critic={critic}"))
    obs = {"state": torch.randn(7, 6), "obs": torch.randn(7, 3, 4)}
    action, logp, value = policy.act(obs)
    assert action.shape == (7, *action_spec.shape) and logp.shape == value.shape == (7, 3)
    logp2, entropy, value2 = policy.evaluate(obs, action)
    assert torch.allclose(logp, logp2, atol=1e-5) and torch.allclose(value, value2) and entropy.shape == (7, 3)
    logp2.sum().backward()
    assert all(p.grad is not None for n, p in policy.named_parameters() if n.startswith("actor"))


def test_a_per_agent_network_acts_for_each_agent_from_its_own_weights():
    policy = MAPPO.make_policy(SPECS, AgentDiscrete(5, 3), _cfg("mappo.share_params=false"))
    obs = {"state": torch.randn(4, 6), "obs": torch.randn(4, 3, 4)}
    before = policy.evaluate(obs, torch.zeros(4, 3, dtype=torch.long))[0]
    with torch.no_grad():
        policy.actor[0].weight[1].add_(1.0)  # agent 1's first layer only
    after = policy.evaluate(obs, torch.zeros(4, 3, dtype=torch.long))[0]
    assert torch.equal(before[:, [0, 2]], after[:, [0, 2]]) and not torch.equal(before[:, 1], after[:, 1])


def test_a_central_critic_reads_the_state_a_local_one_the_agents_observation():
    obs = {"state": torch.randn(4, 6), "obs": torch.randn(4, 3, 4)}
    for critic, changed in (("central", "state"), ("local", "obs")):
        policy = MAPPO.make_policy(SPECS, AgentDiscrete(5, 3), _cfg(f"mappo.critic={critic}"))
        other = dict(obs, **{changed: obs[changed] + 1})
        assert not torch.equal(policy.value(obs), policy.value(other))
        unchanged = "obs" if changed == "state" else "state"
        assert torch.equal(policy.value(obs), policy.value(dict(obs, **{unchanged: obs[unchanged] + 1})))


@pytest.mark.parametrize("share", ["true", "false"])
def test_a_joint_critic_runs_once_per_env_step_and_gives_agent_i_its_output_i(share):
    """``central_value: joint``: the state alone, one row per env step, through one network (whatever
    ``share_params`` says) whose last layer has an output per agent."""
    policy = MAPPO.make_policy(SPECS, AgentDiscrete(5, 3), _cfg("mappo.central_value=joint",
                                                                f"mappo.share_params={share}"))
    first, last = policy.critic[0], policy.critic[-1]
    assert first.weight.shape == (1, 6, 64) and last.weight.shape == (1, 64, 3)  # no agent index in, n out
    rows = []
    first.register_forward_hook(lambda module, x, out: rows.append(x[0].shape))
    obs = {"state": torch.randn(7, 6), "obs": torch.randn(7, 3, 4)}
    value = policy.value(obs)
    assert rows == [(7, 1, 6)] and value.shape == (7, 3)
    assert torch.equal(value, policy.critic(obs["state"].unsqueeze(1)).squeeze(1))
    action, _, acted = policy.act(obs)
    assert torch.equal(acted, value) and torch.equal(policy.evaluate(obs, action)[2], value)
    assert torch.equal(policy.value(dict(obs, obs=obs["obs"] + 1)), value)  # the state's, not the agents' views
    with torch.no_grad():
        last.weight[0, :, 1].add_(1.0)  # agent 1's output only
    after = policy.value(obs)
    assert torch.equal(after[:, [0, 2]], value[:, [0, 2]]) and not torch.equal(after[:, 1], value[:, 1])
    policy.evaluate(obs, action)[2].sum().backward()
    assert all(p.grad is not None for n, p in policy.named_parameters() if n.startswith("critic"))


def test_a_joint_critic_on_a_local_one_is_one_line_and_exit_2(capsys, tmp_path):
    from rl_system.cli.main import main

    for bad, says in ((["mappo.central_value=joint", "mappo.critic=local"],
                       ("config error: mappo.central_value: joint runs a central critic once per env step on the "
                        "state; mappo.critic is local")),
                      (["mappo.central_value=shared"],
                       "config error: mappo.central_value: Input should be 'per_agent' or 'joint' (got 'shared')")):
        code = main(["train", "examples/cue_match/config.yaml", "--run-dir", str(tmp_path / "run"),
                     *[arg for kv in bad for arg in ("--set", kv)]])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"rl-system: {says}"), lines
        assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match=r"^mappo\.central_value: joint"):
        _cfg("mappo.central_value=joint", "mappo.critic=local")


def _train(rounds: int, env_kwargs: dict, *overrides: str) -> tuple[list[float], dict, object]:
    """``rounds`` of in-process training on 32 CueMatch envs: the mean episode return of each
    round, the last round's columns, the trainer."""
    torch.set_num_threads(1)  # small tensors: one thread is faster, and spares a loaded machine (restored after)
    cfg = _cfg("workers.rollout_len=16", *overrides)
    env = CueMatch(32, seed=0, **env_kwargs)
    torch.manual_seed(0)
    policy = MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler, trainer = MAPPO.make_sampler(env, policy, cfg, torch.device("cpu")), MAPPO.make_trainer(policy, cfg)
    sampler.reset(seed=0)
    returns, cols = [], {}
    for r in range(rounds):
        cols, episodes = sampler.collect()
        trainer.update({k: v.clone() for k, v in cols.items()}, r / rounds)
        returns.append(float(episodes.returns.mean()))
    return returns, cols, trainer


@pytest.mark.parametrize("critic,share,value", [("central", "true", "per_agent"), ("local", "false", "per_agent"),
                                                ("central", "true", "joint")],
                         ids=["mappo", "ippo_per_agent", "mappo_joint_critic"])
def test_mappo_and_ippo_learn_the_cue_game(critic, share, value):
    """Each agent its own reward: a joint critic's outputs learn each agent's return."""
    returns, cols, _ = _train(30, {}, f"mappo.critic={critic}", f"mappo.share_params={share}", "mappo.lr=3e-3",
                              f"mappo.central_value={value}")
    assert returns[0] < 4.5 and returns[-1] >= 7.2, returns  # 8 steps: random play ~2.7-3.5, perfect 8
    last_agent = cols[col.ACTION][..., -1]
    assert not bool((last_agent == 2).any())  # its masked action is never taken


@pytest.mark.parametrize("dist", ["gaussian", "tanh_normal"])
def test_continuous_actions_learn_the_cue_game(dist):
    returns, _, _ = _train(40, {"continuous": True}, "mappo.lr=3e-3", "mappo.ent_coef=0", f"mappo.action_dist={dist}")
    assert returns[0] < -4.0 and returns[-1] >= -1.6, returns  # |error| 0.2 a step at most


def test_a_tanh_normal_acts_inside_the_bounds_with_the_density_of_a_squashed_gaussian():
    """``action_dist: tanh_normal``: every draw inside ``[low, high]`` (each dimension its own), the
    mode at ``shift + scale * tanh(mean)``, ``logp`` torch's own TanhTransform density of the same draw,
    and a mean far past a bound still moves: a plain Gaussian's clipped action would not."""
    from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

    spec = AgentBox((2,), (0.0, -2.0), (1.0, 3.0), 3)
    policy = MAPPO.make_policy(SPECS, spec, _cfg("mappo.action_dist=tanh_normal", "mappo.init_log_std=0.5"))
    obs = {"state": torch.randn(500, 6), "obs": torch.randn(500, 3, 4)}
    with torch.no_grad():
        policy.actor[-1].bias.fill_(3.0)  # means far above the middle: many draws near the upper bound
        action, logp, _ = policy.act(obs)
        mode, _, _ = policy.act(obs, deterministic=True)
        mean = policy.actor(policy._with_ids(obs["obs"]))
    low, high = torch.tensor(spec.low), torch.tensor(spec.high)
    assert bool(((action >= low) & (action <= high)).all()) and float((high - action).min()) < 1e-3
    assert torch.allclose(mode, (high + low) / 2 + (high - low) / 2 * torch.tanh(mean))
    std = policy.log_std.exp().detach()
    ref = TransformedDistribution(Normal(mean, std), [TanhTransform(), AffineTransform((high + low) / 2,
                                                                                        (high - low) / 2)])
    inside = ((action - low).abs().min(-1).values > 1e-3) & ((high - action).abs().min(-1).values > 1e-3)
    assert torch.allclose(logp[inside], ref.log_prob(action).sum(-1)[inside], atol=1e-3)
    logp2, entropy, _ = policy.evaluate(obs, action)
    assert torch.equal(logp, logp2.detach()) and bool(torch.isfinite(logp2).all() and torch.isfinite(entropy).all())
    logp2.mean().backward()
    assert float(policy.actor[-1].bias.grad.abs().sum()) > 0


def test_a_tanh_normal_on_unbounded_actions_is_a_config_error():
    from rl_system.algos.mappo.networks import squash_bounds

    with pytest.raises(ValueError, match=r"tanh_normal needs finite bounds.*use action_dist: gaussian"):
        squash_bounds(AgentBox((2,), (-1.0, float("-inf")), (1.0, float("inf")), 3))


def test_agents_that_leave_early_carry_no_loss_after_they_left():
    returns, cols, trainer = _train(30, {"early": True}, "mappo.lr=3e-3")
    done = cols[col.AGENT_DONE]
    assert bool(done[:, :, 0].any()) and not bool(done[:, :, 1].any())  # only agent 0 leaves early
    # Agent 0 acts for 4 of the 8 steps: mean return over the agents (4 + 8) / 2 = 6 when learned.
    assert returns[-1] >= 5.0, returns  # random play: (4 / 3 + 8 / 2) / 2 = 2.7
    data = trainer.prepare({k: v.clone() for k, v in cols.items()})
    inactive = ~data[col.ACTIVE]
    assert bool(inactive[:, 0].any()) and not bool(inactive[:, 1].any())
    # The loss ignores inactive agent steps: scrambling their actions leaves it unchanged.
    scrambled = dict(data, **{col.ACTION: torch.where(inactive, 1 - data[col.ACTION].clamp(max=1),
                                                      data[col.ACTION])})
    rows = int(data[col.ACTIVE].sum())
    assert torch.equal(trainer.loss(Minibatch(data, rows))[0], trainer.loss(Minibatch(scrambled, rows))[0])


def test_ppo_and_hmasd_refuse_what_they_cannot_train_in_one_line(tmp_path):
    from rl_system.run.startup import probe_specs

    with pytest.raises(ConfigError, match=r"needs multi-agent envs, which algo 'ppo' lacks; algo mappo, hmasd have it"):
        probe_specs(load_config(None, ["env.name=examples.cue_match.env:CueMatch"]))
    with pytest.raises(ConfigError, match=r"hmasd on env .*needs a multi-agent env.*AgentBox"):
        probe_specs(load_config(None, ["algo=hmasd", "env.name=examples.cue_match.env:CueMatch",
                                       "env.kwargs={continuous: true}"]))
    with pytest.raises(ConfigError, match=r"^env 'CartPole': needs single-agent envs, which algo 'mappo' lacks; algo ppo, a2c have it$"):
        probe_specs(load_config(None, ["algo=mappo", "env.name=CartPole"]))


@pytest.mark.parametrize("value", ["per_agent", pytest.param("joint", marks=pytest.mark.slow)])
def test_a_mappo_run_reaches_its_target_through_ray_resumes_and_exports(tmp_path, value):
    import json

    from rl_system import export, load_policy, train
    from rl_system.cli.main import main

    # One worker of 64 envs: 1,024 env steps a round as two of 32 gave, one actor start less a run.
    overrides = ["workers.num_workers=1", "workers.num_envs=64", "workers.rollout_len=16", "mappo.lr=3e-3",
                 "target_return=7.0", "return_window=64", "max_env_steps=200000", "checkpoint.every_rounds=5",
                 "tensorboard=false", f"mappo.central_value={value}"]
    result = train(_cfg(*overrides), run_dir=tmp_path / "run")
    assert result.reached_target, result
    # Checkpoints count env steps (1,024 a round), not agent steps (2,048): the last one holds the run's.
    last = CheckpointStore(str(tmp_path / "run" / "checkpoints")).list()[-1]
    assert last.manifest["env_steps"] == result.env_steps, last
    again = train(_cfg(*overrides, "stop_at_target=false", f"max_env_steps={result.env_steps + 4096}"),
                  run_dir=tmp_path / "resumed", resume=tmp_path / "run")
    assert again.env_steps > result.env_steps
    out = tmp_path / "eval.json"
    assert main(["eval", str(tmp_path / "run"), "--episodes", "32", "--deterministic", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["return_mean"] >= 7.0
    # The joint policy (every agent's action in one graph) as ONNX, acting as the network does.
    ort = pytest.importorskip("onnxruntime")
    path = export(tmp_path / "run", "onnx", tmp_path / "policy.onnx")
    policy = load_policy(tmp_path / "run")
    env = CueMatch(16, seed=3)
    obs = env.reset(seed=3)
    want, _ = policy.act(obs, deterministic=True)
    got = ort.InferenceSession(str(path)).run(["action"], {k: v.numpy() for k, v in obs.items()})[0]
    assert (got == want.numpy()).all() and got.shape == (16, 2)
