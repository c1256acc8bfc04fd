"""``learner.compile``: the PPO loss compiled with torch.compile gives the eager loss and gradients
(to float rounding), reports ``compiled``; where compiling fails the update runs eager, with one
warning, and still trains; HMASD refuses the key in one config line."""

from __future__ import annotations

import warnings

import pytest
import torch

from rl_system.algos.compiled import CompiledOrEager
from rl_system.config import ConfigError, load_config


def _trainer(overrides=(), config="cartpole_ppo"):
    from bench.bench_update import build

    torch.manual_seed(0)
    return build(load_config(f"launch/configs/{config}.yaml", ["workers.num_envs=16", "learner.compile=false",
                                                                 "learner.gradients=autograd", *overrides]))


def _loss_and_grads(trainer, batch):
    data = trainer.prepare(batch)
    # One minibatch of the update's own size: the compiled loss (dynamic=False) is then compiled
    # once, here, and the update below reuses it instead of compiling for a second shape.
    rows = len(data["logp"]) // trainer.cfg.num_minibatches
    mb = {k: v[:rows] for k, v in data.items()}
    trainer.optimizer.zero_grad(set_to_none=True)
    loss, sums = trainer.loss_fn(mb, rows, None)
    loss.backward()
    return loss.detach(), sums, [p.grad.clone() for p in trainer.params]


@pytest.mark.slow  # compiles the loss (seconds, more without inductor's on-disk cache)
@pytest.mark.parametrize("config", ["cartpole_ppo", "hopper_ppo"], ids=["discrete_mlp", "gaussian_mlp"])
def test_the_compiled_loss_is_the_eager_loss_and_trains(config):
    eager, batch = _trainer(config=config)
    compiled, _ = _trainer(["learner.compile=true"], config=config)
    compiled.policy.load_state_dict(eager.policy.state_dict())
    want, got = _loss_and_grads(eager, batch), _loss_and_grads(compiled, batch)
    assert compiled.loss_fn.compiled, compiled.loss_fn.error
    # The sums add one term per row: the policy-gradient sum of normalised advantages is ~0, and
    # float32 rounding leaves it about rows x 1e-7 off zero either way.
    rows = len(batch["reward"].reshape(-1)) // eager.cfg.num_minibatches
    assert torch.allclose(got[0], want[0], atol=1e-6) and torch.allclose(got[1], want[1], atol=1e-6 * rows)
    assert all(torch.allclose(g, w, atol=1e-6) for g, w in zip(got[2], want[2]))
    metrics = compiled.update(batch, 0.0)
    assert metrics["compiled"] == 1.0 and metrics["minibatch_steps"] == compiled.cfg.num_epochs * compiled.cfg.num_minibatches


def test_a_compile_that_fails_runs_eager_with_one_warning(monkeypatch):
    def broken(fn, **kwargs):
        def call(*args):
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore text")
        return call

    monkeypatch.setattr(torch, "compile", broken)
    trainer, batch = _trainer(["learner.compile=true"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = trainer.update(batch, 0.0)
        trainer.update(batch, 0.0)
    notes = [str(w.message) for w in caught if "torch.compile" in str(w.message)]
    assert notes == ["torch.compile failed, the update runs eager: RuntimeError: InvalidCxxCompiler: No working C++ "
                     "compiler found"]
    assert metrics["compiled"] == 0.0 and metrics["minibatch_steps"] == 16
    assert isinstance(trainer.loss_fn, CompiledOrEager) and not trainer.loss_fn.compiled


def test_compile_is_ppos_and_hmasd_refuses_it_in_one_line():
    with pytest.raises(ConfigError, match="^learner.compile: needs a compiled loss, which algo 'hmasd' lacks; algo ppo has it$"):
        load_config("launch/configs/alice_bob_hmasd.yaml", ["learner.compile=true"])
