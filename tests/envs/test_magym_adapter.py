"""The Tuple-spaced Gymnasium adapter (rl_system.envs.magym_adapter) on the real Level-Based Foraging
and Multi-Robot Warehouse envs: specs, views without copies, seeding, team rewards, the episode
ends (LBF's food collected vs its step limit, RWARE's step limit), final_obs against the raw env,
the error lines, and the conformance checker."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from rl_system.envs import EntryPointError, make_env
from rl_system.envs.base import AGENT_OBS, STATE, AgentDiscrete
from rl_system.envs.checker import FAIL, check_env

LBF = "magym:Foraging-8x8-2p-3f-v3"
LBF_SMALL = "magym:Foraging-5x5-2p-1f-v3"  # one food on a small field: random play collects it now and then
RWARE = "magym:rware-tiny-2ag-v2"


def random_actions(env, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, env.action_spec.n, (env.num_envs, env.num_agents), generator=generator)


def test_specs_and_views():
    with make_env(LBF, 3, seed=0) as lbf, make_env(RWARE, 2, seed=0) as rware:
        assert lbf.action_spec == AgentDiscrete(6, 2) and rware.action_spec == AgentDiscrete(5, 2)
        assert lbf.observation_spec[AGENT_OBS].shape == (2, 15) and lbf.observation_spec[STATE].shape == (30,)
        assert rware.observation_spec[AGENT_OBS].shape == (2, 71) and rware.observation_spec[STATE].shape == (142,)
        assert lbf.agent_names == ("agent_0", "agent_1")
        obs = lbf.reset()
        # The state is the agents' rows side by side: the same memory, and the same buffers every step.
        assert obs[STATE].data_ptr() == obs[AGENT_OBS].data_ptr()
        assert torch.equal(obs[STATE], obs[AGENT_OBS].reshape(3, -1))
        step = lbf.step(torch.zeros(3, 2, dtype=torch.int64))
        assert step.obs[AGENT_OBS].data_ptr() == obs[AGENT_OBS].data_ptr()
        assert step.reward.shape == (3, 2) and step.reward.dtype == torch.float32


def test_seeded_batch_is_reproducible_and_copy_i_gets_seed_plus_i():
    def trajectory(seed: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(1)
        with make_env(LBF, 4, seed=seed) as env:
            out = [env.reset()[AGENT_OBS].clone()]
            for _ in range(55):  # past the 50-step limit: auto-resets continue each copy's stream
                out.append(env.step(random_actions(env, g)).obs[AGENT_OBS].clone())
        return out

    a, b = trajectory(7), trajectory(7)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], trajectory(8)[0])
    with make_env(LBF, 1, seed=9) as one:  # copy 2 of the seed-7 batch is a batch of one seeded 9
        assert torch.equal(one.reset()[AGENT_OBS][0], a[0][2])


def test_team_reward_is_the_sum_and_food_collected_terminates():
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    agent, team = make_env(LBF_SMALL, 8, seed=3), make_env(LBF_SMALL, 8, seed=3, reward="team")
    returns, length = torch.zeros(8), torch.zeros(8, dtype=torch.int64)
    ends = {"terminated": 0, "truncated": 0}
    agent.reset(), team.reset()
    for t in range(120):
        step = team.step(random_actions(team, g2))
        if t < 50:  # the same copies with per-agent rewards: the team's is their sum
            per_agent = agent.step(random_actions(agent, g1)).reward
            assert step.reward.shape == (8,) and torch.allclose(step.reward, per_agent.sum(1))
        returns += step.reward
        length += 1
        assert not bool((step.terminated & step.truncated).any())
        # LBF's rewards are normalised: the team's episode return is 1 exactly when all food is gone.
        for i in torch.nonzero(step.terminated).flatten().tolist():
            assert returns[i] == pytest.approx(1.0) and length[i] <= 50
            ends["terminated"] += 1
        for i in torch.nonzero(step.truncated).flatten().tolist():
            assert returns[i] < 1.0 - 1e-6 and length[i] == 50  # food left: its 50-step limit cut it
            ends["truncated"] += 1
        done = step.terminated | step.truncated
        returns[done], length[done] = 0.0, 0
    agent.close(), team.close()
    assert ends["terminated"] > 0 and ends["truncated"] > 0, ends


def test_time_limit_is_a_truncation_with_final_obs_of_the_raw_env():
    import rware  # noqa: F401 - registers the ids

    env = make_env(RWARE, 2, seed=5, max_steps=4)
    raw = gymnasium.make("rware-tiny-2ag-v2", disable_env_checker=True, max_steps=4)
    obs = env.reset()
    raw_obs, _ = raw.reset(seed=5)  # copy 0 gets the seed itself
    assert np.array_equal(obs[AGENT_OBS][0].numpy(), np.stack(raw_obs))
    for t in range(4):
        actions = torch.tensor([[t % 5, 1], [2, 3]])
        step = env.step(actions)
        raw_obs, _, raw_done, _, _ = raw.step(actions[0].tolist())
        if t < 3:
            assert not bool(step.terminated.any() | step.truncated.any())
            assert step.final_obs is step.obs
    assert raw_done and step.truncated.tolist() == [True, True] and not bool(step.terminated.any())
    assert np.array_equal(step.final_obs[AGENT_OBS][0].numpy(), np.stack(raw_obs))
    assert np.array_equal(step.obs[AGENT_OBS][0].numpy(), np.stack(raw.reset()[0]))  # reset in the same step
    assert torch.equal(step.final_obs[STATE], step.final_obs[AGENT_OBS].reshape(2, -1))
    env.close(), raw.close()


@pytest.mark.parametrize("name, kwargs, error, words", [
    ("magym:NoSuchEnv-v0", {}, EntryPointError, "NoSuchEnv"),
    ("magym:rware-tiny-2ag-v9", {}, EntryPointError, "rware-tiny-2ag"),
    ("magym:no_such_module:Foo-v0", {}, EntryPointError, "no_such_module"),
    ("magym:", {}, EntryPointError, "magym:<gym id>"),
    ("magym:CartPole-v1", {}, TypeError, "Tuple over agents"),
    (LBF, {"reward": "mean"}, ValueError, "reward must be one of"),
])
def test_bad_names_give_one_line(name, kwargs, error, words):
    with pytest.raises(error) as err:
        make_env(name, 2, **kwargs)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name, kwargs", [(LBF, {"reward": "team"}), (RWARE, {"max_steps": 30})])
def test_checker_accepts(name, kwargs):
    findings = check_env(name, num_envs=4, kwargs=kwargs, steps=120)
    assert not [f for f in findings if f.status == FAIL], [f.line() for f in findings]
    assert any(f.check == "autoreset" and f.status == "PASS" for f in findings)
