"""The shared update core (:mod:`rl_system.algos.update`): an algorithm is a preparation, its
epochs' minibatches and a loss; the core builds and owns the optimiser and its checkpointed state,
runs the round's skeleton, drops a non-finite minibatch without touching the weights, lets a
learner that holds no row of a minibatch join its step, and stops the epochs on the KL bound."""

from __future__ import annotations

import pytest
import torch

from rl_system.algos.a2c.config import A2CConfig
from rl_system.algos.a2c.trainer import A2C
from rl_system.algos.update import Minibatch, Minibatches, OptimizerSpec, Trainer, UpdateCore
from rl_system.collective import Shard
from rl_system.rollout import contract as col


class LeastSquares(Trainer):
    """The smallest algorithm on the core: fit ``w`` to ``y = x @ w_true``, two minibatches a
    round, two epochs; only the preparation, the epochs and the loss are written."""

    stat_names = ("mse",)

    def __init__(self, dim: int, lr: float = 0.05):
        self.w = torch.nn.Parameter(torch.zeros(dim))
        self.core = UpdateCore([self.w], OptimizerSpec(lr=lr), anneal_lr=False, max_grad_norm=10.0)
        self.num_epochs = 2

    def prepare(self, batch):
        return {"x": batch["x"].flatten(0, 1), "y": batch["y"].flatten(0, 1)}

    def epochs(self, data, batch):
        source = Minibatches(data, Shard(*batch["y"].shape, 0, batch["y"].shape[1]), num_minibatches=2)
        return lambda: (Minibatch(mb, size) for mb, _, size in source.epoch())

    def loss(self, mb):
        err = (mb.data["x"] @ self.w - mb.data["y"]).square().sum()
        return err / mb.rows, err.detach()[None]


def test_an_algorithm_of_a_preparation_epochs_and_a_loss_learns_and_reports_the_round():
    torch.manual_seed(0)
    w_true = torch.tensor([1.0, -2.0, 0.5])
    algo = LeastSquares(3)
    for _ in range(150):
        x = torch.randn(8, 4, 3)  # [T, N, dim]
        metrics = algo.update({"x": x, "y": x @ w_true}, progress=0.0)
    assert torch.allclose(algo.w.detach(), w_true, atol=1e-2)
    assert metrics["minibatch_steps"] == 4 and metrics["skipped_minibatches"] == 0
    assert metrics["lr"] == 0.05 and metrics["mse"] < 1e-3


def test_the_core_builds_the_optimiser_and_checkpoints_it_and_loads_a_bare_state():
    w = torch.nn.Parameter(torch.ones(4))
    core = UpdateCore([w], OptimizerSpec(lr=0.01, kind="rmsprop", alpha=0.9), anneal_lr=False, max_grad_norm=1.0)
    assert isinstance(core.optimizer, torch.optim.RMSprop) and core.optimizer.defaults["alpha"] == 0.9
    core.step(lambda: core.backward(lambda: (w.square().sum(), torch.zeros(1))), ["x"])
    state = core.state_dict()
    assert set(state) == {"optimizer"}
    again = UpdateCore([torch.nn.Parameter(torch.ones(4))], OptimizerSpec(lr=0.01, kind="rmsprop"),
                       anneal_lr=False, max_grad_norm=1.0)
    again.load_state_dict(state["optimizer"])  # a bare optimiser state, as HMASD's checkpoints held it
    assert torch.equal(again.optimizer.state_dict()["state"][0]["square_avg"], state["optimizer"]["state"][0]["square_avg"])


def test_a_learner_holding_no_row_of_a_minibatch_takes_an_idle_step():
    w = torch.nn.Parameter(torch.ones(2))
    core = UpdateCore([w], OptimizerSpec(lr=0.1), anneal_lr=False, max_grad_norm=1.0)
    w.grad = torch.ones(2)
    assert core.idle_step(("a", "b"), rows=4) == {"a": 0.0, "b": 0.0}
    assert torch.equal(w.detach(), torch.ones(2))  # no gradient: Adam does not move it


def _cartpole(num_envs: int, seed: int = 0):
    from rl_system.algos import get_algorithm
    from rl_system.config import load_config
    from rl_system.envs import make_env

    algo = get_algorithm("a2c")
    cfg = load_config("launch/configs/cartpole_a2c.yaml", [f"workers.num_envs={num_envs}", "workers.rollout_len=16"])
    env = make_env(cfg.env.name, num_envs, "cpu", seed=seed)
    torch.manual_seed(seed)
    policy = algo.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = algo.make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed=seed)
    return policy, sampler


def test_a_non_finite_step_is_dropped_and_counted_with_the_weights_untouched():
    policy, sampler = _cartpole(num_envs=4)
    trainer = A2C(policy, A2CConfig())
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
    core = UpdateCore([w], OptimizerSpec(lr=0.1, eps=1e-8), anneal_lr=True, max_grad_norm=1.0)
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
