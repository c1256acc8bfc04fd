"""Rollout archive: real worker rollouts -> Arrow table -> LZ4 IPC file -> readers, report, errors."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
import pytest
import torch

from rl_system.rollout import codec
from rl_system.rollout.archive import (
    ID_COLUMNS,
    ArchiveError,
    RolloutArchiver,
    archive_compression,
    column_to_numpy,
    read_archive,
    rollouts_to_table,
    write_archive,
)
from rl_system.rollout.archive_inspect import cmd_rollouts_inspect, column_stats, inspect_archive

T, N = 5, 8
NON_STEP = ("last_value",)  # env-major: [N], not one row per (env, step)


@pytest.fixture(scope="module")
def payloads() -> list[bytes]:
    """Two real CartPole rollouts (workers 1 and 0, in that order), the 2nd round of each."""
    from rl_system.actors.learner import Learner
    from rl_system.actors.worker import RolloutWorker
    from rl_system.config import load_config

    cfg = load_config(None, [f"workers.num_envs={N}", f"workers.rollout_len={T}", "tensorboard=false"])
    workers = [RolloutWorker(1, cfg), RolloutWorker(0, cfg)]
    weights = Learner(cfg, *workers[0].specs()).get_weights()
    out = []
    for w in workers:
        w.sample(weights, 0)
        meta, payload = w.sample(weights, 3)
        assert meta.version == 3
        out.append(payload)
    return out


@pytest.fixture(scope="module")
def rollouts(payloads):
    return [codec.decode(p) for p in payloads]


@pytest.fixture(scope="module")
def table(rollouts) -> pa.Table:
    return rollouts_to_table(rollouts, 7)


def _with_extra_columns(rollouts):
    """The real rollouts plus a multi-dim float tensor (lidar) and a bool tensor (action mask)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for cols, meta in rollouts:
        cols = dict(cols)
        cols["obs.lidar"] = torch.randn(T, N, 1, 36, 4, generator=g)
        cols["obs.action_mask"] = torch.rand(T, N, 2, generator=g) > 0.5
        cols["obs.image"] = torch.randint(0, 255, (T, N, 3, 2, 2), generator=g, dtype=torch.uint8)
        out.append((cols, meta))
    return out


def _by_worker(rollouts):
    return sorted(rollouts, key=lambda r: r[1]["worker_id"])


# ----------------------------------------------------------------------------------------- table

def test_layout_and_row_order(table, rollouts):
    assert table.num_rows == 2 * N * T
    assert table.column_names[:5] == list(ID_COLUMNS)
    step_cols = [k for k in rollouts[0][0] if k not in NON_STEP]
    assert table.column_names[5:] == step_cols
    for name in NON_STEP:
        assert name not in table.column_names
    # rows: worker, env, step
    wid, env, step = (column_to_numpy(table, c) for c in ("worker_id", "env", "step"))
    np.testing.assert_array_equal(wid, np.repeat([0, 1], N * T))
    np.testing.assert_array_equal(env, np.tile(np.repeat(np.arange(N), T), 2))
    np.testing.assert_array_equal(step, np.tile(np.arange(T), 2 * N))
    assert set(column_to_numpy(table, "round")) == {7}
    assert set(column_to_numpy(table, "policy_version")) == {3}
    assert table.schema.field("round").type == pa.int64()
    assert table.schema.field("policy_version").type == pa.int64()
    md = table.schema.metadata
    assert md[b"rl_system.round"] == b"7"


def test_round_trip_values(table, rollouts):
    for w, (cols, meta) in enumerate(_by_worker(rollouts)):
        assert meta["worker_id"] == w
        for name, t in cols.items():
            if name in NON_STEP:
                continue
            got = column_to_numpy(table, name)
            for e, s in [(0, 0), (N - 1, T - 1), (3, 2), (5, 0)]:
                row = w * N * T + e * T + s
                np.testing.assert_array_equal(got[row], t[s, e].numpy(), err_msg=f"{name} w{w} e{e} s{s}")
                assert table.column("env")[row].as_py() == e and table.column("step")[row].as_py() == s
                assert table.column("worker_id")[row].as_py() == w
            # the whole column, all at once
            block = got[w * N * T:(w + 1) * N * T].reshape(N, T, *t.shape[2:])
            np.testing.assert_array_equal(block, t.transpose(0, 1).numpy())


def test_scalar_dtypes(table):
    sch = table.schema
    assert sch.field("reward").type == pa.float32()
    assert sch.field("logp").type == pa.float32()
    assert sch.field("action").type == pa.int64()
    assert sch.field("terminated").type == pa.bool_()
    assert sch.field("truncated").type == pa.bool_()


def test_tensor_columns(rollouts):
    extra = _with_extra_columns(rollouts)
    tb = rollouts_to_table(extra, 0)
    rows = 2 * N * T
    for name, shape, vt in [("obs.obs", [4], pa.float32()), ("obs.lidar", [1, 36, 4], pa.float32()),
                            ("obs.action_mask", [2], pa.bool_()), ("obs.image", [3, 2, 2], pa.uint8())]:
        ty = tb.schema.field(name).type
        assert isinstance(ty, pa.FixedShapeTensorType), name
        assert ty.extension_name == "arrow.fixed_shape_tensor"
        assert list(ty.shape) == shape and ty.value_type == vt, name
        arr = column_to_numpy(tb, name)
        assert arr.shape == (rows, *shape) and arr.dtype == vt.to_pandas_dtype()
        src = np.concatenate([c[name].transpose(0, 1).reshape(N * T, *shape).numpy()
                              for c, _ in _by_worker(extra)])
        np.testing.assert_array_equal(arr, src)
        if vt != pa.bool_():  # pyarrow's own converter (it refuses bool tensors)
            np.testing.assert_array_equal(tb.column(name).combine_chunks().to_numpy_ndarray(), src)


def test_bfloat16_and_errors(rollouts):
    cols, meta = rollouts[0]
    bf = dict(cols, value=cols["value"].to(torch.bfloat16))
    tb = rollouts_to_table([(bf, meta)], 0)
    assert tb.schema.field("value").type == pa.float32()
    with pytest.raises(ValueError, match="no rollouts"):
        rollouts_to_table([], 0)
    fewer = {k: v for k, v in rollouts[1][0].items() if k != "logp"}
    with pytest.raises(ValueError, match="does not match"):
        rollouts_to_table([rollouts[0], (fewer, rollouts[1][1])], 0)
    other_dtype = dict(rollouts[1][0], reward=rollouts[1][0]["reward"].double())
    with pytest.raises(ValueError, match="reward"):
        rollouts_to_table([rollouts[0], (other_dtype, rollouts[1][1])], 0)


# ----------------------------------------------------------------------------------------- files

def test_write_lz4_readers_and_atomic(table, tmp_path):
    path = tmp_path / "sub" / "dir" / "r.arrow"
    nbytes = write_archive(table, path)
    assert nbytes == path.stat().st_size
    assert sorted(os.listdir(path.parent)) == ["r.arrow"]  # no .tmp left behind
    assert archive_compression(path) == "lz4_frame"
    assert read_archive(path).equals(table, check_metadata=True)
    assert feather.read_table(path).equals(table)
    with pa.memory_map(str(path)) as f:
        assert ipc.open_file(f).read_all().equals(table)

    pd = pytest.importorskip("pandas")
    df = pd.read_feather(path)
    assert len(df) == table.num_rows and list(df.columns) == table.column_names
    np.testing.assert_array_equal(df["reward"].to_numpy(), column_to_numpy(table, "reward"))

    # the same table without buffer compression is bigger, and the detector tells them apart
    for comp, expect in ((None, "none"), ("zstd", "zstd")):
        other = tmp_path / f"{expect}.arrow"
        with ipc.new_file(str(other), table.schema, options=ipc.IpcWriteOptions(compression=comp)) as w:
            w.write_table(table)
        assert archive_compression(other) == expect
        if comp is None:
            assert other.stat().st_size > nbytes

    # overwrite replaces atomically; a failed move leaves no .tmp
    assert write_archive(table.slice(0, 10), path) < nbytes
    assert read_archive(path).num_rows == 10
    blocker = tmp_path / "blocked.arrow"
    blocker.mkdir()
    (blocker / "x").write_text("keep")
    with pytest.raises(OSError):
        write_archive(table, blocker)
    assert not (tmp_path / "blocked.arrow.tmp").exists()


def test_write_through_uri_and_filesystem(table, tmp_path):
    write_archive(table, f"file://{tmp_path}/u/a.arrow")
    assert read_archive(f"file://{tmp_path}/u/a.arrow").equals(table)
    sub = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    write_archive(table, "v/b.arrow", filesystem=sub)
    assert read_archive(tmp_path / "v" / "b.arrow").equals(table)
    assert read_archive("v/b.arrow", filesystem=sub).equals(table)


def test_bad_files(table, tmp_path):
    good = tmp_path / "good.arrow"
    write_archive(table, good)
    data = good.read_bytes()
    cases = {
        "missing.arrow": ("no such file", None),
        "truncated.arrow": ("truncated or corrupt", data[: len(data) // 2]),
        "cut_footer.arrow": ("truncated or corrupt", data[:-20]),
        "text.arrow": ("not an Arrow IPC", b"episode,return\n1,2\n" * 50),
        "empty.arrow": ("not an Arrow IPC", b""),
        "rollout.bin": ("not an Arrow IPC", codec.encode({"x": torch.zeros(3)}, {})),
    }
    for name, (msg, content) in cases.items():
        p = tmp_path / name
        if content is not None:
            p.write_bytes(content)
        for fn in (read_archive, inspect_archive):
            with pytest.raises(ArchiveError, match=msg) as ei:
                fn(p)
            text = str(ei.value)
            assert str(p) in text and "\n" not in text, text
            assert isinstance(ei.value, ValueError)
    with pytest.raises(ArchiveError, match="directory"):
        read_archive(tmp_path)


# ---------------------------------------------------------------------------------------- report

def test_inspect_report(rollouts, tmp_path):
    tb = rollouts_to_table(_with_extra_columns(rollouts), 2)
    path = tmp_path / "rollouts-r000002.arrow"
    nbytes = write_archive(tb, path)
    report = inspect_archive(path)
    for name in tb.column_names:
        assert name in report, name
    assert f"{tb.num_rows:,}" in report
    assert f"{nbytes:,} bytes" in report
    assert "lz4_frame" in report and "compression" in report
    assert "tensor<float>[1,36,4]" in report
    assert "{0, 1}" in report  # distinct worker ids
    assert "\x1b" not in report  # plain text: no ANSI colour codes

    stats = {s["name"]: s for s in column_stats(tb)}
    all_obs = np.concatenate([c["obs.obs"].reshape(-1).numpy() for c, _ in rollouts])
    assert stats["obs.obs"]["min"] == pytest.approx(all_obs.min())
    assert stats["obs.obs"]["max"] == pytest.approx(all_obs.max())
    assert stats["obs.obs"]["mean"] == pytest.approx(all_obs.mean(), abs=1e-6)
    assert stats["obs.obs"]["std"] == pytest.approx(all_obs.std(), rel=1e-5)
    assert stats["obs.obs"]["elements"] == all_obs.size
    term = np.concatenate([c["terminated"].reshape(-1).numpy() for c, _ in rollouts])
    assert stats["terminated"]["true_frac"] == pytest.approx(term.mean())
    mask = column_to_numpy(tb, "obs.action_mask")
    assert stats["obs.action_mask"]["true_frac"] == pytest.approx(mask.mean())
    assert stats["worker_id"]["distinct"] == 2 and stats["policy_version"]["values"] == [3]
    assert stats["round"]["values"] == [2] and stats["env"]["distinct"] == N
    assert stats["reward"]["nan"] == 0


def test_cmd_rollouts_inspect(table, tmp_path, capsys):
    path = tmp_path / "r.arrow"
    write_archive(table, path)
    assert cmd_rollouts_inspect(str(path)) == 0
    out, err = capsys.readouterr()
    assert "obs.obs" in out and err == ""
    assert cmd_rollouts_inspect(str(tmp_path / "nope.arrow")) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("rl-system: ") and err.count("\n") == 1 and "nope.arrow" in err


# -------------------------------------------------------------------------------------- archiver

def test_archiver_in_process(payloads, table, tmp_path):
    arch = RolloutArchiver(tmp_path / "arch")
    res = arch.write(7, *payloads)
    assert set(res) == {"path", "rows", "bytes", "seconds", "pid"}
    assert res["path"] == str(tmp_path / "arch" / "rollouts-r000007.arrow")
    assert res["rows"] == 2 * N * T and res["bytes"] == os.path.getsize(res["path"]) and res["seconds"] > 0
    assert read_archive(res["path"]).equals(table, check_metadata=True)
    assert os.listdir(tmp_path / "arch") == ["rollouts-r000007.arrow"]


def test_archiver_actor_on_ray(ray_session, payloads, table, tmp_path):
    import ray

    actor = ray.remote(RolloutArchiver).options(num_cpus=0).remote(f"file://{tmp_path}/runs/x")
    try:
        refs = [ray.put(p) for p in payloads]
        fut = actor.write.remote(7, *refs)  # refs as top-level args: the actor gets the bytes
        res = ray.get(fut, timeout=120)
        assert res["path"] == f"file://{tmp_path}/runs/x/rollouts-r000007.arrow"
        assert res["rows"] == 2 * N * T
        got = read_archive(res["path"])
        assert got.equals(table, check_metadata=True)
        assert res["bytes"] == os.path.getsize(tmp_path / "runs" / "x" / "rollouts-r000007.arrow")
        # a bad payload surfaces as the codec's error through the returned ref
        with pytest.raises(ray.exceptions.RayTaskError, match="CodecError|bad magic"):
            ray.get(actor.write.remote(8, b"not a rollout"), timeout=120)
        assert not (tmp_path / "runs" / "x" / "rollouts-r000008.arrow").exists()
    finally:
        ray.kill(actor)


def test_reading_and_inspecting_an_archive_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys; import rl_system.rollout.archive_inspect, rl_system.rollout.archive_read; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
