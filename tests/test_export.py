"""``rl-system export``: a policy as TorchScript or ONNX, run without this package's code (torch.jit
or onnxruntime alone) on 1,000 observations: the same greedy actions, log-probabilities and
values within 1e-5, for an MLP (CartPole), a CNN (MinAtar) and a Gaussian policy (Pendulum);
what it cannot export is one line and exit 2, with nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import rl_system
from rl_system.cli import main

REPO = Path(__file__).resolve().parents[1]


def _checkpoint(tmp_path: Path, config: str, overrides: list[str] = ()) -> Path:
    """A run directory holding one checkpoint as a run writes it (learner state and config), made
    without a run: the learner's initial weights, with an observation normaliser that has seen data."""
    from envs import make_env
    from rl_system.checkpoint import CheckpointStore
    from rl_system.config import load_config
    from rl_system.learner import Learner

    cfg = load_config(str(REPO / "launch/configs" / config), list(overrides))
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.kwargs)
    spec = env.observation_spec
    env.close()
    learner = Learner(cfg, spec, env.action_spec)
    observe = getattr(learner.policy, "observe", None)
    if observe is not None and cfg.model.normalize_obs:
        observe({k: 3 + 2 * torch.randn(64, *s.shape) for k, s in spec.items()})
    CheckpointStore(str(tmp_path / "checkpoints")).save({"learner": learner.state(), "config": cfg.model_dump()},
                                                        {"policy_version": 0, "env_steps": 0})
    return tmp_path


def _observations(policy, n: int = 1000) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    out = {}
    for k in policy.obs_keys:
        shape, dtype = policy.obs_shapes[k], policy.obs_dtypes[k]
        x = torch.randn(n, *shape, generator=g)
        out[k] = (x > 0.5) if dtype == torch.bool else x.to(dtype)
    return out


CASES = [("cartpole_ppo.yaml", ["model.normalize_obs=true"]), ("pendulum_ppo.yaml", []),
         ("minatar_breakout_ppo.yaml", [])]


@pytest.mark.parametrize("config,overrides", CASES, ids=["mlp", "gaussian", "cnn"])
def test_an_exported_policy_acts_as_the_torch_policy_without_rl_system(tmp_path, config, overrides):
    import onnxruntime

    run = _checkpoint(tmp_path, config, overrides)
    policy = rl_system.load_policy(run, pick="final")
    obs = _observations(policy)
    with torch.no_grad():
        xa, xc = policy.network.encode(obs)
        action, logp = policy.network.sample(xa, obs, True)
        value = policy.network.critic(xc).squeeze(-1)

    ts = torch.jit.load(str(rl_system.export(run, "torchscript", tmp_path / "p.pt", pick="final")))
    t_action, t_logp, t_value = ts(*obs.values())
    assert torch.equal(t_action, action)
    assert torch.allclose(t_logp, logp, atol=1e-5) and torch.allclose(t_value, value, atol=1e-5)

    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "p.onnx"), "--pick", "final"]) == 0
    session = onnxruntime.InferenceSession(str(tmp_path / "p.onnx"))
    assert [i.name for i in session.get_inputs()] == policy.obs_keys
    o_action, o_logp, o_value = session.run(None, {k: v.numpy() for k, v in obs.items()})
    if action.dtype.is_floating_point:  # a Gaussian's mean: the same up to float rounding
        np.testing.assert_allclose(o_action, action.numpy(), atol=1e-5)
    else:
        assert np.array_equal(o_action, action.numpy())
    np.testing.assert_allclose(o_logp, logp.numpy(), atol=1e-5)
    np.testing.assert_allclose(o_value, value.numpy(), atol=1e-5)


def test_what_cannot_be_exported_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    run = _checkpoint(tmp_path / "gru", "cartpole_memory_ppo.yaml")
    out = tmp_path / "gru.pt"
    assert main(["export", str(run), "--format", "torchscript", "--out", str(out), "--pick", "final"]) == 2
    err = capsys.readouterr().err
    assert "cannot export:" in err and "recurrent" in err and not out.exists()
    junk = tmp_path / "junk.rlck"
    junk.write_bytes(b"not a checkpoint")
    assert main(["export", str(junk), "--format", "onnx", "--out", str(tmp_path / "j.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-system: cannot export:") and not (tmp_path / "j.onnx").exists()
    with pytest.raises(SystemExit) as bad:
        main(["export", str(run), "--format", "tflite", "--out", str(out)])
    assert bad.value.code == 2
    assert not list(tmp_path.glob(".*.pt.*")) and not list(tmp_path.glob(".*.onnx.*"))  # no temporary left
