import subprocess
import sys

import pytest

from rl_system.config import ConfigError, load_config


def test_defaults_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  name: CartPole\nworkers:\n  num_envs: 8\n")
    cfg = load_config(path, ["workers.rollout_len=4", "ppo.lr=1e-3", "model.hidden_sizes=[32, 32]"])
    assert cfg.workers.num_envs == 8 and cfg.workers.rollout_len == 4
    assert cfg.ppo.lr == pytest.approx(1e-3) and cfg.model.hidden_sizes == [32, 32]


@pytest.mark.parametrize("override, needle", [
    ("workers.num_envs=-3", "workers.num_envs: Input should be greater than 0"),
    ("workers.num_envz=3", "workers.num_envz: unknown key"),
    ("ppo.lr=fast", "ppo.lr: Input should be a valid number"),
    ("ppo.gamma=1.5", "ppo.gamma: Input should be less than or equal to 1"),
    ("model.hidden_sizes=[0]", "model: Value error, hidden_sizes must be"),
    ("compression=zstd", "compression: Input should be 'auto', 'lz4' or 'none' (got 'zstd')"),
    ("rollback.drop=0", "rollback.drop: Input should be greater than 0"),
    ("rollback.lr_scale=1.5", "rollback.lr_scale: Input should be less than or equal to 1"),
    ("rollback.max_rollbacks=0", "rollback.max_rollbacks: Input should be greater than or equal to 1"),
    ("rollback.settle_rounds=-1", "rollback.settle_rounds: Input should be greater than or equal to 0"),
    ("nonsense", "expected KEY=VALUE"),
])
def test_bad_values_name_the_key(override, needle):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("workers: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(scalar)


@pytest.mark.parametrize("args, needle", [
    (["--set", "workers.num_envs=-3"], "config error: workers.num_envs: Input should be greater than 0 (got -3)"),
    (["--set", "ppo.typo=1"], "config error: ppo.typo: unknown key"),
    # Rejected by the env / the algorithm, not the schema: still one line, and before Ray starts.
    (["--set", "env.kwargs.bogus=1"], "config error: env 'CartPole': "),
    (["--set", "env.eval_kwargs.bogus=1"], "config error: env 'CartPole': "),  # the test env's too
    (["--set", "selfplay.enabled=true"],
     "config error: selfplay.enabled: env 'CartPole' has no pluggable opponent (set_opponent)"),
])
def test_cli_bad_config_is_one_line_and_exit_2(args, needle):
    proc = subprocess.run([sys.executable, "-m", "rl_system", "train", "launch/configs/cartpole_ppo.yaml", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rl-system: {needle}"), lines
    assert "Traceback" not in proc.stderr + proc.stdout


def test_torch_threads_auto_follows_the_cpus_an_actor_reserves():
    import os

    from rl_system.device import resolve_threads

    cfg = load_config(None, ["learner.torch_threads=auto", "learner.num_cpus=2", "workers.torch_threads=auto",
                             "workers.num_cpus=0.5"])
    cores = len(os.sched_getaffinity(0))
    assert resolve_threads(cfg.learner.torch_threads, cfg.learner.num_cpus) == min(2, cores)
    assert resolve_threads(cfg.workers.torch_threads, cfg.workers.num_cpus) == 1  # a share of a CPU: one thread
    assert resolve_threads(3, 0.0) == 3  # a count is taken as given
    assert resolve_threads("auto", 1000) == cores  # never more than this process may run on
    for bad in ("0", "many", "true"):
        with pytest.raises(ConfigError, match="^learner.torch_threads: .*thread count >= 1 or 'auto'"):
            load_config(None, [f"learner.torch_threads={bad}"])


def test_precision_auto_is_bf16_only_where_the_device_multiplies_it_natively(monkeypatch):
    import torch

    import rl_system.actors.learner as learner_module
    from rl_system import device as dev
    from rl_system.actors.learner import Learner
    from rl_system.actors.worker import RolloutWorker

    cpu = torch.device("cpu")
    assert dev.resolve_precision("fp32", cpu) == "fp32" and dev.resolve_precision("bf16", cpu) == "bf16"
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert dev.resolve_precision("auto", cpu) == "fp32"
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert dev.resolve_precision("auto", cpu) == "bf16"
    # The learner resolves it once and says which it used; its weights stay float32 either way,
    # and its update runs in the uncached bf16 region (rl_system.algos.precision.update_autocast).
    regions = []
    real = learner_module.update_autocast
    monkeypatch.setattr(learner_module, "update_autocast",
                        lambda device_type, enabled: regions.append(enabled) or real(device_type, enabled))
    cfg = load_config("launch/configs/cartpole_ppo.yaml", ["learner.precision=auto", "workers.num_envs=8",
                                                           "tensorboard=false"]).model_dump()
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    metrics, weights = learner.update(worker.sample(learner.get_weights(), 0)[1])
    assert learner.precision == "bf16" and metrics.system["bf16"] == 1.0 and regions == [True]
    assert all(w.dtype == torch.float32 for w in weights.values() if w.is_floating_point())
    worker.env.close()
