import math

import torch

from rl_system.algos.advantages import compute_gae
from rl_system.algos.ppo import PPO
from rl_system.algos.ppo.policy import ActorCritic, RunningNorm
from rl_system.algos.surrogate import approx_kl, ppo_sums, value_error_loss
from rl_system.config import ModelConfig, PPOConfig
from rl_system.envs.base import Box, Discrete, TensorSpec


def reference_gae(reward, value, done, last_value, gamma, lam):
    """Textbook per-env, per-step loop (slow, obviously right)."""
    T, N = reward.shape
    adv = torch.zeros(T, N, dtype=torch.float64)
    for n in range(N):
        gae = 0.0
        for t in reversed(range(T)):
            nxt = last_value[n] if t == T - 1 else value[t + 1, n]
            nonterminal = 0.0 if done[t, n] else 1.0
            delta = reward[t, n] + gamma * nxt * nonterminal - value[t, n]
            gae = delta + gamma * lam * nonterminal * gae
            adv[t, n] = gae
    return adv


def test_gae_matches_reference_loop():
    g = torch.Generator().manual_seed(0)
    T, N = 13, 7
    reward = torch.randn(T, N, generator=g, dtype=torch.float64)
    value = torch.randn(T, N, generator=g, dtype=torch.float64)
    done = torch.rand(T, N, generator=g) < 0.2
    last = torch.randn(N, generator=g, dtype=torch.float64)
    adv, ret = compute_gae(reward, value, done, last, 0.97, 0.9)
    ref = reference_gae(reward, value, done, last, 0.97, 0.9)
    torch.testing.assert_close(adv, ref)
    torch.testing.assert_close(ret, ref + value)


def test_gae_lambda_one_is_discounted_return():
    # One env, no value function: advantages are the discounted returns, cut at done.
    reward = torch.ones(4, 1)
    done = torch.tensor([[False], [True], [False], [False]])
    adv, _ = compute_gae(reward, torch.zeros(4, 1), done, torch.zeros(1), 0.5, 1.0)
    assert adv.flatten().tolist() == [1.5, 1.0, 1.5, 1.0]


def _batch(policy, obs_dim, T=8, N=16, discrete=True):
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(T, N, obs_dim, generator=g)
    with torch.no_grad():
        action, logp, value = policy.act({"obs": obs.flatten(0, 1)})
    shape = (T, N) if discrete else (T, N, *action.shape[1:])
    return {"obs.obs": obs, "action": action.reshape(shape), "logp": logp.reshape(T, N),
            "value": value.reshape(T, N), "reward": torch.randn(T, N, generator=g),
            "terminated": torch.zeros(T, N, dtype=torch.bool), "truncated": torch.zeros(T, N, dtype=torch.bool),
            "trunc_value": torch.zeros(T, N), "last_value": torch.zeros(N)}


def test_surrogate_sums_match_the_clipped_objective_row_by_row():
    """The shared PPO terms against a per-row reading of the paper's formulas."""
    log_ratio = torch.tensor([0.0, 0.5, -0.5, 0.1])
    adv = torch.tensor([1.0, 1.0, -1.0, -2.0])
    new_v, old_v, target = torch.tensor([1.0, 3.0, 0.0, 0.0]), torch.zeros(4), torch.ones(4)
    pg, v, kl, clipped = ppo_sums(log_ratio, adv, new_v, old_v, target, clip=0.2, vclip=0.2)
    want_pg = 0.0
    for lr, a in zip(log_ratio.tolist(), adv.tolist()):
        r = math.exp(lr)
        want_pg += -min(r * a, min(max(r, 0.8), 1.2) * a)
    assert math.isclose(pg.item(), want_pg, rel_tol=1e-6)
    # value clip: rows 0 and 1 move 1.0 and 3.0 from old_v; clipped to 0.2, the larger error counts
    want_v = 0.5 * (max(0.0, 0.8 ** 2) + max(4.0, 0.8 ** 2) + 1.0 + 1.0)
    assert math.isclose(v.item(), want_v, rel_tol=1e-6)
    assert clipped.item() == 2.0  # exp(0.5) and exp(-0.5) leave [0.8, 1.2]; exp(0.1) does not
    kl_rows = approx_kl(log_ratio)
    assert kl_rows[0].item() == 0.0 and (kl_rows >= 0).all()
    assert math.isclose(kl.item(), sum(math.exp(x) - 1 - x for x in log_ratio.tolist()), rel_tol=1e-6)
    assert ppo_sums(log_ratio, adv, new_v, old_v, target, 0.2, None)[1].item() == 0.5 * (0 + 4 + 1 + 1)


def test_ppo_update_runs_for_discrete_and_continuous():
    for spec in (Discrete(3), Box((2,), (-1.0, -1.0), (1.0, 1.0))):
        torch.manual_seed(0)
        policy = ActorCritic({"obs": TensorSpec((5,))}, spec, ModelConfig(hidden_sizes=[16]))
        ppo = PPO(policy, PPOConfig(num_epochs=2, num_minibatches=2))
        before = [p.detach().clone() for p in policy.parameters()]
        m = ppo.update(_batch(policy, 5, discrete=isinstance(spec, Discrete)), progress=0.0)
        assert m["minibatch_steps"] == 4 and m["skipped_minibatches"] == 0
        assert all(math.isfinite(m[k]) for k in ("pg_loss", "v_loss", "entropy", "approx_kl"))
        assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))


def test_first_minibatch_ratio_is_one_with_and_without_obs_normalisation():
    """PPO's first minibatch step sees the policy that sampled the batch: ratio exactly 1, so no
    KL and nothing clipped -- also with the observation normaliser, whose statistics move only
    after the epochs."""
    for normalize in (False, True):
        torch.manual_seed(0)
        policy = ActorCritic({"obs": TensorSpec((5,))}, Discrete(2), ModelConfig(hidden_sizes=[16], normalize_obs=normalize))
        ppo = PPO(policy, PPOConfig(num_epochs=1, num_minibatches=1))
        m = ppo.update(_batch(policy, 5), progress=0.0)
        assert m["minibatch_steps"] == 1
        assert abs(m["approx_kl"]) < 1e-7 and m["clip_frac"] == 0.0, (normalize, m)


def test_nan_loss_skips_update_and_keeps_weights():
    torch.manual_seed(0)
    policy = ActorCritic({"obs": TensorSpec((5,))}, Discrete(2), ModelConfig(hidden_sizes=[16]))
    ppo = PPO(policy, PPOConfig(num_epochs=1, num_minibatches=2))
    batch = _batch(policy, 5)
    batch["reward"][:, 0] = float("nan")  # advantage normalisation spreads it to every minibatch
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    m = ppo.update(batch, progress=0.0)
    assert m["skipped_minibatches"] == 2 and m["minibatch_steps"] == 0
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    assert ppo.skipped_updates == 2


def test_action_mask_never_samples_masked_actions():
    torch.manual_seed(0)
    policy = ActorCritic({"obs": TensorSpec((3,)), "action_mask": TensorSpec((4,), torch.bool)}, Discrete(4),
                         ModelConfig(hidden_sizes=[8]))
    mask = torch.tensor([[True, False, True, False]]).repeat(2000, 1)
    action, logp, _ = policy.act({"obs": torch.randn(2000, 3), "action_mask": mask})
    assert set(action.tolist()) <= {0, 2}
    _, entropy, _ = policy.evaluate({"obs": torch.randn(2000, 3), "action_mask": mask}, action)
    assert torch.isfinite(entropy).all() and (entropy <= math.log(2) + 1e-5).all()


def test_running_norm_matches_batch_statistics():
    x = torch.randn(1000, 3) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 0.0])
    norm = RunningNorm(3)
    for chunk in x.split(137):
        norm.update(chunk)
    torch.testing.assert_close(norm.mean.float(), x.mean(0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm.var.float(), x.var(0, unbiased=False), atol=1e-3, rtol=1e-3)


def test_the_huber_value_loss_is_the_square_near_and_linear_far():
    """``huber_delta`` (HMASD's presets: the papers' 10): half the squared error inside the delta,
    ``delta * (|e| - delta / 2)`` beyond it, so one far return moves the value by a bounded step;
    the clipped form takes the larger of the two per row, as the squared loss does."""
    err = torch.tensor([-30.0, -2.0, 0.5, 10.0, 25.0])
    assert torch.equal(value_error_loss(err), 0.5 * err.square())
    huber = value_error_loss(err, huber_delta=10.0)
    far = err.abs() > 10
    assert torch.allclose(huber[~far], 0.5 * err[~far].square())
    assert torch.allclose(huber[far], 10.0 * (err[far].abs() - 5.0))
    zeros = torch.zeros(5)
    new_v = err.clone().requires_grad_()
    _, v, _, _ = ppo_sums(zeros, zeros, new_v, zeros, zeros, 0.2, None, huber_delta=10.0)
    v.backward()
    assert torch.allclose(v, huber.sum()) and new_v.grad.abs().max() == 10.0  # the gradient is bounded by delta
    _, v_clipped, _, _ = ppo_sums(zeros, zeros, err, zeros, zeros, 0.2, 0.2, huber_delta=10.0)
    assert torch.allclose(v_clipped, huber.sum())  # the clipped error (0.2 from the target) is the smaller
