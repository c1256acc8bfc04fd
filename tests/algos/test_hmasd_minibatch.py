"""HMASD's minibatches: with one minibatch on one learner the epochs train on the prepared
columns themselves, and the result is bit for bit that of gathering every row in order."""

from __future__ import annotations

import copy

import pytest
import torch
from test_hmasd import make_sampler_for, run_config, training_batch

from rl_system.algos import get_algorithm
from rl_system.algos.hmasd.minibatch import MinibatchPlan

_HMASD = get_algorithm("hmasd")  # the factories over a run config
make_trainer = _HMASD.make_trainer


def gather_every_row(self: MinibatchPlan):
    """The path before columns were used in place: one minibatch of ``arange`` rows, gathered."""
    device = self.low["reset"].device
    ci, wi = torch.arange(self.C, device=device), torch.arange(self.W, device=device)
    yield ci, wi, (self.C, self.W)


@pytest.mark.parametrize("hmasd", [{}, {"high_target_kl": 1e-9}], ids=["default", "coordinator-sits-out"])
def test_one_minibatch_trains_on_the_columns_as_a_gather_of_every_row_would(monkeypatch, hmasd):
    cfg = run_config(num_minibatches=1, **hmasd)
    _, policy, sampler = make_sampler_for(cfg)
    cols, _ = sampler.collect()
    batch = training_batch(cols)
    twin, untrained = copy.deepcopy(policy), copy.deepcopy(policy)
    in_place, gathered = make_trainer(policy, cfg), make_trainer(twin, cfg)

    probe = make_trainer(copy.deepcopy(policy), cfg)  # preparing updates the value normalisers
    plan = probe._plan(batch, probe.prepare(batch))
    assert list(plan.minibatches()) == [(None, None, (plan.C, plan.W))]

    torch.manual_seed(1)
    first = in_place.update(batch, 0.0)
    monkeypatch.setattr(MinibatchPlan, "minibatches", gather_every_row)
    torch.manual_seed(1)
    second = gathered.update(batch, 0.0)
    if hmasd:  # the bound stopped the coordinator after its first step in both
        assert first["minibatch_steps"] == second["minibatch_steps"] == cfg.hmasd.num_epochs
    for (k, a), b in zip(policy.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(a, b), k
    assert any(not torch.equal(a, b) for a, b in zip(policy.state_dict().values(), untrained.state_dict().values()))
