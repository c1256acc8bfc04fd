"""Recurrent PPO (``model.recurrent``): the sampler's state carried across rollouts and zeroed
at episode ends, the learner's sequence replay reproducing what the workers sampled, learning
memory CartPole through the whole system, bit-exact resume with worker states, and the bad-input
lines."""

from __future__ import annotations

import json
import re

import pytest
import torch
from conftest import start_ray

from rl_system.algos import get_algorithm
from rl_system.algos.recurrent import RecurrentCore, episode_starts, unroll
from rl_system.algos.update import Minibatch
from rl_system.checkpoint.resume import find_resume
from rl_system.checkpoint.store import CheckpointStore
from rl_system.cli.main import main
from rl_system.config import load_config
from rl_system.envs import make_env
from rl_system.run.loop import RunLoop, train

_PPO = get_algorithm("ppo")  # the factories over a run config
make_policy, make_sampler, make_trainer = _PPO.make_policy, _PPO.make_sampler, _PPO.make_trainer

MEMORY = "launch/configs/cartpole_memory_ppo.yaml"
FAST = ["tensorboard=false", "log_every_s=30"]


def _sampler(overrides: list[str], num_envs: int = 6, rollout_len: int = 24):
    cfg = load_config(MEMORY, [f"workers.num_envs={num_envs}", f"workers.rollout_len={rollout_len}",
                               "env.kwargs={velocities: false, max_episode_steps: 30}", *overrides])
    env = make_env(cfg.env.name, num_envs, "cpu", seed=0, **cfg.env.kwargs)
    torch.manual_seed(0)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed=0)
    return cfg, policy, sampler


def test_unroll_zeroes_the_state_where_an_episode_begins():
    core = RecurrentCore("lstm", 3, 5)
    x, h0 = torch.randn(6, 2, 3), torch.randn(2, core.state_size)
    reset = torch.zeros(6, 2, dtype=torch.bool)
    reset[3, 0] = True
    out = core.sequence(x, h0, reset)
    fresh = core.sequence(x[3:, :1], core.initial_state(1), torch.zeros(3, 1, dtype=torch.bool))
    assert torch.allclose(out[3:, :1], fresh, atol=1e-6)  # env 0 forgot everything before step 3
    assert not torch.allclose(out[3:, 1:], core.sequence(x[3:, 1:], core.initial_state(1), reset[3:, 1:]))
    entering = unroll(core.step, x, h0, reset, entering=True)
    assert torch.equal(entering[0], h0) and entering.shape == (6, 2, core.state_size)
    done = torch.tensor([[False], [True], [False]])
    assert episode_starts(done).flatten().tolist() == [False, False, True]


@pytest.mark.parametrize("overrides", [
    ["model.recurrent=gru"], ["model.recurrent=lstm"], ["model.recurrent=lstm", "model.share_encoder=false"],
], ids=["gru", "lstm", "lstm_separate_critic"])
def test_the_learner_replays_exactly_what_the_worker_sampled(overrides):
    cfg, policy, sampler = _sampler(overrides)
    first, _ = sampler.collect()
    first = {k: v.clone() for k, v in first.items()}
    cols, episodes = sampler.collect()  # the second rollout starts from carried, non-zero states
    assert len(episodes) > 0 and cols["init_state"].abs().sum() > 0
    assert cols["init_state"].shape == (6, policy.state_size)
    obs = {k.removeprefix("obs."): v for k, v in cols.items() if k.startswith("obs.")}
    reset = episode_starts(cols["terminated"] | cols["truncated"])
    assert reset.any()  # episodes of at most 30 steps end inside a 24-step rollout
    logp, entropy, value = policy.evaluate_sequence(obs, cols["action"], cols["init_state"], reset)
    assert torch.allclose(logp, cols["logp"], atol=1e-5) and torch.allclose(value, cols["value"], atol=1e-5)
    assert entropy.shape == (24, 6)
    # What the first rollout handed over is what the second began with, zeroed where it ended.
    done_last = (first["terminated"] | first["truncated"])[-1]
    assert torch.all(cols["init_state"][done_last] == 0)


def test_sampler_state_round_trips_and_a_feedforward_state_is_refused():
    _, _, sampler = _sampler(["model.recurrent=gru"])
    sampler.collect()
    state = sampler.state_dict()
    _, _, other = _sampler(["model.recurrent=gru"])
    other.load_state_dict(state)
    assert torch.equal(other.hidden, sampler.hidden)
    _, _, feedforward = _sampler(["model.recurrent=none"])
    with pytest.raises(ValueError, match="no recurrent_state"):
        other.load_state_dict(feedforward.state_dict())


def test_a_sampler_in_inference_mode_can_be_reset_restored_and_trained_on_outside_it():
    """The sampler steps in inference mode; its own state (made there) is reset and restored in
    it too, and the columns it hands out are its buffer's ordinary tensors, fit for autograd."""
    _, policy, sampler = _sampler(["model.recurrent=gru"])
    cols, _ = sampler.collect()
    assert torch.is_inference(sampler.hidden) and not any(torch.is_inference(v) for v in cols.values())
    state = sampler.state_dict()
    sampler.reset(seed=3)  # zeroes the recurrent state in place
    assert not sampler.hidden.any()
    sampler.load_state_dict(state)
    cols, _ = sampler.collect()
    reset = torch.zeros_like(cols["terminated"])
    logp, _, value = policy.evaluate_sequence({"obs": cols["obs.obs"]}, cols["action"], cols["init_state"], reset)
    (logp.sum() + value.sum()).backward()  # the columns enter a graph
    assert all(p.grad is not None for p in policy.parameters() if p.requires_grad)


def test_burn_in_steps_carry_no_loss():
    cfg, policy, sampler = _sampler(["model.recurrent=gru", "ppo.burn_in=20", "ppo.num_epochs=1",
                                     "ppo.num_minibatches=1"])
    cols, _ = sampler.collect()
    batch = {k: v.clone() for k, v in cols.items()}
    grads = []
    for scale in (1.0, 1000.0):  # rewards before step 20 change; the gradient must not
        trainer = make_trainer(make_policy(*_specs(sampler), cfg), cfg)
        trainer.policy.load_state_dict(policy.state_dict())
        b = dict(batch, reward=batch["reward"].clone(), value=batch["value"].clone())
        b["reward"][:20] *= scale
        data = trainer.prepare(b)
        data["advantage"][:20] = 0.0 if scale == 1.0 else 1e6  # only the first 20 steps differ
        trainer.optimizer.zero_grad()
        rows = (data["logp"].shape[0] - 20) * data["logp"].shape[1]  # loss rows: steps after burn-in
        trainer.step(Minibatch({**data, "advantage": data["advantage"]}, rows))
        grads.append(torch.cat([p.detach().flatten() for p in trainer.policy.parameters()]))
    assert torch.allclose(grads[0], grads[1])


def _specs(sampler):
    return sampler.env.observation_spec, sampler.env.action_spec


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory):
    start_ray()
    run = tmp_path_factory.mktemp("memory") / "run"
    cfg = load_config(MEMORY, FAST + ["target_return=200", "max_env_steps=400000"])
    return run, train(cfg, run_dir=run, quiet=True)


@pytest.mark.slow
def test_recurrent_ppo_learns_memory_cartpole_through_the_system(memory_run):
    run, summary = memory_run
    assert summary.reached_target, summary  # positions only: an MLP cannot see the velocities
    assert summary.dropped_rollouts == 0 and summary.policy_version == summary.rounds


@pytest.mark.slow
def test_recurrent_checkpoint_evaluates(memory_run, capsys):
    run, _ = memory_run
    assert main(["eval", str(run), "--episodes", "10", "--deterministic", "--json", str(run / "e.json")]) == 0
    result = json.loads((run / "e.json").read_text())
    assert result["episodes"] == 10 and result["return_mean"] >= 100, result  # random play: ~22


@pytest.mark.slow  # two runs compared bit for bit (feedforward resume equivalence: tests/run/test_resilience.py)
def test_recurrent_resume_matches_the_uninterrupted_run(ray_session, tmp_path):
    overrides = FAST + ["workers.num_workers=1", "workers.num_envs=16", "target_return=null",
                        "max_env_steps=3584", "checkpoint.every_rounds=6", "checkpoint.keep_last=10",
                        "workers.rollout_len=32"]
    cfg = load_config(MEMORY, overrides)  # 7 rounds of 16 × 32
    train(cfg, run_dir=tmp_path / "a", quiet=True)
    full, _, _ = CheckpointStore(str(tmp_path / "a" / "checkpoints")).load_latest_valid()
    round_6 = find_resume(str(tmp_path / "a" / "checkpoints" / "ckpt-v00000006.rlck"), cfg, None)
    assert round_6.state["workers"][0]["recurrent_state"].abs().sum() > 0  # the worker's memory is saved
    RunLoop(cfg, tmp_path / "b", log_level="warning", resume_state=round_6.state).run()
    resumed, _, _ = CheckpointStore(str(tmp_path / "b" / "checkpoints")).load_latest_valid()
    assert resumed["learner"]["version"] == full["learner"]["version"] == 7
    for key, value in full["learner"]["model"].items():
        assert torch.equal(value, resumed["learner"]["model"][key]), key


BAD = [
    (["env.name=AliceBob", "env.kwargs={}", "model.recurrent=gru"], r"env 'AliceBob': needs multi-agent envs, which algo 'ppo' lacks; algo mappo, hmasd have it"),
    (["ppo.burn_in=32"], r"ppo\.burn_in \(32\) must be below workers\.rollout_len \(32\)"),
    (["algo=hmasd", "env.name=AliceBob", "env.kwargs={}"], r"model\.recurrent: needs a network from the model: section, which algo 'hmasd' lacks; algo ppo, a2c have it \(its own: hmasd\.hidden\)"),
    (["env.name=CartPole", "model.encoders={obs: nature}"], r"model\.encoders\.obs: a 'nature' encoder needs an image"),
]


@pytest.mark.parametrize("overrides,expected", BAD, ids=["multi_agent", "burn_in", "hmasd", "cnn_on_vector"])
def test_bad_recurrent_or_encoder_config_is_one_line_and_exit_2(capsys, tmp_path, overrides, expected):
    sets = [a for o in overrides for a in ("--set", o)]
    code = main(["train", MEMORY, "--run-dir", str(tmp_path / "run"), *sets])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rl-system: config error: "), err
    assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "run").exists()


def test_eval_runs_a_cnn_and_lstm_checkpoint(tmp_path):
    """A scan-conv + LSTM Navigation checkpoint through rl-system eval's path (sampler, states)."""
    from rl_system.policy.evaluation import evaluate

    cfg = load_config(None, ["env.name=Navigation", "env.kwargs={num_static: 6, num_dynamic: 2, max_steps: 40}",
                             "model.recurrent=lstm", "model.encoders={lidar: scan}", "model.share_encoder=false"])
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.kwargs)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    state = {"config": cfg.model_dump(), "learner": {"model": policy.state_dict(), "version": 1}}
    result = evaluate(state, episodes=6, deterministic=True, num_envs=3)
    assert result["episodes"] == 6 and 1 <= result["length_mean"] <= 40
    assert set(result) >= {"success_rate", "collision_rate"}
