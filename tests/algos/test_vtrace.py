"""V-trace value targets (``ppo.value_target: vtrace``) for rollouts one policy version behind:
GAE's returns on-policy, the paper's recursion written out step by step otherwise, truncation,
the learner's forward pass, and the settings it refuses."""

from __future__ import annotations

import pytest
import torch
from sampled_batch import sampled

from rl_system.algos.advantages import compute_gae, compute_vtrace
from rl_system.config import ConfigError, load_config

CARTPOLE = "launch/configs/cartpole_ppo.yaml"


def _episode_batch(T: int = 12, N: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    reward = torch.randn(T, N, generator=g, dtype=torch.float64)
    value = torch.randn(T, N, generator=g, dtype=torch.float64)
    done = torch.rand(T, N, generator=g) < 0.2
    last_value = torch.randn(N, generator=g, dtype=torch.float64)
    log_rho = 0.7 * torch.randn(T, N, generator=g, dtype=torch.float64)
    return reward, value, done, last_value, log_rho


def _vtrace_by_hand(reward, value, done, last_value, log_rho, gamma, lam, rho_bar, c_bar):
    """Espeholt et al. (2018), eq. 1, one env and one step at a time (the slow, obvious way)."""
    T, N = reward.shape
    vs = torch.empty_like(value)
    for n in range(N):
        for s in range(T):
            total, trace = 0.0, 1.0
            for t in range(s, T):
                v_next = 0.0 if done[t, n] else (value[t + 1, n] if t + 1 < T else last_value[n])
                rho = min(rho_bar, float(log_rho[t, n].exp()))
                total += gamma ** (t - s) * trace * rho * (reward[t, n] + gamma * v_next - value[t, n])
                if done[t, n]:
                    break  # nothing after an episode's end is traced back into it
                trace *= lam * min(c_bar, float(log_rho[t, n].exp()))
            vs[s, n] = value[s, n] + total
    return vs


def test_on_policy_vtrace_targets_are_gaes_returns():
    reward, value, done, last_value, _ = _episode_batch()
    _, ret = compute_gae(reward, value, done, last_value, 0.99, 0.95)
    vs = compute_vtrace(reward, value, done, last_value, torch.zeros_like(reward), 0.99, 0.95)
    torch.testing.assert_close(vs, ret, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (2.0, 0.5), (1e9, 1e9)])
def test_off_policy_vtrace_targets_match_the_papers_recursion_step_by_step(rho_bar, c_bar):
    batch = _episode_batch(seed=int(rho_bar * 10 + c_bar))
    vs = compute_vtrace(*batch, 0.97, 0.9, rho_bar, c_bar)
    torch.testing.assert_close(vs, _vtrace_by_hand(*batch, 0.97, 0.9, rho_bar, c_bar), rtol=1e-9, atol=1e-9)


def test_importance_weights_are_truncated_at_rho_bar():
    reward, value, done, last_value, _ = _episode_batch()
    huge = torch.full_like(reward, 30.0)  # pi/mu = e^30: truncated to 1, the on-policy targets
    _, ret = compute_gae(reward, value, done, last_value, 0.99, 0.95)
    torch.testing.assert_close(compute_vtrace(reward, value, done, last_value, huge, 0.99, 0.95), ret)


@pytest.mark.parametrize("overrides", [[], ["model.recurrent=gru"]], ids=["mlp", "gru"])
def test_the_learner_weighs_a_batch_its_own_policy_sampled_with_one(overrides):
    """The trainer's forward pass: on a batch sampled by the very weights it holds, every
    importance weight is 1 (up to float noise) and the V-trace targets are the GAE returns."""
    from rl_system.algos import get_algorithm

    _PPO = get_algorithm("ppo")
    make_trainer = _PPO.make_trainer

    trainer, batch, cfg = sampled(CARTPOLE, ["max_policy_lag=1", "ppo.value_target=vtrace", "workers.rollout_len=24",
                                             *overrides])
    vtrace = trainer.prepare(batch)
    gae = make_trainer(trainer.policy, cfg.model_copy(update={"ppo": cfg.ppo.model_copy(update={"value_target": "gae"})}))
    assert trainer.rho_stats["vtrace_rho_mean"] == pytest.approx(1.0, abs=1e-5)
    torch.testing.assert_close(vtrace["ret"], gae.prepare(batch)["ret"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(vtrace["advantage"], gae.prepare(batch)["advantage"])  # the policy's: GAE's


@pytest.mark.parametrize("overrides,needle", [
    (["ppo.value_target=vtrace"], "ppo.value_target: vtrace corrects for policy lag, and max_policy_lag is 0"),
    (["ppo.value_target=vtrace", "max_policy_lag=1", "algo=hmasd"], "^ppo.value_target: vtrace: needs V-trace value targets, which algo 'hmasd' lacks; algo ppo has it$"),
    (["ppo.value_target=retrace"], "ppo.value_target"),
])
def test_a_value_target_the_run_cannot_honour_is_one_config_error(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(CARTPOLE, overrides)
