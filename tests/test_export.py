"""``rl-system export``: a policy as TorchScript or ONNX, run without this package's code (torch.jit
or onnxruntime alone) on 1,000 observations: the same greedy actions, log-probabilities and
values within 1e-5, for an MLP (CartPole), a CNN (MinAtar) and a Gaussian policy (Pendulum);
what it cannot export is one line and exit 2, with nothing written."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rl_system
from policy_checkpoint import write_policy_checkpoint
from rl_system.cli import main

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


@pytest.mark.parametrize("config,overrides,observed", CASES, ids=["mlp", "gaussian", "cnn"])
def test_an_exported_policy_acts_as_the_torch_policy_without_rl_system(tmp_path, config, overrides, observed):
    import onnxruntime

    run = write_policy_checkpoint(tmp_path, config, overrides, observed=observed)
    policy = rl_system.load_policy(run, pick="final")
    obs = _observations(policy)
    action, logp, value = policy.network.act(obs, deterministic=True)

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
    run = write_policy_checkpoint(tmp_path / "gru", "cartpole_memory_ppo.yaml")
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
