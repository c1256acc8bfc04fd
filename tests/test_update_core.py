"""The shared update core (:mod:`rl_system.algos.update`): a new algorithm is a preparation step and a
loss. A2C (Mnih et al. 2016) written here on the core learns CartPole; the core's step drops a
non-finite minibatch without touching the weights; its epochs stop early on the KL bound."""

from __future__ import annotations

import pytest
import torch

from rl_system.algos.adam import make_adam
from rl_system.algos.advantages import compute_gae
from rl_system.algos.ppo import columns as col
from rl_system.algos.update import Minibatches, Trainer, UpdateCore
from rl_system.collective import Shard
from rl_system.rollout.contract import OBS, observations

# -- a newcomer's algorithm: A2C on the core ------------------------------------------------------
A2C_STATS = ("pg_loss", "v_loss", "entropy")


class A2C(Trainer):
    """Advantage actor-critic: one gradient step per round on GAE advantages."""

    def __init__(self, policy: torch.nn.Module, lr: float = 2e-3, gamma: float = 0.99, lam: float = 0.95,
                 vf_coef: float = 0.5, ent_coef: float = 0.0):
        self.policy, self.gamma, self.lam, self.vf_coef, self.ent_coef = policy, gamma, lam, vf_coef, ent_coef
        self.core = UpdateCore(make_adam(policy.parameters(), lr=lr, eps=1e-5), policy.parameters(), lr=lr,
                               anneal_lr=False, max_grad_norm=0.5)

    def prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """GAE over the round ``[T, N]``, then every column flat ``[T*N, ...]``."""
        done = batch[col.TERMINATED] | batch[col.TRUNCATED]
        reward = batch[col.REWARD] + self.gamma * batch[col.TRUNC_VALUE]
        adv, ret = compute_gae(reward, batch[col.VALUE], done, batch[col.LAST_VALUE], self.gamma, self.lam)
        data = {k: v for k, v in batch.items() if k.startswith(OBS)}
        data.update({col.ACTION: batch[col.ACTION], col.ADVANTAGE: adv, col.RETURN: ret})
        return {k: v.flatten(0, 1) for k, v in data.items()}

    def loss(self, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        logp, entropy, value = self.policy.evaluate(observations(mb), mb[col.ACTION])
        adv = mb[col.ADVANTAGE]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg, v, ent = -(logp * adv).mean(), 0.5 * (value - mb[col.RETURN]).square().mean(), entropy.mean()
        return pg + self.vf_coef * v - self.ent_coef * ent, torch.stack([pg, v, ent]).detach()

    def update(self, batch: dict[str, torch.Tensor], progress: float) -> dict[str, float]:
        lr = self.core.set_lr(progress)
        source = Minibatches(self.prepare(batch), Shard.of(batch[col.REWARD].shape, self.group), 1)
        done = self.core.run_epochs(1, lambda: (mb for mb, _, _ in source.epoch()),
                                    lambda mb: self.core.step(lambda: self.core.backward(lambda: self.loss(mb)),
                                                              A2C_STATS))
        return {**done.means(A2C_STATS), "lr": lr, "skipped_minibatches": done.skipped}
# --------------------------------------------------------------------------------------------------


def _cartpole(num_envs: int, seed: int = 0):
    from rl_system.algos import get_algorithm

    _PPO = get_algorithm("ppo")
    make_policy, make_sampler = _PPO.make_policy, _PPO.make_sampler
    from rl_system.config import load_config
    from rl_system.envs import make_env

    cfg = load_config("launch/configs/cartpole_ppo.yaml", [f"workers.num_envs={num_envs}", "workers.rollout_len=16"])
    env = make_env(cfg.env.name, num_envs, "cpu", seed=seed)
    torch.manual_seed(seed)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed=seed)
    return policy, sampler


def test_a2c_written_on_the_core_learns_cartpole():
    torch.set_num_threads(1)  # small tensors: one thread is faster (conftest restores the count)
    policy, sampler = _cartpole(num_envs=16)
    trainer = A2C(policy)
    recent: list[float] = []
    for _ in range(600):  # 600 rounds of 16 envs x 16 steps: 153,600 env steps at most
        cols, episodes = sampler.collect()
        metrics = trainer.update({k: v.clone() for k, v in cols.items()}, 0.0)
        recent = (recent + episodes.returns.tolist())[-50:]
        if len(recent) == 50 and sum(recent) / 50 >= 200:
            break
    assert sum(recent) / len(recent) >= 200, f"A2C's last 50 episodes averaged {sum(recent) / len(recent):.1f}"
    assert metrics["skipped_minibatches"] == 0 and trainer.skipped_updates == 0


def test_a_non_finite_step_is_dropped_and_counted_with_the_weights_untouched():
    policy, sampler = _cartpole(num_envs=4)
    trainer = A2C(policy)
    cols, _ = sampler.collect()
    batch = {k: v.clone() for k, v in cols.items()}
    batch[col.REWARD][0, 0] = float("nan")  # GAE carries it into every earlier advantage of env 0
    before = [p.detach().clone() for p in policy.parameters()]
    metrics = trainer.update(batch, 0.0)
    assert metrics["skipped_minibatches"] == 1 and trainer.skipped_updates == 1
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    assert all(p.grad is None for p in policy.parameters())


def test_the_epochs_stop_after_the_first_step_past_the_kl_bound():
    w = torch.nn.Parameter(torch.zeros(3))
    core = UpdateCore(make_adam([w], lr=0.1, eps=1e-8), [w], lr=0.1, anneal_lr=True, max_grad_norm=1.0)
    assert core.set_lr(0.25) == 0.1 * 0.75
    kls = iter([0.01, 0.02, 0.5, 0.01])

    def step(_):
        return core.step(lambda: core.backward(lambda: ((w - 1).square().sum(), torch.tensor([next(kls)]))),
                         ["approx_kl"])

    done = core.run_epochs(3, lambda: range(2), step, target_kl=0.1)
    assert done.steps == 3 and done.means()["approx_kl"] == pytest.approx((0.01 + 0.02 + 0.5) / 3)
    assert float(w.detach().abs().min()) > 0  # the steps were taken


def test_minibatches_by_sequence_cut_env_rows_and_keep_env_major_columns_aligned():
    T, N = 4, 6
    data = {"x": torch.arange(T * N).reshape(T, N), "init": torch.arange(N) * 100}
    source = Minibatches(data, Shard(T, N, 0, N), num_minibatches=3, sequences=True, env_major=("init",))
    torch.manual_seed(0)
    seen = []
    for mb, _, size in source.epoch():
        assert mb["x"].shape == (T, 2) and size == 2
        assert torch.equal(mb["x"][0] * 100, mb["init"])  # the same envs in both layouts
        seen += mb["init"].tolist()
    assert sorted(seen) == [e * 100 for e in range(N)]
