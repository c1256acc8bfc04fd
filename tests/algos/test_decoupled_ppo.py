"""The decoupled PPO objective (``ppo.ratio_anchor: proximal``, Hilton et al. 2022) for rollouts
one policy version behind: the weighted surrogate, the anchor and weights the trainer derives, the
gradient it gives on a stale batch, and the settings it refuses."""

from __future__ import annotations

import pytest
import torch
from sampled_batch import sampled

from rl_system.algos.surrogate import ppo_sums
from rl_system.config import ConfigError, load_config

CARTPOLE = "launch/configs/cartpole_ppo.yaml"
LAGGED = ["max_policy_lag=1", "ppo.ratio_anchor=proximal", "workers.rollout_len=24"]


def _rows(n: int = 64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    log_ratio, adv, new_v, old_v, target = (torch.randn(n, generator=g, dtype=torch.float64) for _ in range(5))
    return 0.5 * log_ratio, adv, new_v, old_v, target


def test_the_weighted_surrogate_weighs_each_rows_clipped_term():
    log_ratio, adv, new_v, old_v, target = _rows()
    weight = torch.rand(64, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    ratio = log_ratio.exp()
    per_row = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    pg, v, kl, clipped = ppo_sums(log_ratio, adv, new_v, old_v, target, 0.2, 0.2, weight)
    torch.testing.assert_close(pg, (weight * per_row).sum())
    unweighted = ppo_sums(log_ratio, adv, new_v, old_v, target, 0.2, 0.2)
    torch.testing.assert_close(ppo_sums(log_ratio, adv, new_v, old_v, target, 0.2, 0.2, torch.ones(64, dtype=torch.float64)),
                               unweighted)
    # Only the policy term is weighted: the value loss, KL and clip count are the unweighted ones.
    for a, b in zip((v, kl, clipped), unweighted[1:]):
        torch.testing.assert_close(a, b)


def test_one_version_of_lag_silences_plain_ppo_where_the_proximal_anchor_still_learns():
    """The policy moved since it sampled (pi = mu * e^0.7 on every row): against mu the ratio is
    already 2.0, past the clip, so plain PPO gives no gradient to any row with a positive advantage;
    against pi the ratio is 1 and every row keeps its gradient, weighted by min(pi/mu, bar)."""
    adv = torch.tensor([1.0, 0.5, -1.0, -0.5], dtype=torch.float64)
    zeros = torch.zeros(4, dtype=torch.float64)
    new_logp = torch.zeros(4, dtype=torch.float64, requires_grad=True)  # the learner's policy, log pi
    mu_logp, pi_logp = zeros - 0.7, zeros

    def grad(anchor_logp, weight=None):
        new_logp.grad = None
        pg = ppo_sums(new_logp - anchor_logp, adv, zeros, zeros, zeros, 0.2, None, weight)[0]
        pg.backward()
        return new_logp.grad.clone()

    plain = grad(mu_logp)
    assert torch.equal(plain[:2], torch.zeros(2, dtype=torch.float64))  # the positive advantages: clipped away
    decoupled = grad(pi_logp, torch.full((4,), 0.7, dtype=torch.float64).exp().clamp(max=2.0))
    torch.testing.assert_close(decoupled, -adv * 2.0)  # d/dlogp of -A * ratio at ratio 1, times the weight


def _sampled(overrides: list[str]):
    """A PPO trainer and one batch its own policy sampled (8 envs x 24 steps)."""
    trainer, batch, _ = sampled(CARTPOLE, [*LAGGED, *overrides])
    return trainer, batch


def test_the_anchor_is_the_learners_policy_and_the_weights_pi_over_mu_truncated():
    trainer, batch = _sampled(["ppo.proximal_rho_bar=1.5"])
    own = trainer.prepare(batch)  # sampled by the very weights the learner holds: pi == mu
    torch.testing.assert_close(own["logp"], batch["logp"].flatten(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(own["is_weight"], torch.ones_like(own["is_weight"]), rtol=1e-5, atol=1e-5)
    assert trainer.rho_stats["proximal_rho_mean"] == pytest.approx(1.0, abs=1e-5)
    # An older behaviour policy: mu's log-probabilities shifted per row.
    shift = torch.linspace(-1.0, 1.0, batch["logp"].numel()).reshape(batch["logp"].shape)
    stale = {**batch, "logp": batch["logp"] - shift}
    prepared = trainer.prepare(stale)
    torch.testing.assert_close(prepared["logp"], own["logp"], rtol=1e-5, atol=1e-5)  # the anchor: pi, not mu
    expected = shift.flatten().exp().clamp(max=1.5)
    torch.testing.assert_close(prepared["is_weight"], expected, rtol=1e-4, atol=1e-5)
    assert trainer.rho_stats["proximal_rho_clipped"] == pytest.approx(float((shift.exp() > 1.5).float().mean()))


@pytest.mark.parametrize("shift,bar", [(0.7, None), (0.7, 1.5), (-0.4, 2.0)])
def test_on_a_stale_batch_the_gradient_is_the_on_policy_one_times_the_weight(shift, bar):
    """mu = pi * e^-shift on every row: plain PPO would clip most rows at once (ratio e^shift); the
    decoupled objective's gradient is the on-policy gradient times min(e^shift, bar)."""
    rho_bar = "null" if bar is None else bar
    trainer, batch = _sampled(["ppo.vf_coef=0", "ppo.ent_coef=0", f"ppo.proximal_rho_bar={rho_bar}"])
    on_policy, _ = _sampled(["ppo.vf_coef=0", "ppo.ent_coef=0", "ppo.ratio_anchor=behaviour", "max_policy_lag=1"])

    def grads(t, b):
        data = t.prepare(b)
        t.policy.zero_grad(set_to_none=True)
        loss, _ = t._losses(data, data["logp"].numel(), None)
        loss.backward()
        return [p.grad.clone() for p in t.params if p.grad is not None]

    weight = min(torch.tensor(shift).exp().item(), bar or float("inf"))
    stale = grads(trainer, {**batch, "logp": batch["logp"] - shift})
    for g, g0 in zip(stale, grads(on_policy, batch), strict=True):
        torch.testing.assert_close(g, weight * g0, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("overrides,needle", [
    (["ppo.ratio_anchor=proximal"], "ppo.ratio_anchor: proximal corrects for policy lag, and max_policy_lag is 0"),
    (["ppo.ratio_anchor=proximal", "max_policy_lag=1", "algo=hmasd"], "^ppo.ratio_anchor: proximal: needs the decoupled objective for lagged rollouts, which algo 'hmasd' lacks; algo ppo has it$"),
    (["ppo.ratio_anchor=current", "max_policy_lag=1"], "ppo.ratio_anchor"),
    (["ppo.ratio_anchor=proximal", "max_policy_lag=1", "ppo.proximal_rho_bar=0"], "ppo.proximal_rho_bar"),
])
def test_an_anchor_the_run_cannot_honour_is_one_config_error(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(CARTPOLE, overrides)
