"""Benchmark checkpointing: learner-side blocked time of an async save vs a synchronous torch.save,
file sizes, and how long the Checkpointer actor takes to finish.

    python -m bench.bench_checkpoint [--sizes 1,10,100] [--reps 3] [--dir /path/on/the/disk]

"N MB model" = N MB of fp32 parameters (4 square nn.Linear layers, default init). The checkpoint
state is what a learner saves: weights + Adam state after 3 steps (exp_avg, exp_avg_sq: 2x the
weights) + RNG states + the resolved config + metrics, i.e. ~3N MB.

Columns (median over reps; "max" where the spread matters):
  state MB        torch.save size of the state (plain file)
  rlck MB         our file size; "codec" what compression="auto" chose
  lz4 x           plain size / LZ4-frame size if LZ4 were forced (1.000 = no gain)
  sync save       torch.save(state, file) on the same disk, no fsync (the blocking alternative)
  put+call        (a) learner blocked: ray.put(state) + checkpointer.save.remote([ref]) returning
  put+call np     the same with ray.put(to_transport(state)) (tensors as NumPy arrays)
  bg handoff      learner blocked when a background thread does put+call (the proposed design);
                  the learner must not mutate weights/optimizer until "bg done"
  bg done         when that background put+call has finished
  actor write     (d) Checkpointer last_save_s: ray.get + serialise + LZ4 + write + fsync + prune
  load            store.load (read + verify + decompress + torch.load weights_only)
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import tempfile
import threading
import time

import lz4.frame
import ray
import torch
from torch import nn

from rl_system.checkpoint.format import capture_rng_state, serialize_state
from rl_system.checkpoint.store import CheckpointStore
from rl_system.checkpoint.writer import Checkpointer, to_transport
from rl_system.config import RunConfig


def learner_state(params_mb: float, seed: int = 0) -> tuple[dict, int]:
    """Weights + Adam moments after a few steps (realistic bits, not zeros)."""
    torch.manual_seed(seed)
    width = int((params_mb * 2**20 / 4 / 4) ** 0.5)  # 4 layers of width x width (+ bias)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.Tanh()]
    model = nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5)
    for _ in range(3):
        loss = model(torch.randn(64, width)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    n_params = sum(p.numel() for p in model.parameters())
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": capture_rng_state(),
             "config": RunConfig().model_dump(), "counters": {"env_steps": 123456, "version": 3},
             "metrics": {"return_mean": 187.5}}
    return state, n_params


def _flush(ckpt) -> dict:
    st = ray.get(ckpt.flush.remote(600))
    if st["failed"]:
        raise SystemExit(f"checkpointer failed: {st['last_error']}")
    return st


def _ms(x: float) -> str:
    return f"{x * 1e3:8.1f}"


def run_size(params_mb: float, reps: int, root: pathlib.Path, ckpt) -> dict:
    state, n_params = learner_state(params_mb)
    plain = root / "plain.pt"
    row: dict = {"params_mb": n_params * 4 / 1e6}
    sync, put_call, put_np, handoff, bg_done, write_s, load_s, load_plain = ([] for _ in range(8))
    version = int(params_mb * 1000)
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.save(state, plain)
        sync.append(time.perf_counter() - t0)

        for out, pack in ((put_call, lambda s: s), (put_np, to_transport)):
            version += 1
            t0 = time.perf_counter()
            ref = ray.put(pack(state))
            call = ckpt.save.remote([ref], {"policy_version": version, "mean_return": 1.0})
            out.append(time.perf_counter() - t0)
            del ref
            ray.get(call)  # threaded actors may run a flush before an earlier save: settle it first
            st = _flush(ckpt)
            write_s.append(st["last_save_s"])

        # Proposed design: the learner hands the put+call to a thread and goes back to work
        # (sampling happens meanwhile); the next update joins the thread before mutating.
        version += 1
        done = {}

        def snapshot(v=version):
            done["call"] = ckpt.save.remote([ray.put(to_transport(state))], {"policy_version": v, "mean_return": 1.0})
            done["t"] = time.perf_counter()

        t0 = time.perf_counter()
        th = threading.Thread(target=snapshot, daemon=True)
        th.start()
        handoff.append(time.perf_counter() - t0)
        th.join()
        bg_done.append(done["t"] - t0)
        ray.get(done["call"])
        st = _flush(ckpt)
        write_s.append(st["last_save_s"])

        store = CheckpointStore(str(root / "ckpts"))
        t0 = time.perf_counter()
        store.load(pathlib.Path(st["last_path"]).name)
        load_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        torch.load(plain, weights_only=True)
        load_plain.append(time.perf_counter() - t0)
    info = CheckpointStore(str(root / "ckpts")).read_manifest(pathlib.Path(st["last_path"]).name)
    raw = serialize_state(state)
    lz4_x = len(raw) / len(lz4.frame.compress(raw, block_size=lz4.frame.BLOCKSIZE_MAX4MB))
    med = statistics.median
    row.update(state_mb=plain.stat().st_size / 1e6, file_mb=pathlib.Path(st["last_path"]).stat().st_size / 1e6,
               codec=info["compression"], lz4_x=lz4_x,
               sync=med(sync), put_call=med(put_call), put_call_max=max(put_call), put_np=med(put_np),
               put_np_max=max(put_np), handoff=med(handoff), handoff_max=max(handoff), bg_done=med(bg_done),
               write=med(write_s), load=med(load_s), load_plain=med(load_plain))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,10,100", help="fp32 parameter MB per model, comma separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None, help="directory on the disk to test (default: a temp dir)")
    args = ap.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ckpt = ray.remote(Checkpointer).options(max_concurrency=4, num_cpus=0).remote(str(root / "ckpts"), keep_last=2)
        ray.get(ckpt.ping.remote())
        rows = [run_size(float(s), args.reps, root, ckpt) for s in args.sizes.split(",")]
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    print(f"torch {torch.__version__}, ray {ray.__version__}, {args.reps} reps, times in ms (median; max)")
    head = (f"{'params MB':>9} {'state MB':>8} {'rlck MB':>8} {'codec':>9} {'lz4 x':>5} | {'sync save':>9} | "
            f"{'put+call':>17} | {'put+call np':>17} | {'bg handoff':>14} {'bg done':>8} | "
            f"{'actor write':>11} | {'load rlck':>9} {'load .pt':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['params_mb']:9.1f} {r['state_mb']:8.1f} {r['file_mb']:8.1f} {r['codec']:>9} {r['lz4_x']:5.3f} | "
              f"{_ms(r['sync']):>9} | {_ms(r['put_call'])} ;{_ms(r['put_call_max'])} | "
              f"{_ms(r['put_np'])} ;{_ms(r['put_np_max'])} | {r['handoff'] * 1e3:6.2f} ;{r['handoff_max'] * 1e3:6.2f} "
              f"{_ms(r['bg_done'])} | {_ms(r['write']):>11} | {_ms(r['load']):>9} {_ms(r['load_plain'])}")


if __name__ == "__main__":
    main()
