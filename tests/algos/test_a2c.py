"""A2C (``algo: a2c``), the algorithm that joined by its own folder and one registry line: its step
is Stable-Baselines3's A2C step, and it runs through everything the registry offers (the CLI,
config checks, evaluation, export, checkpoints and resume) as PPO does."""

from __future__ import annotations

import copy

import pytest
import ray
import torch

import rl_system
from rl_system.algos import get_algorithm
from rl_system.algos.advantages import compute_gae
from rl_system.cli.main import main
from rl_system.config import load_config
from rl_system.envs import make_env
from rl_system.rollout import contract as col

CONFIG = "launch/configs/cartpole_a2c.yaml"


def _sampled(cfg, seed: int = 0):
    """The policy, trainer and one round's batch of ``cfg`` (sampled by the untrained policy)."""
    algo = get_algorithm(cfg.algo)
    env = make_env(cfg.env.name, cfg.workers.num_envs, "cpu", seed=seed)
    torch.manual_seed(seed)
    policy = algo.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = algo.make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed)
    cols, _ = sampler.collect()
    return policy, algo.make_trainer(policy, cfg), {k: v.clone() for k, v in cols.items()}


def test_one_update_is_sb3s_a2c_step():
    # SB3's A2C.train, written out here: n-step returns bootstrapped from the last value (and from
    # V(final obs) where a time limit cut the episode), loss = -mean(A logp) - ent_coef mean(H)
    # + vf_coef mse(R, V), gradients clipped to 0.5, one RMSprop(alpha 0.99, eps 1e-5) step.
    cfg = load_config(CONFIG, ["workers.num_envs=8", "workers.rollout_len=16", "a2c.ent_coef=0.01"])
    policy, trainer, batch = _sampled(cfg)
    reference = copy.deepcopy(policy)
    a = cfg.a2c
    done = batch[col.TERMINATED] | batch[col.TRUNCATED]
    reward = batch[col.REWARD] + a.gamma * batch[col.TRUNC_VALUE]
    ret = torch.zeros_like(reward)
    running = batch[col.LAST_VALUE].clone()
    for t in range(reward.shape[0] - 1, -1, -1):  # gae_lambda 1: the discounted sum, bootstrapped
        running = reward[t] + a.gamma * running * (~done[t])
        ret[t] = running
    adv = ret - batch[col.VALUE]
    torch.testing.assert_close(compute_gae(reward, batch[col.VALUE], done, batch[col.LAST_VALUE], a.gamma, 1.0)[0], adv)
    obs = {k.removeprefix(col.OBS): v.flatten(0, 1) for k, v in batch.items() if k.startswith(col.OBS)}
    logp, entropy, value = reference.evaluate(obs, batch[col.ACTION].flatten(0, 1))
    loss = (-(adv.flatten() * logp).mean() - a.ent_coef * entropy.mean()
            + a.vf_coef * torch.nn.functional.mse_loss(ret.flatten(), value))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), a.max_grad_norm)
    optimizer = torch.optim.RMSprop(reference.parameters(), lr=a.lr, alpha=0.99, eps=1e-5)
    optimizer.step()

    metrics = trainer.update(batch, 0.0)
    assert metrics["minibatch_steps"] == 1 and metrics["skipped_minibatches"] == 0
    for (name, got), want in zip(policy.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)
    assert metrics["value_loss"] == pytest.approx(float(torch.nn.functional.mse_loss(ret.flatten(), value.detach())), rel=1e-5)


def test_the_observation_normaliser_learns_the_rounds_observations():
    # model.normalize_obs (the RL Zoo's normalize for MuJoCo): after an update the normaliser has
    # folded in the round's observations, as PPO's learner does.
    cfg = load_config(CONFIG, ["workers.num_envs=8", "workers.rollout_len=16", "model.normalize_obs=true"])
    policy, trainer, batch = _sampled(cfg)
    obs = batch[col.OBS + "obs"].flatten(0, 1)
    trainer.update(batch, 0.0)
    torch.testing.assert_close(policy.obs_norm.mean, obs.double().mean(0).to(policy.obs_norm.mean.dtype),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("overrides,says", [
    (["learner.gradients=closed_form"], ("learner.gradients: closed_form: needs closed-form gradients, which algo "
                                         "'a2c' lacks; algo ppo has it")),
    (["model.recurrent=gru"], ("model.recurrent: needs a recurrent core (GRU, LSTM), which algo 'a2c' lacks; "
                               "algo ppo, mappo, hmasd have it")),
    (["env.name=AliceBob"], "env 'AliceBob': needs multi-agent envs, which algo 'a2c' lacks; algo mappo, hmasd have it"),
], ids=["closed_form", "recurrent", "multi_agent"])
def test_what_a2c_cannot_do_is_one_line_and_exit_2(capsys, overrides, says):
    assert main(["train", CONFIG, *(a for o in overrides for a in ("--set", o))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.endswith(says), err


def _final_weights(run_dir) -> dict[str, torch.Tensor]:
    policy = rl_system.load_policy(run_dir, pick="latest")
    return {k: v.clone() for k, v in policy.network.state_dict().items()}


@pytest.mark.slow  # three short runs of 40 rounds each
def test_a2c_trains_evaluates_exports_and_resumes_bit_for_bit(ray_session, tmp_path):
    sets = ["workers.num_envs=8", "tensorboard=false", "checkpoint.every_rounds=20", "target_return=null"]
    straight = rl_system.train(CONFIG, [*sets, "max_env_steps=1600"], run_dir=tmp_path / "straight")
    assert straight.summary["env_steps"] == 1600 and straight.summary["rounds"] == 40
    rl_system.train(CONFIG, [*sets, "max_env_steps=800"], run_dir=tmp_path / "resumed")
    rl_system.train(CONFIG, [*sets, "max_env_steps=1600"], run_dir=tmp_path / "resumed", resume=tmp_path / "resumed")
    a, b = _final_weights(tmp_path / "straight"), _final_weights(tmp_path / "resumed")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    report = rl_system.evaluate(tmp_path / "straight", episodes=8, deterministic=True)
    assert report["episodes"] == 8 and report["return_mean"] > 0
    onnx = pytest.importorskip("onnxruntime")
    out = rl_system.export(tmp_path / "straight", "onnx", tmp_path / "a2c.onnx")
    session = onnx.InferenceSession(str(out))
    obs = torch.zeros(3, 4).numpy()
    outputs = session.run(None, {session.get_inputs()[0].name: obs})
    assert outputs[0].shape[0] == 3
    assert ray.is_initialized()
