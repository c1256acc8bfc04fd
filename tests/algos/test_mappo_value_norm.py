"""MAPPO's value normalisation (``mappo.value_norm``, :mod:`rl_system.algos.value_norm`): the
critic predicts normalised targets, rollouts leave the worker in return units (so GAE is the one a
critic predicting returns directly would give), the statistics travel in the policy's state, a
one-agent export gives values in return units, and a run learns with it."""

from __future__ import annotations

import pytest
import torch

from examples.cue_match.env import CueMatch
from rl_system.algos import get_algorithm
from rl_system.algos.mappo import columns as col
from rl_system.algos.mappo.one_agent import OneAgentPolicy
from rl_system.algos.value_norm import ValueNorm
from rl_system.config import load_config

MAPPO = get_algorithm("mappo")


def _cfg(*overrides: str):
    return load_config(None, ["algo=mappo", "env.name=examples.cue_match.env:CueMatch", "workers.rollout_len=16",
                              "mappo.lr=3e-3", *overrides])


def _policy(cfg, env):
    torch.manual_seed(0)
    return MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)


def _norm_with(mean: float, std: float) -> ValueNorm:
    """A ValueNorm whose statistics are ``mean`` and ``std`` (one batch of two values folded in)."""
    norm = ValueNorm()
    norm.update(torch.tensor([mean - std, mean + std]))
    got_mean, got_std = norm.mean_std()
    assert torch.allclose(got_mean, torch.tensor(mean)) and torch.allclose(got_std, torch.tensor(std))
    return norm


def test_denormalize_inverts_normalize():
    norm = _norm_with(3.0, 0.5)
    x = torch.randn(7, 3)
    assert torch.allclose(norm.denormalize(norm.normalize(x)), x, atol=1e-6)


@pytest.mark.parametrize("critic", ["central", "local"])
def test_a_rollout_and_its_advantages_are_those_of_a_critic_that_predicts_returns(critic):
    """Policy B: A's weights, value normalisation with statistics (m, s), and a critic whose output
    layer gives A's values in B's units. Both collect the same rollout; B's values leave its worker
    in return units, so the two rollouts and their advantages agree; B's returns are normalised."""
    env_a, env_b = CueMatch(8, seed=1, horizon=5), CueMatch(8, seed=1, horizon=5)  # 16 steps: truncations inside
    plain, normed = _cfg(f"mappo.critic={critic}"), _cfg(f"mappo.critic={critic}", "mappo.value_norm=true")
    a, b = _policy(plain, env_a), _policy(normed, env_b)
    b.load_state_dict(a.state_dict(), strict=False)  # A has no value_norm buffers
    mean, std = 2.0, 4.0
    b.value_norm.load_state_dict(_norm_with(mean, std).state_dict())
    with torch.no_grad():
        out = b.critic[-1]
        out.weight.div_(std)
        out.bias.sub_(mean).div_(std)
    cols = []
    for policy, env, cfg in ((a, env_a, plain), (b, env_b, normed)):
        sampler = MAPPO.make_sampler(env, policy, cfg, torch.device("cpu"))
        sampler.reset(seed=1)
        torch.manual_seed(5)
        cols.append({k: v.clone() for k, v in sampler.collect()[0].items()})
    ca, cb = cols
    assert bool(ca[col.TRUNCATED].any())  # the truncation bootstrap is exercised
    for name in (col.VALUE, col.LAST_VALUE, col.TRUNC_VALUE):
        assert torch.allclose(ca[name], cb[name], atol=1e-4), name
    assert torch.equal(ca[col.ACTION], cb[col.ACTION])
    da, db = MAPPO.make_trainer(a, plain).prepare(ca), MAPPO.make_trainer(b, normed).prepare(cb)
    assert torch.allclose(da[col.ADVANTAGE], db[col.ADVANTAGE], atol=1e-4)
    # B's statistics now hold this batch's returns too; its targets and old values are in its units.
    norm = b.value_norm
    assert torch.allclose(norm.denormalize(db[col.RETURN]), da[col.RETURN], atol=1e-4)
    assert torch.allclose(db[col.VALUE], (da[col.VALUE] - mean) / std, atol=1e-4)


def test_the_statistics_travel_in_the_policy_state_and_a_one_agent_export_gives_returns():
    env = CueMatch(4, seed=0)
    cfg = _cfg("mappo.critic=local", "mappo.share_params=false", "mappo.value_norm=true")
    policy = _policy(cfg, env)
    policy.value_norm.load_state_dict(_norm_with(5.0, 2.0).state_dict())
    fresh = _policy(cfg, env)
    fresh.load_state_dict(policy.state_dict())  # what workers and checkpoints receive
    assert [float(x) for x in fresh.value_norm.mean_std()] == pytest.approx([5.0, 2.0])
    obs = env.reset(seed=0)
    with torch.no_grad():
        raw = policy.critic(policy._critic_in(obs)).squeeze(-1)  # [B, n], normalised units
        for agent in range(2):
            _, _, value = OneAgentPolicy(policy, agent)(obs["obs"][:, agent])
            assert torch.allclose(value, raw[:, agent] * 2.0 + 5.0, atol=1e-5)
    without = _policy(_cfg("mappo.critic=local"), env)
    assert without.value_norm is None and not any("value_norm" in k for k in without.state_dict())


def test_mappo_with_value_norm_learns_the_cue_game():
    torch.set_num_threads(1)  # small tensors (restored after the test)
    cfg = _cfg("mappo.value_norm=true")
    env = CueMatch(32, seed=0)
    policy = _policy(cfg, env)
    sampler, trainer = MAPPO.make_sampler(env, policy, cfg, torch.device("cpu")), MAPPO.make_trainer(policy, cfg)
    sampler.reset(seed=0)
    returns = []
    for r in range(30):
        cols, episodes = sampler.collect()
        trainer.update({k: v.clone() for k, v in cols.items()}, r / 30)
        returns.append(float(episodes.returns.mean()))
    assert returns[0] < 4.5 and returns[-1] >= 7.2, returns  # 8 steps: random play ~2.7-3.5, perfect 8
    mean, std = policy.value_norm.mean_std()
    # The targets folded in: 1 a step, and at the time limit the value bootstrapped (toward 1 / (1 - 0.99)).
    assert 1.0 < float(mean) < 100.0 and float(std) > 0.1, (mean, std)
