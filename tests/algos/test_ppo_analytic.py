"""PPO's closed-form gradients (``learner.gradients: closed_form``, rl_system.algos.ppo.analytic)
against autograd's on the same minibatch: every head, activation and loss option it serves."""

import copy

import pytest
import torch
from torch import nn

from rl_system.algos.ppo import PPO
from rl_system.algos.ppo.analytic import unsupported
from rl_system.algos.ppo.policy import ActorCritic, RecurrentActorCritic
from rl_system.algos.update import Minibatch
from rl_system.config import ModelConfig, PPOConfig, RunConfig
from rl_system.envs.base import Box, Discrete, MultiDiscrete, TensorSpec


def _policy(action_spec, activation="tanh", mask=False, normalize_obs=False, hidden=(16, 16)):
    obs = {"obs": TensorSpec((5,))}
    if mask:
        obs["action_mask"] = TensorSpec((action_spec.n,), torch.bool)
    torch.manual_seed(0)
    policy = ActorCritic(obs, action_spec, ModelConfig(hidden_sizes=list(hidden), activation=activation,
                                                       normalize_obs=normalize_obs))
    if normalize_obs:
        policy.observe({"obs": torch.randn(64, 5) * 3 + 1})
    return policy


def _minibatch(policy, rows=48, mask=False, weights=False):
    """A minibatch as the trainer prepares it, with the policy's own old log-probs and values,
    perturbed so some ratios and values leave their clip ranges."""
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(rows, 5, generator=g)
    inputs = {"obs": obs}
    if mask:
        m = torch.rand(rows, policy.actor[-1].out_features, generator=g) > 0.3
        m[:, 0] = True
        inputs["action_mask"] = m
    with torch.no_grad():
        action, logp, value = policy.act(inputs)
    mb = {f"obs.{k}": v for k, v in inputs.items()}
    mb.update(action=action, logp=logp + 0.3 * torch.randn(rows, generator=g),
              value=value + 0.3 * torch.randn(rows, generator=g), advantage=torch.randn(rows, generator=g),
              ret=value + torch.randn(rows, generator=g))
    if weights:
        mb["is_weight"] = torch.rand(rows, generator=g) * 2
    return mb


def _grads(policy, cfg, mb, gradients, rows):
    """(the statistic sums, {name: grad}) of one minibatch step's loss under ``gradients``."""
    policy = copy.deepcopy(policy)
    trainer = PPO(policy, cfg, gradients=gradients)
    trainer.optimizer.zero_grad(set_to_none=True)
    if gradients == "closed_form":
        adv = trainer._normalized_advantage(mb["advantage"], rows, None)
        sums = trainer.closed_form.step(mb, rows, adv)
    else:
        loss, sums = trainer._losses(mb, rows, None)
        loss.backward()
    return sums, {n: p.grad for n, p in policy.named_parameters()}


CASES = {
    "discrete tanh": {"spec": Discrete(3)},
    "discrete relu, no value clip, entropy": {"spec": Discrete(4), "activation": "relu", "clip_vloss": False, "ent_coef": 0.05},
    "discrete elu, masked, obs normalised": {"spec": Discrete(4), "activation": "elu", "mask": True, "normalize_obs": True,
                                                 "ent_coef": 0.01},
    "discrete, importance weights, no adv norm": {"spec": Discrete(2), "weights": True, "norm_adv": False},
    "box tanh, entropy": {"spec": Box((3,), -1.0, 1.0), "ent_coef": 0.01},
    "box relu, one hidden layer": {"spec": Box((2,), -1.0, 1.0), "activation": "relu", "hidden": (32,)},
    "linear heads": {"spec": Discrete(2), "hidden": ()},
}


@pytest.mark.parametrize("name", list(CASES))
def test_closed_form_gradients_match_autograd(name):
    case = dict(CASES[name])
    spec, mask, weights = case.pop("spec"), case.pop("mask", False), case.pop("weights", False)
    model = {k: case.pop(k) for k in ("activation", "normalize_obs", "hidden") if k in case}
    cfg = PPOConfig(clip_coef=0.2, **case)
    policy = _policy(spec, mask=mask, **model)
    mb = _minibatch(policy, mask=mask, weights=weights)
    rows = 64  # more than this learner holds, as in a learner group: the loss is a share of the global mean
    sums_ag, grads_ag = _grads(policy, cfg, mb, "autograd", rows)
    sums_cf, grads_cf = _grads(policy, cfg, mb, "closed_form", rows)
    torch.testing.assert_close(sums_cf, sums_ag, rtol=1e-5, atol=1e-6)
    assert grads_cf.keys() == grads_ag.keys()
    for k in grads_ag:
        torch.testing.assert_close(grads_cf[k], grads_ag[k], rtol=1e-4, atol=1e-6, msg=k)
    clipped = sums_ag[4].item()
    assert 0 < clipped < len(mb["logp"])  # both branches of the clipped surrogate were exercised


def test_closed_form_update_tracks_autograd_over_a_round():
    """A whole update (4 epochs x 4 minibatches, Adam, gradient clipping) lands on the same weights."""
    cfg = PPOConfig(num_epochs=4, num_minibatches=4, lr=5e-3)
    policy = _policy(Discrete(2), hidden=(64, 64))
    g = torch.Generator().manual_seed(2)
    T, N = 8, 32
    with torch.no_grad():
        obs = torch.randn(T, N, 5, generator=g)
        action, logp, value = policy.act({"obs": obs.flatten(0, 1)})
    batch = {"obs.obs": obs, "action": action.reshape(T, N), "logp": logp.reshape(T, N), "value": value.reshape(T, N),
             "reward": torch.rand(T, N, generator=g), "terminated": torch.rand(T, N, generator=g) < 0.05,
             "truncated": torch.zeros(T, N, dtype=torch.bool), "trunc_value": torch.zeros(T, N),
             "last_value": torch.zeros(N)}
    weights = {}
    for gradients in ("autograd", "closed_form", "closed_form again", "closed_form outside inference mode"):
        p = copy.deepcopy(policy)
        trainer = PPO(p, cfg, gradients=gradients.split()[0])
        if "outside" in gradients:  # the epochs outside inference mode (the closed-form step keeps it)
            trainer._closed_form_serves = lambda like: False
        torch.manual_seed(3)  # the same minibatch permutations
        metrics = trainer.update(batch, 0.0)
        weights[gradients] = p.state_dict()
        assert metrics["minibatch_steps"] == 16
        # Adam's moments are ordinary tensors, so a later autograd step or a restore can change them.
        assert not any(torch.is_inference(t) for st in trainer.optimizer.state.values() for t in st.values())
    assert metrics["closed_form"] == 1.0
    for k, w in weights["autograd"].items():
        torch.testing.assert_close(weights["closed_form"][k], w, rtol=1e-4, atol=1e-5, msg=k)
        assert torch.equal(weights["closed_form again"][k], weights["closed_form"][k])  # a seed repeats bit for bit
        assert torch.equal(weights["closed_form outside inference mode"][k], weights["closed_form"][k])


def test_policies_it_cannot_serve_fall_back_to_autograd_with_a_warning():
    obs = {"obs": TensorSpec((5,))}
    recurrent = RecurrentActorCritic(obs, Discrete(2), ModelConfig(hidden_sizes=[8], recurrent="gru"))
    assert "RecurrentActorCritic" in unsupported(recurrent)
    assert "MultiDiscrete" in unsupported(ActorCritic(obs, MultiDiscrete([2, 3]), ModelConfig(hidden_sizes=[8])))
    image = {"img": TensorSpec((1, 8, 8), torch.uint8)}
    assert "encoder" in unsupported(ActorCritic(image, Discrete(2), ModelConfig(hidden_sizes=[8])))
    assert unsupported(_policy(Discrete(2))) is None
    with pytest.warns(UserWarning, match="closed_form cannot serve"):
        trainer = PPO(recurrent, PPOConfig(), gradients="closed_form")
    assert trainer.closed_form is None


def test_closed_form_under_bf16_autocast_takes_autograd_once_with_a_warning():
    policy = _policy(Discrete(2))
    trainer = PPO(policy, PPOConfig(), gradients="closed_form")
    mb = _minibatch(policy)
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.warns(UserWarning, match="bf16 update uses autograd"):
        trainer.step(Minibatch(mb, len(mb["logp"])))
    assert trainer.closed_form is None


@pytest.mark.parametrize("overrides, key", [
    ({"algo": "hmasd", "env": {"name": "AliceBob"}}, "learner.gradients"),
    ({"learner": {"compile": True}}, "learner.gradients"),
])
def test_closed_form_with_what_it_cannot_honour_is_a_config_error(overrides, key):
    cfg = {"algo": "ppo", "env": {"name": "CartPole"}, **overrides}
    cfg["learner"] = {**cfg.get("learner", {}), "gradients": "closed_form"}
    with pytest.raises(ValueError, match=key):
        RunConfig.model_validate(cfg)


def test_linear_without_bias_is_not_served():
    policy = _policy(Discrete(2))
    policy.actor[0] = nn.Linear(5, 16, bias=False)
    assert "without bias" in unsupported(policy)


def _step_on(policy, cfg, mb, head_threads):
    """(sums, {name: grad}) of one closed-form step with the critic on ``head_threads`` threads."""
    policy = copy.deepcopy(policy)
    trainer = PPO(policy, cfg, gradients="closed_form", head_threads=head_threads)
    adv = trainer._normalized_advantage(mb["advantage"], mb["advantage"].shape[0], None)
    sums = trainer.closed_form.step(mb, mb["advantage"].shape[0], adv)
    return sums, {n: p.grad.clone() for n, p in policy.named_parameters()}, trainer.closed_form


@pytest.mark.parametrize("spec", [Discrete(3), Box((2,), -1.0, 1.0)], ids=["discrete", "box"])
def test_the_critic_on_its_own_thread_gives_the_same_bits(spec):
    policy = _policy(spec, activation="relu", hidden=(32, 32))
    mb = _minibatch(policy, rows=4096)
    cfg = PPOConfig(ent_coef=0.01)
    one_sums, one, grad_one = _step_on(policy, cfg, mb, 1)
    two_sums, two, grad_two = _step_on(policy, cfg, mb, 2)
    assert grad_one._pool is None and grad_two._pool is not None  # the step ran on two threads
    assert torch.equal(one_sums, two_sums)
    assert all(torch.equal(one[n], two[n]) for n in one)


def test_auto_head_threads_follow_the_threads_the_cores_and_the_wait_policy(monkeypatch):
    from rl_system.algos.ppo.analytic import resolve_head_threads

    cpu = torch.device("cpu")
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setenv("GOMP_SPINCOUNT", "300000")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert resolve_head_threads("auto", cpu) == 2  # idle at start: the run chose to spin
    assert resolve_head_threads(1, cpu) == 1 and resolve_head_threads(2, cpu) == 2
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert resolve_head_threads("auto", cpu) == 1  # busy at start
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert resolve_head_threads("auto", cpu) == 1  # two OpenMP teams would fight for the cores
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0})
    assert resolve_head_threads("auto", cpu) == 1  # one core


def test_auto_keeps_small_steps_on_one_thread(monkeypatch):
    from rl_system.algos.ppo import analytic

    monkeypatch.setattr(analytic, "resolve_head_threads", lambda requested, device: 2)
    policy = _policy(Discrete(3), hidden=(16, 16))
    small, large = _minibatch(policy, rows=64), _minibatch(policy, rows=analytic.TWO_HEADS_MIN_ROWS)
    trainer = PPO(copy.deepcopy(policy), PPOConfig(), gradients="closed_form", head_threads="auto")
    grad = trainer.closed_form
    assert grad._critic_thread(64) is None and grad._pool is not None
    assert grad._critic_thread(analytic.TWO_HEADS_MIN_ROWS) is grad._pool
    for mb in (small, large):
        rows = mb["advantage"].shape[0]
        assert torch.isfinite(grad.step(mb, rows, mb["advantage"])).all()


def test_a_failing_actor_part_still_waits_for_the_critic(monkeypatch):
    from rl_system.algos.ppo import analytic

    policy = _policy(Discrete(3), hidden=(32, 32))
    mb = _minibatch(policy, rows=4096)
    trainer = PPO(copy.deepcopy(policy), PPOConfig(), gradients="closed_form", head_threads=2)
    grad = trainer.closed_form
    finished = []
    critic_part = grad._critic_part

    def slow_critic(*args):
        import time
        time.sleep(0.2)
        out = critic_part(*args)
        finished.append(True)
        return out

    monkeypatch.setattr(grad, "_critic_part", slow_critic)
    monkeypatch.setattr(analytic, "policy_row_grads", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        grad.step(mb, 4096, mb["advantage"])
    assert finished == [True]  # the critic's writes had ended when the error left the step
