"""Experiment trackers (rl_system/observe/trackers.py): one real CartPole run with Weights & Biases in
offline mode and MLflow on a local file store; both hold the same scalars (tag, env step, value)
as the run's TensorBoard folder. A tracker that is not installed, or cannot start, is one
config-error line and exit 2 before anything runs."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from rl_system.cli.main import main
from rl_system.observe.metrics import read_scalars

wandb_pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
pytest.importorskip("mlflow")

BLOCK = 32768  # the .wandb file is a LevelDB-style log: 32 KiB blocks of CRC'd, typed chunks


def read_wandb_offline(path: Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` from an offline W&B run file (``run-*.wandb``)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    records, chunk, i = [], b"", 7  # header: ':W&B', magic 0xBEE1, version
    while i + 7 <= len(data):
        left = BLOCK - i % BLOCK
        if left < 7:  # a block's tail too short for a chunk header is padding
            i += left
            continue
        length, kind = struct.unpack_from("<HB", data, i + 4)
        if length == 0 and kind == 0:
            break
        chunk += data[i + 7:i + 7 + length]
        i += 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            records.append(chunk)
            chunk = b""
    out: dict[str, list[tuple[int, float]]] = {}
    for raw in records:
        record = wandb_pb.Record.FromString(raw)
        if record.WhichOneof("record_type") != "history":
            continue
        row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = row.pop("_step")
        for tag, value in row.items():
            if not tag.startswith("_"):
                out.setdefault(tag, []).append((step, value))
    return out


def read_mlflow(store: Path) -> dict[str, list[tuple[int, float]]]:
    import os

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store.resolve().as_uri())
    experiment = client.get_experiment_by_name("rl-system")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["ppo.lr"] == "0.005"
    return {tag: [(m.step, m.value) for m in sorted(client.get_metric_history(run.info.run_id, tag),
                                                     key=lambda m: (m.step, m.timestamp))]
            for tag in run.data.metrics}


def _same(tracked: dict, tb: dict, name: str) -> None:
    assert set(tracked) == set(tb), f"{name}: {sorted(set(tracked) ^ set(tb))}"
    for tag, points in tb.items():
        assert [s for s, _ in tracked[tag]] == [s for s, _ in points], f"{name} {tag}: steps differ"
        for (_, got), (_, want) in zip(tracked[tag], points):  # TensorBoard keeps float32
            assert got == pytest.approx(want, rel=1e-6, abs=1e-6), f"{name} {tag}"


def test_wandb_offline_and_mlflow_files_hold_the_tensorboard_scalars(ray_session, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "launch/configs/cartpole_ppo.yaml", "--run-dir", str(run), "--quiet",
                 "--set", "max_env_steps=8192", "--set", "workers.rollout_len=16", "--set", "target_return=null",
                 "--set", "workers.num_workers=1",  # the scalars are the run's, whatever its workers: one actor less
                 "--set", "trackers.wandb.enabled=true", "--set", "trackers.wandb.mode=offline",
                 "--set", "trackers.mlflow.enabled=true"]) == 0
    tb = read_scalars(run / "tb")
    assert {"rollout/return_mean", "train/pg_loss", "system/steps_per_s"} <= set(tb), sorted(tb)
    assert len(tb["train/pg_loss"]) == 8  # one per round: 8,192 env steps of 1,024 (64 envs × 16 steps)
    (offline,) = run.glob("wandb/offline-run-*/run-*.wandb")
    _same(read_wandb_offline(offline), tb, "wandb")
    _same(read_mlflow(run / "mlruns"), tb, "mlflow")
    assert "wandb:" not in capsys.readouterr().out  # W&B's banner stays out of the run's console


@pytest.mark.parametrize("tracker,module", [("wandb", "wandb"), ("mlflow", "mlflow")])
def test_a_tracker_that_is_not_installed_is_one_line_exit_2(monkeypatch, tmp_path, capsys, tracker, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec raises, import fails
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    code = main(["train", "launch/configs/cartpole_ppo.yaml", "--run-dir", str(tmp_path / "r"),
                 "--set", f"trackers.{tracker}.enabled=true"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.splitlines() == [err]
    assert f"trackers.{tracker}.enabled: the {module} package is not installed" in err and "pip install" in err
    assert not (tmp_path / "r").exists()  # nothing started


def test_a_tracker_that_cannot_start_is_one_line_exit_2(ray_session, tmp_path, capsys):
    code = main(["train", "launch/configs/cartpole_ppo.yaml", "--run-dir", str(tmp_path / "r"),
                 "--set", "trackers.mlflow.enabled=true", "--set", "trackers.mlflow.tracking_uri=nosuch://x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.splitlines() == [err] and "trackers.mlflow: cannot start" in err
