"""Recurrent multi-agent PPO (``mappo.recurrent``): a replay by sequence gives what acting step by
step gave, for every per-agent action kind, GRU and LSTM, shared and per-agent cores, central and
local critics and a joint one; states zeroed where an episode begins and held while an agent is
inactive (a joint critic's, one per env, goes on); sequence
minibatches carry every agent of an env's whole sequence; a GRU learns the cue game with the cue
shown once, which feedforward MAPPO cannot; one line for a bad setting; a run through Ray learns,
saves the workers' states, resumes bit for bit, evaluates and exports with its state."""

from __future__ import annotations

import json
import re

import pytest
import torch
from in_process import train_rounds

from examples.cue_match.env import CueMatch
from rl_system.algos import get_algorithm
from rl_system.algos.mappo import columns as col
from rl_system.cli.main import main
from rl_system.config import load_config
from rl_system.envs.base import AGENT_ACTIVE, AgentBox, AgentDiscrete, AgentMultiDiscrete, TensorSpec

MAPPO = get_algorithm("mappo")
MEMORY = "examples/cue_match/config_memory.yaml"
SPECS = {"state": TensorSpec((6,)), "obs": TensorSpec((3, 4)), AGENT_ACTIVE: TensorSpec((3,), torch.bool)}


def _cfg(*overrides: str):
    return load_config(None, ["algo=mappo", "env.name=examples.cue_match.env:CueMatch", "workers.rollout_len=16",
                              *overrides])


def _setup(env_kwargs: dict, *overrides: str, num_envs: int = 32):
    cfg = _cfg(*overrides)
    env = CueMatch(num_envs, seed=0, **env_kwargs)
    torch.manual_seed(0)
    policy = MAPPO.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler, trainer = MAPPO.make_sampler(env, policy, cfg, torch.device("cpu")), MAPPO.make_trainer(policy, cfg)
    sampler.reset(seed=0)
    return sampler, trainer


@pytest.mark.parametrize("action_spec", [AgentDiscrete(5, 3), AgentMultiDiscrete((2, 3), 3),
                                         AgentBox((2,), (-1.0, -1.0), (1.0, 1.0), 3)], ids=str)
@pytest.mark.parametrize("kind,share,critic", [("gru", "true", "central"), ("lstm", "false", "local"),
                                               ("gru", "false", "joint")])
def test_a_replay_by_sequence_gives_what_acting_step_by_step_gave(action_spec, kind, share, critic):
    """Resets at an episode start and inactive agents included: the learner's BPTT replay from the
    initial state scores the actions as the sampler's steps did."""
    value_kind = "joint" if critic == "joint" else "per_agent"
    cfg = _cfg(f"mappo.recurrent={kind}", "mappo.recurrent_size=8", f"mappo.share_params={share}",
               f"mappo.critic={'central' if critic == 'joint' else critic}", f"mappo.central_value={value_kind}")
    torch.manual_seed(0)
    policy = MAPPO.make_policy(SPECS, action_spec, cfg)
    T, B, n = 6, 4, 3
    obs = {"state": torch.randn(T, B, 6), "obs": torch.randn(T, B, n, 4),
           AGENT_ACTIVE: torch.ones(T, B, n, dtype=torch.bool)}
    obs[AGENT_ACTIVE][3:, 1, 0] = False  # env 1's agent 0 leaves after 3 steps
    reset = torch.zeros(T, B, dtype=torch.bool)
    reset[4, 2] = True  # env 2's next episode begins on step 4
    state0 = torch.randn(B, n, policy.state_size)
    if critic == "joint":  # one critic state per env, in every agent's row
        S = policy.actor_core.state_size
        state0[..., S:] = state0[:, :1, S:]
    state, acted = state0, []
    for t in range(T):
        state = state.masked_fill(reset[t].view(B, 1, 1), 0.0)
        action, logp, value, state = policy.act({k: v[t] for k, v in obs.items()}, state)
        acted.append((action, logp, value))
    action, logp, value = (torch.stack(x) for x in zip(*acted))
    logp2, entropy, value2 = policy.evaluate_sequence(obs, action, state0, reset)
    assert logp2.shape == value2.shape == entropy.shape == (T, B, n)
    assert torch.allclose(logp, logp2, atol=1e-5) and torch.allclose(value, value2, atol=1e-5)
    logp2.sum().backward()
    assert policy.actor_core.rec.weight.grad.abs().sum() > 0  # through time
    with pytest.raises(TypeError, match="evaluated over sequences"):
        policy.evaluate({k: v[0] for k, v in obs.items()}, action[0])


def test_an_episode_start_forgets_the_past_and_an_inactive_agent_holds_its_state():
    cfg = _cfg("mappo.recurrent=gru", "mappo.recurrent_size=8")
    torch.manual_seed(0)
    policy = MAPPO.make_policy(SPECS, AgentDiscrete(5, 3), cfg)
    T, B = 5, 2
    obs = {"state": torch.randn(T, B, 6), "obs": torch.randn(T, B, 3, 4),
           AGENT_ACTIVE: torch.ones(T, B, 3, dtype=torch.bool)}
    action = torch.randint(0, 5, (T, B, 3))
    reset = torch.zeros(T, B, dtype=torch.bool)
    reset[2] = True
    logp, _, value = policy.evaluate_sequence(obs, action, torch.randn(B, 3, policy.state_size), reset)
    later = {k: v[2:] for k, v in obs.items()}
    fresh_logp, _, fresh_value = policy.evaluate_sequence(later, action[2:], policy.initial_state(B),
                                                          torch.zeros(T - 2, B, dtype=torch.bool))
    assert torch.allclose(logp[2:], fresh_logp, atol=1e-6) and torch.allclose(value[2:], fresh_value, atol=1e-6)

    step = {k: v[0] for k, v in obs.items()}
    step[AGENT_ACTIVE] = torch.tensor([[True, False, True]] * B)
    state = torch.randn(B, 3, policy.state_size)
    new_state = policy.act(step, state)[3]
    assert torch.equal(new_state[:, 1], state[:, 1]) and not torch.equal(new_state[:, 0], state[:, 0])


def test_a_joint_critics_state_is_one_per_env_in_every_row_and_goes_on_while_an_agent_waits():
    cfg = _cfg("mappo.recurrent=lstm", "mappo.recurrent_size=8", "mappo.central_value=joint")
    torch.manual_seed(0)
    policy = MAPPO.make_policy(SPECS, AgentDiscrete(5, 3), cfg)
    S, B = policy.actor_core.state_size, 2
    assert policy.critic_core.inp.weight.shape == (1, 6, 32)  # the state alone in, one core for the env
    step = {"state": torch.randn(B, 6), "obs": torch.randn(B, 3, 4),
            AGENT_ACTIVE: torch.tensor([[True, False, True]] * B)}
    state = policy.initial_state(B)
    state[..., S:] = torch.randn(B, 1, S)
    _, _, value, new_state = policy.act(step, state)
    assert torch.equal(new_state[:, 1, :S], state[:, 1, :S])  # the waiting agent's actor holds its memory
    critic = new_state[..., S:]
    assert torch.equal(critic, critic[:, :1].expand_as(critic)) and not torch.equal(critic, state[..., S:])
    assert torch.equal(value, policy.value(step, state)) and value.shape == (B, 3)


def test_the_sampler_zeroes_the_state_where_an_episode_ends_and_ships_the_initial_one():
    sampler, _ = _setup({"memory": True, "horizon": 6}, "mappo.recurrent=gru", "mappo.recurrent_size=8", num_envs=4)
    cols, _ = sampler.collect()
    assert cols[col.INIT_STATE].shape == (4, 2, 16) and not cols[col.INIT_STATE].any()  # a fresh reset
    after_16 = sampler.hidden.clone()  # step 4 of the third episode: it remembers
    assert after_16.abs().sum(-1).gt(0).all()
    assert torch.equal(sampler.collect()[0][col.INIT_STATE], after_16)
    # Episodes of 8 steps end with the 32nd: every env's and agent's state starts the next one afresh.
    sampler, _ = _setup({"memory": True, "horizon": 8}, "mappo.recurrent=lstm", "mappo.recurrent_size=8", num_envs=4)
    sampler.collect()
    assert not sampler.hidden.any()
    # The state travels with the sampler's state (checkpoints), and only to a recurrent sampler.
    saved = sampler.state_dict()
    other, _ = _setup({"memory": True, "horizon": 8}, "mappo.recurrent=lstm", "mappo.recurrent_size=8", num_envs=4)
    other.hidden.fill_(1.0)
    other.load_state_dict(saved)
    assert torch.equal(other.hidden, sampler.hidden)
    feedforward, _ = _setup({"memory": True}, num_envs=4)
    with pytest.raises(ValueError, match="no recurrent_state"):
        other.load_state_dict(feedforward.state_dict())


def test_sequence_minibatches_keep_every_agent_of_an_env_sequence_together():
    sampler, trainer = _setup({"memory": True, "horizon": 6, "early": True}, "mappo.recurrent=gru",
                              "mappo.recurrent_size=8", "mappo.num_minibatches=3", num_envs=8)
    sampler.collect()
    batch = {k: v.clone() for k, v in sampler.collect()[0].items()}  # steps 16-31: episodes begin at 18, 24, 30
    data = trainer.prepare(batch)
    T, N, n = data[col.LOGP].shape
    assert (T, N, n) == (16, 8, 2) and data[col.RESET].shape == (T, N)
    assert torch.equal(data[col.RESET].nonzero()[:, 0].unique(), torch.tensor([2, 8, 14]))
    # Tag every row with its env: the step columns along dim 1, the initial states along dim 0.
    data["env"] = torch.arange(N).view(1, N, 1).expand(T, N, n)
    data[col.INIT_STATE] = torch.arange(N, dtype=torch.float32).view(N, 1, 1).expand_as(data[col.INIT_STATE])
    seen = []
    for minibatch in trainer.epochs(data, batch)():
        mb, rows = minibatch.data, minibatch.rows
        envs = mb["env"][0, :, 0]
        assert mb[col.LOGP].shape == (T, len(envs), n)
        assert torch.equal(mb["env"], envs.view(1, -1, 1).expand(T, -1, n))  # whole sequences, all agents
        assert torch.equal(mb[col.INIT_STATE][:, 0, 0].long(), envs)
        for key in ("obs.obs", col.ACTION, col.ADVANTAGE, col.ACTIVE, col.RESET):
            assert torch.equal(mb[key], data[key][:, envs]), key
        assert rows == int(data[col.ACTIVE][:, envs].sum()) < T * len(envs) * n  # agent 0 leaves early
        seen += envs.tolist()
    assert sorted(seen) == list(range(N))


def _train(rounds: int, *overrides: str) -> list[float]:
    torch.set_num_threads(1)  # small tensors: one thread is faster, and spares a loaded machine
    sampler, trainer = _setup({"memory": True, "horizon": 6}, "mappo.lr=3e-3", *overrides)
    return train_rounds(sampler, trainer, rounds)


def test_a_gru_learns_the_cue_shown_once_which_feedforward_mappo_cannot():
    """6 steps, the cue seen on the first: without memory at best 1 + 5 / 3 (agent 0) and
    1 + 5 * 2 / 3 (agent 1, whose cue is most often 0), 3.5 on average; with memory 6."""
    feedforward = _train(12)
    assert max(feedforward) < 4.0, feedforward
    for value in ("per_agent", "joint"):  # the critic's core per agent, or one per env (central_value: joint)
        recurrent = _train(12, "mappo.recurrent=gru", f"mappo.central_value={value}")
        assert recurrent[0] < 3.0 and max(recurrent[-6:]) >= 5.5 and min(recurrent[-6:]) > 4.5, (value, recurrent)


BAD = [("mappo.recurrent=rnn", r"mappo\.recurrent: Input should be 'none', 'gru' or 'lstm' \(got 'rnn'\)"),
       ("mappo.recurrent_size=0", r"mappo\.recurrent_size: Input should be greater than 0"),
       ("model.recurrent=gru", r"model\.recurrent: needs a network from the model: section, which algo 'mappo' lacks; "
                               r"algo ppo, a2c have it \(its own: mappo\.recurrent\)")]


@pytest.mark.parametrize("override,expected", BAD, ids=["kind", "size", "ppo_key"])
def test_a_bad_recurrent_setting_is_one_line_and_exit_2(capsys, tmp_path, override, expected):
    code = main(["train", MEMORY, "--run-dir", str(tmp_path / "run"), "--set", override])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rl-system: config error: "), lines
    assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # two Ray runs (about 25 s each on 2 cores)
def test_a_recurrent_mappo_run_learns_resumes_bit_for_bit_evaluates_and_exports(ray_session, tmp_path):
    from rl_system import export, load_policy, train
    from rl_system.checkpoint.store import CheckpointStore

    overrides = ["return_window=64", "stop_at_target=false", "max_env_steps=10240", "checkpoint.every_rounds=5",
                 "checkpoint.keep_last=10", "tensorboard=false"]  # 10 rounds of 2 x 32 envs x 16 steps
    result = train(load_config(MEMORY, overrides), run_dir=tmp_path / "run", quiet=True)
    assert result.reached_target, result
    round_5 = tmp_path / "run" / "checkpoints" / "ckpt-v00000005.rlck"
    resumed = train(load_config(MEMORY, overrides), run_dir=tmp_path / "resumed", resume=round_5, quiet=True)
    assert resumed.env_steps == result.env_steps
    full, _, _ = CheckpointStore(str(tmp_path / "run" / "checkpoints")).load_latest_valid()
    again, _, _ = CheckpointStore(str(tmp_path / "resumed" / "checkpoints")).load_latest_valid()
    # Every worker's memory is saved: 32 envs, 3 agents, the actor's GRU state then the critic's.
    assert full["workers"][0]["recurrent_state"].shape == (32, 3, 128)
    assert again["learner"]["version"] == full["learner"]["version"] == 10
    for key, value in full["learner"]["model"].items():
        assert torch.equal(value, again["learner"]["model"][key]), key

    out = tmp_path / "eval.json"
    assert main(["eval", str(tmp_path / "run"), "--episodes", "32", "--deterministic", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["return_mean"] >= 7.5  # feedforward's best: about 3.3

    # The ONNX graph takes the recurrent state (``recurrent_state``: ``state`` is the env's global state)
    # and returns it; fed back, it acts as the network does for an episode.
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(export(tmp_path / "run", "onnx", tmp_path / "policy.onnx")))
    policy = load_policy(tmp_path / "run")
    env = CueMatch(16, seed=3, num_agents=3, k=4, horizon=8, memory=True)
    obs, state, onnx_state = env.reset(seed=3), None, policy.network.initial_state(16).numpy()
    for _ in range(8):
        want, state = policy.act(obs, state, deterministic=True)
        got, onnx_state = session.run(["action", "new_state"], {**{k: v.numpy() for k, v in obs.items()},
                                                                "recurrent_state": onnx_state})
        assert (got == want.numpy()).all() and got.shape == (16, 3)
        obs = env.step(want).obs
