"""Checkpoint format, store and writer actor: round trips, corruption, unsafe pickles, retention,
crashes mid-write, write failures, and the Ray actor's newest-wins queue."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import resource
import signal
import time
from pathlib import Path

import lz4.frame
import numpy as np
import pytest
import ray
import torch
import xxhash
from torch import nn

from rl_system.checkpoint import keys
from rl_system.checkpoint.format import (
    _PREFIX,
    FORMAT_VERSION,
    MAGIC,
    CheckpointError,
    capture_rng_state,
    checkpoint_name,
    load_checkpoint,
    read_manifest,
    restore_rng_state,
)
from rl_system.checkpoint.store import CheckpointStore
from rl_system.checkpoint.writer import Checkpointer, to_transport
from rl_system.config import RunConfig


# -- helpers ----------------------------------------------------------------------------------
def _model_and_opt(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))
    return model, torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5)


def _step(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    x = torch.randn(32, 8)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def _realistic_state() -> tuple[dict, nn.Module, torch.optim.Optimizer]:
    model, opt = _model_and_opt()
    for _ in range(3):
        _step(model, opt)
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    state = {
        "policy_version": 3,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "obs_norm": {"mean": torch.randn(8, dtype=torch.float64), "var": torch.rand(8, dtype=torch.float64),
                     "count": torch.tensor(1234.0, dtype=torch.float64)},
        "rng": capture_rng_state(),
        "counters": {"env_steps": 2**40 + 7, "rounds": 3, "skipped_updates": 0},
        "config": RunConfig().model_dump(),
        "metrics": {"return_mean": float("nan"), "best": float("-inf"), "history": [(1, 0.5), (2, 1.5)],
                    "flag": True, "none": None},
        "odd_tensors": {"half": torch.randn(5).half(), "bf16": torch.randn(5).bfloat16(),
                        "bool": torch.rand(7) > 0.5, "i64": torch.randint(-2**62, 2**62, (4,)),
                        "empty": torch.empty(0, 3), "scalar": torch.tensor(float("nan")),
                        "strided": base.t(), "view": base[1:]},
    }
    return state, model, opt


def _same(a, b, where: str = "state", strides: bool = True) -> None:
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and (a.stride() == b.stride() or not strides), where
        bits = [t.contiguous().flatten().view(torch.uint8) for t in (a, b)]
        assert torch.equal(*bits), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}", strides)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]", strides)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


def _save_one(store: CheckpointStore, version: int, mean_return: float | None = 1.0, size: int = 1000) -> str:
    g = torch.Generator().manual_seed(version)
    return store.save({"w": torch.randn(size, generator=g), "v": version},
                      {"policy_version": version, "mean_return": mean_return, "env_steps": version * 100})


def _versions(store: CheckpointStore) -> list[int]:
    return [i.policy_version for i in store.list()]


# -- format -----------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["lz4.frame", "none"])
def test_round_trip_is_bit_exact_and_training_resumes_identically(tmp_path, compression):
    state, model, opt = _realistic_state()
    store = CheckpointStore(str(tmp_path), compression=compression)
    path = store.save(state, {"policy_version": 3, "env_steps": 4096, "round": 3, "mean_return": float("nan"),
                              "note": "unit test"})
    assert path == str(tmp_path / checkpoint_name(3))
    loaded, manifest = store.load(path)
    _same(state, loaded)
    assert loaded["odd_tensors"]["view"].untyped_storage().data_ptr() == \
        loaded["odd_tensors"]["strided"].untyped_storage().data_ptr()  # shared storage survives
    assert manifest["policy_version"] == 3 and manifest["env_steps"] == 4096 and manifest["note"] == "unit test"
    assert manifest["mean_return"] is None  # NaN is not JSON
    assert manifest["format_version"] == FORMAT_VERSION and manifest["compression"] == compression
    assert manifest == read_manifest(path) == store.read_manifest(checkpoint_name(3))
    assert load_checkpoint(f"file://{path}")[1] == manifest

    # Resume: restore into fresh objects, then both copies take the same next step.
    model2, opt2 = _model_and_opt(seed=99)
    model2.load_state_dict(loaded["model"])
    opt2.load_state_dict(loaded["optimizer"])
    restore_rng_state(loaded["rng"])
    _step(model2, opt2)
    restore_rng_state(state["rng"])
    _step(model, opt)
    for p, q in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, q)


def test_rng_state_round_trips_through_a_checkpoint(tmp_path):
    rng = capture_rng_state()
    expected = (torch.rand(4), random.random(), np.random.rand(3))
    store = CheckpointStore(str(tmp_path))
    store.save({"rng": rng}, {"policy_version": 1})
    restore_rng_state(store.load(checkpoint_name(1))[0]["rng"])
    got = (torch.rand(4), random.random(), np.random.rand(3))
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1] and np.array_equal(got[2], expected[2])


def test_the_state_dict_keys_are_the_strings_on_disk():
    """Every checkpoint written so far holds these: a renamed constant must not rename its key."""
    assert (keys.LEARNER, keys.DRIVER, keys.WORKERS, keys.CONFIG, keys.SELFPLAY) == (
        "learner", "driver", "workers", "config", "selfplay")
    assert (keys.MODEL, keys.OPTIMIZER, keys.VERSION, keys.ENV_STEPS, keys.SKIPPED_UPDATES, keys.LR_SCALE,
            keys.RNG) == ("model", "optimizer", "version", "env_steps", "skipped_updates", "lr_scale", "rng")


def test_plain_torch_save_file_is_detected(tmp_path):
    state, _, _ = _realistic_state()
    plain = tmp_path / "plain.pt"
    torch.save(state, plain)
    store = CheckpointStore(str(tmp_path / "store"))
    loaded, manifest = store.load(str(plain))
    _same(state, loaded)
    assert manifest["format"] == "torch.save"
    assert read_manifest(str(plain))["format"] == "torch.save"
    _same(state, load_checkpoint(str(plain))[0])


def test_auto_compression_only_when_it_pays_and_unloadable_state_is_refused(tmp_path):
    store = CheckpointStore(str(tmp_path))  # compression="auto"
    _save_one(store, 1, size=1_000_000)  # random fp32: LZ4 would save nothing
    store.save({"w": torch.zeros(1_000_000), "steps": torch.arange(100_000)}, {"policy_version": 2})
    assert store.read_manifest(checkpoint_name(1))["compression"] == "none"
    m = store.read_manifest(checkpoint_name(2))
    assert m["compression"] == "lz4.frame" and m["compressed_bytes"] < m["raw_bytes"] / 10
    assert torch.equal(store.load(checkpoint_name(2))[0]["w"], torch.zeros(1_000_000))
    store = CheckpointStore(str(tmp_path), keep_last=5)
    with pytest.raises(ValueError, match="numpy"):
        store.save({"x": np.zeros(3)}, {"policy_version": 2})
    with pytest.raises(ValueError, match="policy_version"):
        store.save({"x": torch.zeros(3)}, {"mean_return": 1.0})
    assert _versions(store) == [1, 2] and not list(tmp_path.glob("*.tmp"))


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    store = CheckpointStore(str(root), compression="lz4.frame")
    path = Path(_save_one(store, 7, size=5000))
    mlen = _PREFIX.unpack_from(path.read_bytes())[2]
    return path.read_bytes(), mlen


def _write(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_flipped_byte_anywhere_is_detected(tmp_path, good_file):
    data, mlen = good_file
    n, h = len(data), _PREFIX.size
    positions = [0, 3, 4, 5, 6, 9, 10, 17, h, h + mlen // 2, h + mlen - 1, h + mlen, h + mlen + 5,
                 (h + mlen + n) // 2, n - 1]
    for pos in positions:
        bad = bytearray(data)
        bad[pos] ^= 0x5A
        path = _write(tmp_path, f"flip-{pos}.rlck", bytes(bad))
        with pytest.raises(CheckpointError, match=f"flip-{pos}.rlck") as exc:
            load_checkpoint(path)
        assert "\n" not in str(exc.value)


def test_truncated_files_are_detected_by_load_and_read_manifest(tmp_path, good_file):
    data, mlen = good_file
    h = _PREFIX.size
    for cut in [0, 1, 3, 4, 10, h - 1, h, h + mlen // 2, h + mlen, h + mlen + 1, len(data) // 2, len(data) - 1]:
        path = _write(tmp_path, f"cut-{cut}.rlck", data[:cut])
        with pytest.raises(CheckpointError, match=f"cut-{cut}.rlck"):
            load_checkpoint(path)
        with pytest.raises(CheckpointError, match=f"cut-{cut}.rlck"):
            read_manifest(path)
    path = _write(tmp_path, "long.rlck", data + b"\0")
    with pytest.raises(CheckpointError, match="trailing"):
        load_checkpoint(path)


def test_wrong_magic_version_and_unknown_files(tmp_path, good_file):
    data, _ = good_file
    cases = {"magic.rlck": (b"XLCK" + data[4:], "not a checkpoint|unknown file format"),
             "text.rlck": (b"hello world\n", "unknown file format"),
             "version.rlck": (data[:4] + (99).to_bytes(2, "little") + data[6:],
                              "unsupported checkpoint format version 99"),
             "zip.pt": (b"PK\x03\x04" + b"\0" * 100, "corrupt torch payload")}
    for name, (content, msg) in cases.items():
        path = _write(tmp_path, name, content)
        with pytest.raises(CheckpointError, match=msg) as exc:
            load_checkpoint(path)
        assert name in str(exc.value)


class _Evil:
    """Unpickling this runs a shell command."""

    def __init__(self, cmd: str):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def _wrap_rlck(raw: bytes) -> bytes:
    """A well-formed container (valid checksums) around arbitrary torch.save bytes."""
    payload = lz4.frame.compress(raw)
    manifest = json.dumps({"format_version": 1, "policy_version": 1, "raw_bytes": len(raw),
                           "compressed_bytes": len(payload), "compression": "lz4.frame",
                           "checksum": f"xxh3_64:{xxhash.xxh3_64_intdigest(payload):016x}"}).encode()
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(manifest), xxhash.xxh3_64_intdigest(manifest)) + manifest + payload


def test_malicious_pickle_does_not_execute(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "x": _Evil(f"touch {marker}")}, evil)
    # Control: the file really is live when loaded the unsafe way.
    torch.load(evil, weights_only=False)
    assert marker.exists()
    marker.unlink()

    store = CheckpointStore(str(tmp_path / "store"))
    wrapped = _write(tmp_path, "evil.rlck", _wrap_rlck(evil.read_bytes()))
    for path in (str(evil), wrapped):
        with pytest.raises(CheckpointError, match=r"evil\.(pt|rlck).*(unsafe|refused)") as exc:
            store.load(path)
        assert "\n" not in str(exc.value)
    planted = tmp_path / "store" / checkpoint_name(9)
    planted.write_bytes(Path(wrapped).read_bytes())
    with pytest.raises(CheckpointError, match="no valid checkpoint"):
        store.load_latest_valid()
    with pytest.raises(ValueError, match="posix.system"):  # and such a state is never written
        store.save({"x": _Evil(f"touch {marker}")}, {"policy_version": 10})
    assert not marker.exists()


# -- store ------------------------------------------------------------------------------------
def test_keep_last_k_plus_best_and_pointers(tmp_path):
    store = CheckpointStore(f"file://{tmp_path}", keep_last=3)
    returns = {1: 10.0, 2: 20.0, 3: 50.0, 4: float("nan"), 5: 30.0, 6: 5.0, 7: 40.0, 8: None}
    for v, r in returns.items():
        _save_one(store, v, r)
    assert _versions(store) == [3, 6, 7, 8]
    best = json.loads((tmp_path / "best.json").read_text())
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert best["name"] == checkpoint_name(3) and best["manifest"]["mean_return"] == 50.0
    assert latest["name"] == checkpoint_name(8) and latest["manifest"]["mean_return"] is None
    _save_one(store, 9, 60.0)
    assert _versions(store) == [7, 8, 9]
    assert json.loads((tmp_path / "best.json").read_text())["name"] == checkpoint_name(9)
    infos = store.list()
    assert [i.manifest["policy_version"] for i in infos] == [7, 8, 9] and all(i.error is None for i in infos)
    state, manifest, path = store.load_latest_valid()
    assert state["v"] == 9 and manifest["policy_version"] == 9 and path.endswith(checkpoint_name(9))
    assert not list(tmp_path.glob("*.tmp"))


def test_load_latest_valid_skips_corrupt_and_can_quarantine(tmp_path):
    store = CheckpointStore(str(tmp_path), keep_last=5)
    for v in (1, 2, 3):
        _save_one(store, v)
    p3 = tmp_path / checkpoint_name(3)
    data = bytearray(p3.read_bytes())
    data[-10] ^= 1
    p3.write_bytes(bytes(data))
    (tmp_path / checkpoint_name(4)).write_bytes(b"RLC")  # truncated to nothing useful
    state, manifest, path = store.load_latest_valid()
    assert state["v"] == 2 and path.endswith(checkpoint_name(2))
    assert [os.path.basename(p) for p, _ in store.skipped] == [checkpoint_name(4), checkpoint_name(3)]
    assert "checksum" in store.skipped[1][1]
    assert store.list()[-1].error is not None  # the truncated one has no readable manifest
    store.load_latest_valid(quarantine=True)
    assert _versions(store) == [1, 2] and (tmp_path / (checkpoint_name(3) + ".corrupt")).exists()


def test_load_best_ranks_manifests_skips_a_corrupt_best_and_ignores_a_stale_pointer(tmp_path):
    store = CheckpointStore(str(tmp_path), keep_last=10)
    for v, r in ((1, 0.5), (2, None), (3, 2.0), (4, float("nan")), (5, 2.0), (6, 1.0)):
        _save_one(store, v, r)
    state, manifest, path = store.load_best()
    assert state["v"] == 5 and manifest["mean_return"] == 2.0 and path.endswith(checkpoint_name(5))  # tie: newer
    (tmp_path / "best.json").write_text(json.dumps({"name": checkpoint_name(1)}))  # stale pointer: not trusted
    assert store.load_best()[0]["v"] == 5
    p5 = tmp_path / checkpoint_name(5)
    data = bytearray(p5.read_bytes())
    data[-10] ^= 1  # the payload rots; the manifest still reads, so it ranks first and fails to load
    p5.write_bytes(bytes(data))
    assert store.load_best()[0]["v"] == 3
    assert [os.path.basename(p) for p, _ in store.skipped] == [checkpoint_name(5)]
    assert p5.exists()  # picking the best never quarantines


def test_load_best_without_a_scored_checkpoint_is_one_clear_error(tmp_path):
    store = CheckpointStore(str(tmp_path))
    _save_one(store, 1, None)
    with pytest.raises(CheckpointError, match="no checkpoint with a mean return in"):
        store.load_best()


def test_unwritable_root_gives_clean_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(CheckpointError, match="a_file") as exc:
        CheckpointStore(str(blocker / "ckpts"))
    assert "\n" not in str(exc.value)
    with pytest.raises(CheckpointError, match="a_file"):
        CheckpointStore(str(blocker))


def test_disk_full_keeps_old_checkpoints(tmp_path):
    store = CheckpointStore(str(tmp_path), keep_last=2)
    _save_one(store, 1)
    _save_one(store, 2)
    latest_before = (tmp_path / "latest.json").read_bytes()
    # A file-size limit makes write() fail with EFBIG even as root; SIGXFSZ ignored -> an error.
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        with pytest.raises(CheckpointError, match=checkpoint_name(3)) as exc:
            _save_one(store, 3, size=1_000_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert "too large" in str(exc.value).lower() and "\n" not in str(exc.value)
    assert _versions(store) == [1, 2] and not list(tmp_path.glob("*.tmp"))
    assert (tmp_path / "latest.json").read_bytes() == latest_before
    assert store.load_latest_valid()[0]["v"] == 2
    _save_one(store, 3)  # and it works again once there is space
    assert _versions(store) == [2, 3]


_CHILD = """
import torch
from rl_system.checkpoint.store import CheckpointStore
store = CheckpointStore({root!r}, keep_last=2)
v = {start}
state = {{"w": torch.randn(2_000_000), "v": v}}
while True:
    v += 1
    state["v"] = v
    store.save(state, {{"policy_version": v, "mean_return": float(v % 3)}})
"""


def test_sigkill_mid_write_leaves_a_loadable_store(tmp_path):
    """Writers are SIGKILLed at random moments (and, in one store per wave, the moment a checkpoint
    temp file appears); every store must re-open cleanly, drop the temp files and load its newest checkpoint.
    Children fork from a forkserver that has imported torch once, so a kill costs no start-up."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rl_system.checkpoint.store"])
    dirs = [tmp_path / f"s{i}" for i in range(3)]
    for d in dirs:
        _save_one(CheckpointStore(str(d)), 1)
    rnd = random.Random(1234)
    seen_tmp = 0
    for wave in range(3):  # every wave re-opens each crashed store and writes on
        procs = []
        for d in dirs:
            start = max(_versions(CheckpointStore(str(d))))
            procs.append(ctx.Process(target=exec, args=(_CHILD.format(root=str(d), start=start),), daemon=True))
            procs[-1].start()
        for i, (d, p) in enumerate(zip(dirs, procs)):
            if i == wave:  # deterministic: kill the moment a checkpoint temp file exists
                deadline = time.monotonic() + 20
                while not list(d.glob("ckpt-*.tmp")) and time.monotonic() < deadline:
                    time.sleep(0.0005)
            else:
                time.sleep(rnd.uniform(0.0, 0.3))
            p.kill()
        for d, p in zip(dirs, procs):
            p.join(10)
            assert p.exitcode == -signal.SIGKILL
            stale = list(d.glob("*.tmp"))
            seen_tmp += len(stale)
            store = CheckpointStore(str(d))
            assert sorted(store.removed_tmp) == sorted(str(s) for s in stale)
            assert not list(d.glob("*.tmp"))
            infos = store.list()
            assert infos and all(i.error is None for i in infos)
            for info in infos:
                assert store.load(info.name)[0]["v"] == info.policy_version
            state, manifest, _ = store.load_latest_valid()
            assert store.skipped == [] and state["v"] == manifest["policy_version"] == infos[-1].policy_version
            for pointer in ("latest.json", "best.json"):
                if (d / pointer).exists():
                    json.loads((d / pointer).read_text())
    assert seen_tmp >= 3  # the deterministic kills really hit a write in progress
    assert sum(max(_versions(CheckpointStore(str(d)))) for d in dirs) > len(dirs)  # writers made progress


# -- the Ray actor ----------------------------------------------------------------------------
def test_checkpointer_actor_newest_wins_flush_and_errors(ray_session, tmp_path):
    ckpt = ray.remote(Checkpointer).options(max_concurrency=4, num_cpus=0).remote(str(tmp_path), keep_last=3)
    assert ray.get(ckpt.ping.remote())
    state = {"w": torch.randn(1_000_000), "tag": "flood"}
    ref = ray.put(state)

    t0 = time.perf_counter()
    ray.get(ckpt.save.remote([ref], {"policy_version": 1, "mean_return": 1.0}))
    assert time.perf_counter() - t0 < 1.0  # a round trip, not a write
    n = 15
    calls = [ckpt.save.remote([ref], {"policy_version": v, "mean_return": float(v)}) for v in range(2, n + 1)]
    ray.get(calls)
    busy = ray.get(ckpt.stats.remote())  # answered while the writer works (max_concurrency >= 2)
    assert busy["saved"] + busy["skipped"] + busy["pending"] + busy["in_progress"] <= n
    stats = ray.get(ckpt.flush.remote(60))
    assert stats["pending"] == 0 and not stats["in_progress"] and stats["failed"] == 0
    assert stats["saved"] + stats["skipped"] == n and stats["skipped"] >= 1
    assert stats["last_version"] == n and stats["last_path"].endswith(checkpoint_name(n))
    assert stats["bytes_written"] > 0 and stats["last_save_s"] > 0
    store = CheckpointStore(str(tmp_path))
    assert _versions(store)[-1] == n and len(_versions(store)) <= 3
    loaded, manifest = store.load(checkpoint_name(n))
    assert torch.equal(loaded["w"], state["w"]) and manifest["mean_return"] == float(n)

    skipped = stats["skipped"]
    # A write that fails (the temp name is blocked by a directory: fails even as root).
    (tmp_path / (checkpoint_name(100) + ".tmp")).mkdir()
    ray.get(ckpt.save.remote([ref], {"policy_version": 100}))
    stats = ray.get(ckpt.flush.remote(60))
    assert stats["failed"] == 1 and stats["last_error"].startswith("v100: CheckpointError")
    assert checkpoint_name(100) in stats["last_error"] and "\n" not in stats["last_error"]
    assert _versions(store)[-1] == n and store.load_latest_valid()[0]["tag"] == "flood"
    ray.get(ckpt.save.remote([ref], {"policy_version": 99}))  # older than an accepted one: skipped
    ray.get(ckpt.save.remote([ref], {"policy_version": 101}))  # the actor goes on
    stats = ray.get(ckpt.flush.remote(60))
    assert stats["last_version"] == 101 and stats["failed"] == 1 and stats["skipped"] == skipped + 1

    # The faster hand-over: tensors travel as NumPy arrays and are unpacked by the writer.
    full, _, _ = _realistic_state()
    ray.get(ckpt.save.remote([ray.put(to_transport(full))], {"policy_version": 102}))
    stats = ray.get(ckpt.flush.remote(60))
    assert stats["last_version"] == 102 and stats["failed"] == 1
    _same(full, store.load(checkpoint_name(102))[0], strides=False)
    ray.kill(ckpt)
