"""``learner.precision: bf16``: inside the learner's autocast region the encoders and recurrent
cores compute in bfloat16, while PPO's output MLPs, HMASD's last layers (so log-probabilities and
values are float32 in both) and HMASD's round preparation stay float32, and the region caches no cast, so each minibatch runs on the weights the
steps before it left (:mod:`rl_system.algos.precision`)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from sampled_batch import sampled
from test_hmasd import make_sampler_for, run_config, training_batch
from torch import nn

from rl_system.algos import get_algorithm
from rl_system.algos.activations import Tanh
from rl_system.algos.hmasd import columns as col
from rl_system.algos.ppo.trainer import observations
from rl_system.algos.precision import Float32Head, update_autocast

_HMASD = get_algorithm("hmasd")  # the factories over a run config
make_hmasd_trainer = _HMASD.make_trainer

MINATAR = "launch/configs/minatar_breakout_ppo.yaml"


def bf16():
    return update_autocast("cpu", enabled=True)


def test_a_float32_head_is_a_plain_sequential_outside_autocast_and_float32_inside():
    torch.manual_seed(0)
    layers = [nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)]
    head, plain = Float32Head(*layers), nn.Sequential(*layers)
    assert list(head.state_dict()) == list(plain.state_dict())  # checkpoints load either way
    x = torch.randn(32, 8)
    assert torch.equal(head(x), plain(x))
    with bf16():
        assert plain(x).dtype == torch.bfloat16
        out = head(x.bfloat16())  # a bf16 feature, as an encoder under autocast hands it over
    assert out.dtype == torch.float32
    assert torch.equal(out, plain(x.bfloat16().float()))


@pytest.mark.parametrize("activation", [Tanh, nn.Tanh, nn.ReLU, lambda: nn.ELU(0.7)], ids=["Tanh", "nn.Tanh", "ReLU", "ELU"])
def test_without_gradients_a_float32_head_computes_the_same_bits_in_place_and_leaves_its_input(activation):
    torch.manual_seed(0)
    head = Float32Head(nn.Linear(4, 32), activation(), nn.Linear(32, 32), activation(), nn.Linear(32, 2))
    x = torch.randn(64, 4)
    kept = x.clone()
    expected = nn.Sequential.forward(head, x)  # the modules' own calls
    with torch.no_grad():
        fast = head(x)
    assert head.__dict__["_plan"]  # the no-grad path was taken
    assert torch.equal(fast, expected) and torch.equal(x, kept)
    with torch.inference_mode():
        assert torch.equal(head(x), expected)
    # The plan holds the parameters: a load or an optimiser step is seen at once.
    head.load_state_dict({k: v * 2 for k, v in head.state_dict().items()})
    with torch.no_grad():
        assert torch.equal(head(x), nn.Sequential.forward(head, x))
    head.double()  # .to() and the like may swap the tensors: the plan is rebuilt
    assert "_plan" not in head.__dict__
    with torch.no_grad():
        assert torch.equal(head(x.double()), nn.Sequential.forward(head, x.double()))
    # A copy plans with its own parameters; a pickled head (the plan's closures do not pickle) too.
    for other in (copy.deepcopy(head), pickle.loads(pickle.dumps(head))):
        assert "_plan" not in other.__dict__
        with torch.no_grad():
            other[0].weight.mul_(3)
            assert torch.equal(other(x.double()), nn.Sequential.forward(other, x.double()))
            assert not torch.equal(other(x.double()), head(x.double()))


def test_a_float32_head_it_cannot_plan_takes_the_modules_path():
    torch.manual_seed(0)
    x = torch.randn(16, 8)
    for layers in ([nn.Tanh(), nn.Linear(8, 3)],  # an activation on the caller's tensor
                   [nn.Linear(8, 8), nn.Tanh(), nn.Tanh(), nn.Linear(8, 3)],  # one on another's output
                   [nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 3)]):  # a layer it does not know
        head = Float32Head(*layers)
        kept = x.clone()
        with torch.no_grad():
            out = head(x)
        assert head.__dict__["_plan"] == [] and torch.equal(x, kept)
        assert torch.equal(out, nn.Sequential.forward(head, x))
    grad_head = Float32Head(nn.Linear(8, 3))
    grad_head(x).sum().backward()  # with gradients: the modules, and autograd through them
    assert grad_head[0].weight.grad is not None and "_plan" not in grad_head.__dict__


def test_under_autocast_ppo_encodes_in_bf16_and_its_logits_and_values_stay_float32():
    trainer, batch, _ = sampled(MINATAR, ["workers.rollout_len=16"])
    policy = trainer.policy
    obs = {k: v.flatten(0, 1) for k, v in observations(batch).items()}
    action = batch["action"].flatten(0, 1)
    with torch.no_grad():
        logp32, _, value32 = policy.evaluate(obs, action)
        with bf16():
            features = policy.encode(obs)[0]
            logp, ent, value = policy.evaluate(obs, action)
    assert features.dtype == torch.bfloat16  # the CNN took the fast path
    assert logp.dtype == ent.dtype == value.dtype == torch.float32
    # The heads saw the bf16 features, so the outputs move by that rounding only (not by a bf16
    # logit's or value's 3 significant digits on top of it).
    with torch.no_grad():
        logp_heads, _ = policy.score(features.float(), obs, action)
        value_heads = policy.critic(features.float()).squeeze(-1)
    assert torch.equal(logp, logp_heads) and torch.equal(value, value_heads)
    assert (logp - logp32).abs().max() < 0.05 and (value - value32).abs().max() < 0.05


def test_a_bf16_ppo_update_keeps_its_losses_and_weights_float32():
    trainer, batch, _ = sampled(MINATAR, ["workers.rollout_len=16", "ppo.num_epochs=1", "ppo.num_minibatches=2"])
    with bf16():
        metrics = trainer.update(batch, 0.0)
    assert all(p.dtype == torch.float32 for p in trainer.policy.parameters())
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert metrics["minibatch_steps"] == 2


def test_under_autocast_hmasd_trains_in_bf16_with_float32_outputs_on_a_round_prepared_in_float32():
    cfg = run_config()
    _, policy, sampler = make_sampler_for(cfg)
    cols, _ = sampler.collect()
    batch = training_batch(cols)
    trainer = make_hmasd_trainer(policy, cfg)
    with torch.no_grad():
        fp32 = trainer.prepare(batch)
    state = {k: v.clone() for k, v in policy.state_dict().items()}
    with bf16():
        with torch.no_grad():
            low = policy.low.evaluate(batch[col.STATE], batch[col.AGENT_OBS], batch[col.SKILL_TEAM], batch[col.SKILL_AGENT],
                                      batch[col.ACTION], batch[col.INIT_H_ACTOR], batch[col.INIT_H_CRITIC],
                                      torch.zeros_like(batch[col.REWARD], dtype=torch.bool))
            high = policy.coordinator.evaluate(batch[col.STATE][0], batch[col.AGENT_OBS][0], batch[col.SKILL_TEAM][0],
                                               batch[col.SKILL_AGENT][0])
            disc = (policy.disc.log_q_team(batch[col.STATE]), policy.disc.log_q_agent(batch[col.AGENT_OBS], batch[col.SKILL_TEAM]))
        # HMASD's heads run in bf16 but for their last layer: log-probabilities and values float32
        assert all(t.dtype == torch.float32 for t in (*low, *high, *disc))
        hidden = {}
        policy.disc.team[1].register_forward_hook(lambda m, i, o: hidden.update(team=o))
        policy.disc.log_q_team(batch[col.STATE])
        assert hidden["team"].dtype == torch.bfloat16  # a hidden layer of q_D
        metrics = trainer.update(batch, 0.0)
    # The update's preparation (intrinsic rewards, advantages, hiddens) ran in float32: the same
    # figures as a float32 preparation with the same weights.
    for k in ("intr_team_logq_mean", "intr_agent_logq_mean", "low_reward_mean", "low_explained_variance"):
        assert metrics[k] == fp32.stats[k], k
    assert any(not torch.equal(state[k], v) for k, v in policy.state_dict().items())  # and it trained


def test_the_update_autocast_lets_every_minibatch_see_the_steps_before_it():
    # Plain autocast keeps the bf16 copy of a weight until its region ends: after an optimiser
    # step the next forward would still see the old weight. The update's region must not cache.
    layer = nn.Linear(8, 8)
    x = torch.randn(4, 8)
    for region, sees_the_step in ((torch.autocast("cpu", dtype=torch.bfloat16), False), (bf16(), True)):
        with region:
            before = layer(x)
            with torch.no_grad():
                layer.weight.add_(1.0)  # what an optimiser step does, in place
            after = layer(x)
        assert (not torch.equal(before, after)) == sees_the_step

