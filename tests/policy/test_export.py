"""``rl-system export``: a policy as TorchScript or ONNX, run without this package's code (torch.jit
or onnxruntime alone) on 1,000 observations: the same greedy actions, log-probabilities and
values within 1e-5, for an MLP (CartPole), a CNN (MinAtar), a Gaussian policy (Pendulum) and
GRU and LSTM policies (hidden-velocity CartPole; the state fed back through 10 steps); one agent's
policy of a MAPPO run (``--agent``) on the cue game's own observations, for shared and per-agent
weights, discrete and continuous actions; a joint central critic's values ``[B, n]`` in the graph of
all agents; what it cannot export is one line and exit 2, with
nothing written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from policy_checkpoint import write_policy_checkpoint

import rl_system
from rl_system.cli.main import main


def _observations(policy, n: int = 1000) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    out = {}
    for k in policy.obs_keys:
        spec = policy.obs_spec[k]
        x = torch.randn(n, *spec.shape, generator=g)
        out[k] = (x > 0.5) if spec.dtype == torch.bool else x.to(spec.dtype)
    return out


# CartPole's MLP with an observation normaliser that has seen data: the export must carry it.
CASES = [("cartpole_ppo.yaml", ["model.normalize_obs=true"], True), ("pendulum_ppo.yaml", [], False),
         ("minatar_breakout_ppo.yaml", [], False)]


def _check(got, want, name: str) -> None:
    """``got`` (numpy, from the exported graph) against ``want`` (torch): actions identical where
    discrete, everything else within 1e-5."""
    got, want = np.asarray(got), want.numpy()
    if name == "action" and not np.issubdtype(want.dtype, np.floating):
        assert np.array_equal(got, want), name
    else:  # a Gaussian's mean, log-probabilities, values, states: the same up to float rounding
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=name)


def _exported_runs(policy, run, tmp_path):
    """``(name, step)`` of the TorchScript and ONNX exports, each ``step(obs, state) -> outputs``."""
    import onnxruntime

    ts = torch.jit.load(str(rl_system.export(run, "torchscript", tmp_path / "p.pt", pick="final")))
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "p.onnx"), "--pick", "final"]) == 0
    session = onnxruntime.InferenceSession(str(tmp_path / "p.onnx"))
    names = [i.name for i in session.get_inputs()]
    assert names == policy.obs_keys + (["state"] if policy.recurrent else [])

    @torch.no_grad()
    def torchscript(obs, state):
        return [t.numpy() for t in ts(*obs.values(), *([] if state is None else [torch.as_tensor(state)]))]

    def onnx(obs, state):
        feed = {k: v.numpy() for k, v in obs.items()}
        if state is not None:
            feed["state"] = np.asarray(state)
        return session.run(None, feed)

    return [("torchscript", torchscript), ("onnx", onnx)]


# CartPole's MLP with an observation normaliser that has seen data: the export must carry it.
CASES = [("cartpole_ppo.yaml", ["model.normalize_obs=true"], True), ("pendulum_ppo.yaml", [], False),
         ("minatar_breakout_ppo.yaml", [], False)]


@pytest.mark.parametrize("config,overrides,observed", CASES, ids=["mlp", "gaussian", "cnn"])
def test_an_exported_policy_acts_as_the_torch_policy_without_rl_system(tmp_path, config, overrides, observed):
    run = write_policy_checkpoint(tmp_path, config, overrides, observed=observed)
    policy = rl_system.load_policy(run, pick="final")
    obs = _observations(policy)
    want = policy.network.act(obs, deterministic=True)
    for fmt, step in _exported_runs(policy, run, tmp_path):
        for name, got, ref in zip(("action", "logp", "value"), step(obs, None), want):
            _check(got, ref, f"{fmt} {name}")


@pytest.mark.parametrize("core", ["gru", "lstm"])
def test_an_exported_recurrent_policy_carries_its_state_as_the_torch_policy(tmp_path, core):
    """10 steps of 100 envs (1,000 observations), each export's own state fed back: every step's
    action, logp, value and new state match the torch policy's, so the state in and out is right."""
    # Weights off their initialisation (zero biases), so every input and the state matter.
    run = write_policy_checkpoint(tmp_path, "cartpole_memory_ppo.yaml", [f"model.recurrent={core}"], perturb=0.3)
    policy = rl_system.load_policy(run, pick="final")
    obs = _observations(policy)
    steps = {k: v.view(10, 100, *v.shape[1:]) for k, v in obs.items()}
    for fmt, step in _exported_runs(policy, run, tmp_path):
        state, mine = policy.network.initial_state(100), None
        for t in range(10):
            o = {k: v[t] for k, v in steps.items()}
            want = policy.network.act(o, state, deterministic=True)
            got = step(o, mine if mine is not None else state.numpy())
            for name, g, ref in zip(("action", "logp", "value", "new_state"), got, want):
                _check(g, ref, f"{fmt} step {t} {name}")
            state, mine = want[3], got[3]
        assert float(state.abs().max()) > 0.1  # the state moved: the check is not of zeros


def test_what_cannot_be_exported_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    run = write_policy_checkpoint(tmp_path / "hmasd", "alice_bob_hmasd.yaml")
    out = tmp_path / "hmasd.pt"
    assert main(["export", str(run), "--format", "torchscript", "--out", str(out), "--pick", "final"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot export:" in err[0] and "'hmasd'" in err[0] and not out.exists()
    junk = tmp_path / "junk.rlck"
    junk.write_bytes(b"not a checkpoint")
    assert main(["export", str(junk), "--format", "onnx", "--out", str(tmp_path / "j.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-system: cannot export:") and not (tmp_path / "j.onnx").exists()
    with pytest.raises(SystemExit) as bad:
        main(["export", str(run), "--format", "tflite", "--out", str(out)])
    assert bad.value.code == 2
    assert not list(tmp_path.glob(".*.pt.*")) and not list(tmp_path.glob(".*.onnx.*"))  # no temporary left


def _cue_observations(kwargs: dict, steps: int = 4) -> dict[str, torch.Tensor]:
    """The cue game's own observations of 64 envs over ``steps`` steps of random actions."""
    from examples.cue_match.env import CueMatch

    env, g = CueMatch(64, seed=3, **kwargs), torch.Generator().manual_seed(3)
    seen = [env.reset(seed=3)]
    for _ in range(steps - 1):
        shape = (64, *env.action_spec.shape)
        action = torch.rand(shape, generator=g) * 2 - 1 if kwargs.get("continuous") else torch.randint(0, 3, shape)
        seen.append(env.step(action).obs)
    return {k: torch.cat([o[k] for o in seen]) for k in seen[0]}


CUE = {"num_agents": 3, "k": 4, "horizon": 8}
AGENT_CASES = {  # (cue game kwargs, mappo settings): shared and per-agent weights, both critics
    "discrete-shared-central": ({}, ["mappo.share_params=true", "mappo.critic=central"]),
    "discrete-own-local": ({}, ["mappo.share_params=false", "mappo.critic=local"]),
    "continuous-shared-local": ({"continuous": True}, ["mappo.share_params=true", "mappo.critic=local"]),
    "continuous-own-central": ({"continuous": True}, ["mappo.share_params=false", "mappo.critic=central"]),
    "tanh_normal-shared-local": ({"continuous": True}, ["mappo.critic=local", "mappo.action_dist=tanh_normal"]),
    "discrete-shared-joint": ({}, ["mappo.critic=central", "mappo.central_value=joint"]),
}


@pytest.mark.parametrize("kwargs,settings", AGENT_CASES.values(), ids=AGENT_CASES.keys())
def test_each_agents_exported_policy_acts_as_its_part_of_the_mappo_policy(tmp_path, kwargs, settings):
    """Every agent's ONNX graph (the CLI's) on its own observation (and action mask) gives that
    agent's greedy action and logp of the whole policy (and its value with a local critic, the
    only critic one agent's inputs suffice for); one TorchScript graph (the API's) likewise."""
    import onnxruntime
    from policy_checkpoint import REPO

    cue = {**CUE, **kwargs}
    run = write_policy_checkpoint(tmp_path / "run", str(REPO / "examples/cue_match/config.yaml"),
                                  [f"env.kwargs={cue}", *settings], perturb=0.3)
    policy = rl_system.load_policy(run, pick="final")
    obs = _cue_observations(cue)
    with torch.no_grad():
        action, logp, value = policy.network.act(obs, deterministic=True)
    local = "mappo.critic=local" in settings
    for i in range(3):
        out = tmp_path / f"agent{i}.onnx"
        assert main(["export", str(run), "--format", "onnx", "--out", str(out), "--agent", str(i)]) == 0
        session = onnxruntime.InferenceSession(str(out))
        inputs = [x.name for x in session.get_inputs()]
        assert inputs == ["obs"] + ([] if kwargs.get("continuous") else ["action_mask"])
        got = session.run(None, {k: obs[k][:, i].numpy() for k in inputs})
        assert [x.name for x in session.get_outputs()] == ["action", "logp"] + (["value"] if local else [])
        for name, g, ref in zip(("action", "logp", "value"), got, (action[:, i], logp[:, i], value[:, i])):
            _check(g, ref, f"agent {i} {name}")
    ts = torch.jit.load(str(rl_system.export(run, "torchscript", tmp_path / "a1.pt", agent=1)))
    with torch.no_grad():
        got = ts(*[obs[k][:, 1] for k in inputs])
    _check(got[0].numpy(), action[:, 1], "torchscript action")
    assert len(set(action[:, 1].flatten().tolist())) > 1  # the weights act: the check is not of one constant


def test_a_joint_critics_values_come_out_of_the_graph_of_all_agents(tmp_path):
    """``central_value: joint``: the graph of all agents gives each agent's value ``[B, n]``, as the network does."""
    import onnxruntime
    from policy_checkpoint import REPO

    run = write_policy_checkpoint(tmp_path / "run", str(REPO / "examples/cue_match/config.yaml"),
                                  [f"env.kwargs={CUE}", "mappo.central_value=joint"], perturb=0.3)
    policy = rl_system.load_policy(run, pick="final")
    obs = _cue_observations(CUE)
    with torch.no_grad():
        want = policy.network.act(obs, deterministic=True)
    out = tmp_path / "all.onnx"
    assert main(["export", str(run), "--format", "onnx", "--out", str(out)]) == 0
    session = onnxruntime.InferenceSession(str(out))
    got = session.run(None, {i.name: obs[i.name].numpy() for i in session.get_inputs()})
    assert [x.name for x in session.get_outputs()] == ["action", "logp", "value"] and got[2].shape == (256, 3)
    for name, g, ref in zip(("action", "logp", "value"), got, want):
        _check(g, ref, name)
    assert not np.allclose(got[2][:, 0], got[2][:, 1])  # each agent its own output


@pytest.mark.parametrize("run_config,agent,says", [
    ("cue", "3", "agent 3 is out of range: 'examples.cue_match.env:CueMatch' has agents 0 to 2"),
    ("cue", "-1", "agent -1 is out of range"),
    ("cartpole_ppo.yaml", "0", "--agent on a ppo run of 'CartPole': needs one agent's policy exported alone, which algo "
                               "'ppo' lacks; algo mappo has it"),
    ("cue_memory", "0", "a recurrent MAPPO policy exports as one graph for all its agents"),
], ids=["past_the_last", "negative", "single_agent", "recurrent"])
def test_an_agent_that_is_not_there_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, run_config, agent, says):
    from policy_checkpoint import REPO

    examples = {"cue": "config.yaml", "cue_memory": "config_memory.yaml"}
    config = str(REPO / "examples/cue_match" / examples[run_config]) if run_config in examples else run_config
    run = write_policy_checkpoint(tmp_path / "run", config)
    out = tmp_path / "a.onnx"
    assert main(["export", str(run), "--format", "onnx", "--out", str(out), "--agent", agent]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("rl-system: cannot export: ") and says in err, err
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob(".a.onnx*"))
    with pytest.raises(ValueError, match="out of range|--agent on a|recurrent"):
        rl_system.export(run, "onnx", out, agent=int(agent))


@pytest.mark.slow  # trains CartPole for 300k env steps, then 100 episodes under onnxruntime
def test_an_exported_cartpole_policy_scores_475_under_onnxruntime_alone(ray_session, tmp_path):
    """CartPole trained 300k env steps past its target, exported to ONNX by the CLI, then 100
    Gymnasium CartPole-v1 episodes acted by examples/onnx_policy/run_gymnasium.py in a fresh
    interpreter that imports neither rl_system, torch nor Ray: mean return >= 475."""
    import re
    import subprocess
    import sys

    from policy_checkpoint import REPO

    result = rl_system.train(REPO / "launch/configs/cartpole_ppo.yaml", run_dir=tmp_path / "run",
                             overrides=["stop_at_target=false", "max_env_steps=300000", "tensorboard=false"])
    assert result.reached_target
    assert main(["export", str(result.run_dir), "--format", "onnx", "--out", str(tmp_path / "cp.onnx")]) == 0
    done = subprocess.run([sys.executable, str(REPO / "examples/onnx_policy/run_gymnasium.py"),
                           str(tmp_path / "cp.onnx"), "CartPole-v1", "--episodes", "100"],
                          capture_output=True, text=True, timeout=300, check=True)
    line = done.stdout.strip()
    assert "imported rl_system: False, torch: False, ray: False" in line, line
    mean = float(re.search(r"return ([\d.]+) ±", line).group(1))
    assert mean >= 475, line


def test_with_value_normalisation_both_graphs_give_values_in_return_units(tmp_path):
    """``mappo.value_norm``: the critic predicts normalised values; the graph of all agents and one
    agent's graph (a local critic) give them in return units, as the sampler hands them to GAE."""
    import onnxruntime
    from policy_checkpoint import REPO

    run = write_policy_checkpoint(tmp_path / "run", str(REPO / "examples/cue_match/config.yaml"),
                                  [f"env.kwargs={CUE}", "mappo.critic=local", "mappo.value_norm=true"], perturb=0.3)
    policy = rl_system.load_policy(run, pick="final")
    obs = _cue_observations(CUE)
    norm = policy.network.value_norm
    with torch.no_grad():
        _, _, raw = policy.network.act(obs, deterministic=True)
        want = norm.denormalize(raw)
    assert not torch.allclose(want, raw)  # a fresh normaliser's units (mean 0, std 0.1) differ from the critic's
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "all.onnx")]) == 0
    session = onnxruntime.InferenceSession(str(tmp_path / "all.onnx"))
    got = session.run(None, {i.name: obs[i.name].numpy() for i in session.get_inputs()})
    _check(got[2], want, "value of the graph of all agents")
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "a2.onnx"), "--agent", "2"]) == 0
    session = onnxruntime.InferenceSession(str(tmp_path / "a2.onnx"))
    got = session.run(None, {i.name: obs[i.name][:, 2].numpy() for i in session.get_inputs()})
    _check(got[2], want[:, 2], "agent 2's value")
