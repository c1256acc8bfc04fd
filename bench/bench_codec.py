"""The wire cost of rollouts: rl_system.rollout.codec on real rollouts, per column and overall.

    python -m bench.bench_codec [--env CartPole|Navigation|AirCombat|AliceBob|all]
                                [--train-rounds K] [--repeat N] [--save-rollouts DIR]
                                [--set KEY=VALUE ...] [--rollouts FILE ...] [--synthetic]
                                [--filter-speeds]

For each env a real :class:`rl_system.actors.worker.RolloutWorker` (the env's config and shape, see
``ENVS``) samples one rollout with the untrained policy (version 0) and one after ``K`` in-process
learner rounds (trained-policy rollouts compress differently: longer episodes, more
confident log-probs, smoother trajectories). Every column the worker ships is measured.
Per rollout it prints:

1. per column: raw bytes per env step and the ratio (raw / wire bytes) of lz4 at level 0 (fast)
   and LZ4 HC 1, 4, 9, plain (``filters="none"``) and with the codec's default ``filters="auto"``,
   and what "auto" picked at level 0;
2. per column: compress and decompress MB/s (of raw bytes) for L0, L0 auto and HC9;
3. the preconditioner study at level 0: each filter forced wherever it applies (``bitpack`` of
   bool columns is measured here only, with ``numpy.packbits``; it is not in the codec);
4. overall: wire bytes per env step, ratio, MB/s, and the link speed below which the config beats
   sending raw bytes (``compression="none"``): ``(raw - wire) / (extra encode + decode time)``;
   zstd-1 (pyarrow's, not in the codec) as a reference for what an entropy coder would add.

MB/s are raw bytes over the median CPU time (``time.thread_time``) of ``--repeat`` runs after one
warm-up, one thread: on a shared machine the wall clock also counts other processes' turns on
the core. The load average is printed with every rollout (``bench/results/codec/`` comes from
a shared 2-core VM).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

import lz4.block
import numpy as np
import torch

from bench.harness.results import command_line
from bench.harness.stamp import ROOT
from rl_system.rollout import codec
from rl_system.rollout.codec import decode, encode

# env -> (config file or None, overrides, default train rounds). The shapes (N envs x T steps) are
# pinned to those of docs/wire_cost.md (the configs' shapes when it was measured); --set changes them.
ENVS = {
    "CartPole": ("launch/configs/cartpole_ppo_throughput.yaml",
                 ["workers.num_envs=512", "workers.rollout_len=16"], 20),
    "Navigation": ("launch/configs/navigation_ppo.yaml",
                   ["workers.num_envs=256", "workers.rollout_len=32"], 20),
    "AirCombat": (None, ["workers.num_envs=1024", "workers.rollout_len=32"], 10),
    "AliceBob": ("launch/configs/alice_bob_hmasd.yaml",
                 ["workers.num_envs=64", "workers.rollout_len=100"], 3),
    # Images: MinAtar's bool [10, 10, 4] planes travel as one byte per cell (needs minatar).
    "gym:rl_system.envs.minatar_gym:MinAtar/Breakout-v1": ("launch/configs/minatar_breakout_ppo.yaml",
                                                 ["workers.num_envs=32", "workers.rollout_len=128"], 3),
}
LEVELS = [("L0", 0), ("HC1", 1), ("HC4", 4), ("HC9", 9)]
STUDY = [("none", "none"), ("shuffle", ("shuffle",)), ("xor", ("xor",)),
         ("xor+shuf", ("xor", "shuffle")), ("narrow", ("narrow",)), ("auto", "auto")]
OVERALL = ([("none", dict(compression="none"))]
           + [(f"{lab}{' auto' if f == 'auto' else ''}", dict(level=lv, filters=f))
              for lab, lv in LEVELS + [("accel8", -8)] for f in ("none", "auto")])


def synthetic_rollout(T: int = 64, N: int = 1024, seed: int = 0) -> dict[str, torch.Tensor]:
    """CartPole-like rollout, time-major [T, N, ...] (for a quick look without an env)."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.tensor([0.02, 0.05, 0.005, 0.05])
    obs = torch.cumsum(torch.randn(T, N, 4, generator=g) * scale, dim=0)
    action = torch.randint(0, 2, (T, N), generator=g, dtype=torch.int64)
    p = torch.sigmoid(torch.randn(T, N, generator=g))
    return {"obs.obs": obs, "action": action, "reward": torch.ones(T, N),
            "terminated": torch.rand(T, N, generator=g) < 0.02,
            "truncated": torch.rand(T, N, generator=g) < 0.002,
            "logp": torch.log(torch.where(action == 1, p, 1 - p)),
            "value": 20 + torch.cumsum(torch.randn(T, N, generator=g) * 0.1, dim=0)}


def real_rollouts(env: str, train_rounds: int, sets: tuple[str, ...] = ()) -> list[tuple[str, bytes, float]]:
    """[(label, payload, CPU s of worker.sample)]: a worker's rollout with the untrained policy,
    then after ``train_rounds`` in-process learner rounds (payloads as the worker sent them,
    uncompressed)."""
    from rl_system.actors.learner import Learner
    from rl_system.actors.worker import RolloutWorker
    from rl_system.config import load_config

    path, overrides, _ = ENVS.get(env, (None, [], 0))
    cfg = load_config(ROOT / path if path else None,
                      [f"env.name={env}", *overrides, *sets, "compression=none", "workers.torch_threads=1"])
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    weights = learner.get_weights()
    t0 = time.thread_time()
    meta, payload = worker.sample(weights, 0)
    out = [(f"{env}, untrained policy (version 0)", payload, time.thread_time() - t0)]
    if train_rounds:
        returns = []
        for version in range(1, train_rounds + 1):
            _, weights = learner.update(payload)
            t0 = time.thread_time()
            meta, payload = worker.sample(weights, version)
            sample_s = time.thread_time() - t0
            returns += meta.episode_returns
        ret = (f"mean return of episodes ended in training {statistics.fmean(returns):.1f}" if returns
               else "no episode ended")
        out.append((f"{env}, after {train_rounds} learner rounds (version {train_rounds}; {ret})", payload, sample_s))
    return out


def _median(fn, repeat: int) -> float:
    """Median CPU time of this thread over ``repeat`` runs after a warm-up: on a shared machine
    the wall clock also counts the time other processes hold the core."""
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return statistics.median(times)


def _nbytes(group: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in group.values())


def _timed(group, kw, repeat):
    """(payload, encode s, decode s) of ``group`` encoded with ``kw``."""
    meta = {"worker": 0, "version": 1}
    payload = encode(group, meta, **kw)
    r = max(2, repeat // 3) if kw.get("level", 0) > 0 else repeat  # HC is slow to compress
    return payload, _median(lambda: encode(group, meta, **kw), r), _median(lambda: decode(payload), repeat)


def _body(payload: bytes) -> int:
    """Wire bytes of the column blobs (what the ratios use; header and prefix excluded)."""
    return sum(s["compressed_bytes"] for s in codec.stats(payload).values())


def _bitpack_bytes(t: torch.Tensor) -> int:
    b = np.packbits(t.numpy().reshape(-1))
    return min(len(lz4.block.compress(b, store_size=False)), b.nbytes) if b.nbytes else 0


def _zstd(cols, filters: bool, level: int = 1) -> tuple[int, float, float]:
    """zstd (pyarrow) of each column's bytes, optionally after xor+shuffle: (bytes, enc s, dec s)."""
    import pyarrow as pa

    zc = pa.Codec("zstd", compression_level=level)
    blobs = []
    t0 = time.thread_time()
    for t in cols.values():
        u8 = t.contiguous().reshape(-1).view(torch.uint8).numpy()
        if filters and t.dim() >= 2 and t.numel():
            k = t.element_size()
            u8 = codec._shuffle(codec._xor(u8, k, t.shape[0]), k) if k > 1 else codec._xor(u8, k, t.shape[0])
        blobs.append((zc.compress(u8, asbytes=True) if u8.nbytes else b"", u8.nbytes))
    te = time.thread_time() - t0
    t0 = time.thread_time()
    for b, n in blobs:
        if n:
            zc.decompress(b, decompressed_size=n, asbytes=True)
    return sum(len(b) for b, _ in blobs), te, time.thread_time() - t0


def filter_speeds(repeat: int = 30) -> None:
    """GB/s of each filter step on 4 MiB of random bytes (the cost side of filters="auto"):
    best and median CPU time of ``repeat`` runs."""
    import xxhash

    n, k, rows = 4 << 20, 4, 32
    u8 = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    sh, xo = codec._shuffle(u8, k), codec._xor(u8, k, rows)
    i64 = np.random.default_rng(0).integers(0, 12, n // 8).astype(np.int64)
    u8n = i64.astype(np.uint8)
    steps = [("shuffle (k=4)", lambda: codec._shuffle(u8, k)),
             ("unshuffle (k=4)", lambda: codec._unshuffle(sh, k)),
             ("xor (k=4, 32 rows)", lambda: codec._xor(u8, k, rows)),
             ("unxor (k=4, 32 rows, incl. a copy)", lambda: codec._unxor(xo.copy(), k, rows)),
             ("copy", lambda: u8.copy()), ("narrow int64 -> uint8 (per int64 byte)", lambda: i64.astype(np.uint8)),
             ("widen uint8 -> int64 (per int64 byte)", lambda: u8n.astype(np.int64)),
             ("lz4 L0 on random bytes", lambda: lz4.block.compress(u8, store_size=False)),
             ("xxh3 checksum", lambda: xxhash.xxh3_64_intdigest(u8))]
    print(f"# filter step speeds on {n >> 20} MiB, CPU time of one thread, {repeat} runs; {_load()}")
    for name, fn in steps:
        fn()
        times = []
        for _ in range(repeat):
            t0 = time.thread_time()
            fn()
            times.append(time.thread_time() - t0)
        best, med = n / min(times) / 1e9, n / statistics.median(times) / 1e9
        print(f"{name:<40} best {best:6.2f} GB/s   median {med:6.2f} GB/s")


def _load() -> str:
    return "load average %.1f %.1f %.1f" % os.getloadavg()


def _pays(saved: int, extra_s: float) -> str:
    """Link speed below which ``saved`` bytes take longer to send than ``extra_s`` of CPU."""
    if saved <= 0:
        return "never" if saved < 0 or extra_s > 0 else "-"
    return "always" if extra_s <= 0 else f"{saved * 8 / extra_s / 1e9:.2f}"


def bench(label: str, cols: dict[str, torch.Tensor], repeat: int, sample_s: float | None = None) -> None:
    tn = [t.shape[:2] for k, t in cols.items() if t.dim() >= 2 and not k.startswith(("last_", "init_", "final_"))]
    T, N = (int(tn[0][0]), int(tn[0][1])) if tn else (1, 1)
    steps = T * N
    raw_all = _nbytes(cols)
    took = f"; worker.sample took {sample_s:.2f} CPU s" if sample_s else ""
    print(f"\n#### {label}\nT={T} N={N}: {steps} env steps, {len(cols)} columns, raw {raw_all / steps:.1f} B/step "
          f"({raw_all / 1e6:.3f} MB){took}; {_load()}")

    # 1. ratios per column and level, plain and auto
    head = "".join(f"{lab + s:>10}" for lab, _ in LEVELS for s in ("", "+a"))
    print(f"\n1. ratio raw/wire per column (+a = filters='auto'; 'auto picks' at L0)\n"
          f"{'column':<22}{'dtype shape':<26}{'B/step':>9}{head}  auto picks")
    wire = {}
    for name, t in cols.items():
        group, row, pick = {name: t}, "", ""
        for lab, lv in LEVELS:
            for f in ("none", "auto"):
                p = encode(group, {}, level=lv, filters=f)
                b = _body(p)
                wire[(name, lab, f)] = b
                row += f"{t.numel() * t.element_size() / b if b else 1.0:>10.2f}"
                if lv == 0 and f == "auto":
                    pick = "+".join(codec.stats(p)[name]["filters"]) or "-"
        shape = f"{str(t.dtype)[6:]} {list(t.shape)}"
        print(f"{name:<22}{shape:<26}{t.numel() * t.element_size() / steps:>9.1f}{row}  {pick}")
    tot = "".join(f"{raw_all / sum(wire[(n, lab, f)] for n in cols):>10.2f}"
                  for lab, _ in LEVELS for f in ("none", "auto"))
    print(f"{'ALL':<22}{'':<26}{raw_all / steps:>9.1f}{tot}")

    # 2. speeds per column
    speed_cfgs = [("L0", dict(level=0, filters="none")), ("L0 auto", dict(level=0, filters="auto")),
                  ("HC9", dict(level=9, filters="none"))]
    print("\n2. MB/s of raw bytes per column, compress / decompress (CPU time, median of runs)\n"
          f"{'column':<22}{'raw KB':>9}" + "".join(f"{lab:>20}" for lab, _ in speed_cfgs))
    for name, t in list(cols.items()) + [("ALL", None)]:
        group = cols if t is None else {name: t}
        raw = _nbytes(group)
        row = ""
        for _, kw in speed_cfgs:
            if raw == 0:
                row += f"{'-':>20}"
                continue
            _, te, td = _timed(group, kw, repeat)
            row += f"{raw / te / 1e6:>10.0f}{raw / td / 1e6:>10.0f}"
        print(f"{name:<22}{raw / 1e3:>9.1f}{row}")

    # 3. preconditioner study at L0
    print("\n3. preconditioners at lz4 L0, each forced where it applies: ratio per column (bitpack: bench only)\n"
          f"{'column':<22}" + "".join(f"{lab:>10}" for lab, _ in STUDY) + f"{'bitpack':>10}")
    sizes = {lab: 0 for lab, _ in STUDY}
    sizes["best/col"] = sizes["bitpack"] = 0
    for name, t in cols.items():
        raw = t.numel() * t.element_size()
        row, best = "", None
        for lab, f in STUDY:
            b = _body(encode({name: t}, {}, filters=f))
            sizes[lab] += b
            best = b if best is None else min(best, b)
            row += f"{raw / b if b else 1.0:>10.2f}"
        bp = _bitpack_bytes(t) if t.dtype == torch.bool else _body(encode({name: t}, {}, filters="auto"))
        sizes["bitpack"] += bp
        sizes["best/col"] += min(best, bp)
        row += f"{raw / bp if bp else 1.0:>10.2f}" if t.dtype == torch.bool else f"{'':>10}"
        print(f"{name:<22}{row}")
    print("wire B/step, all columns (bitpack: 'auto' + bitpacked bools; best/col: the smallest of all per column)")
    print("  ".join(f"{lab} {b / steps:.1f}" for lab, b in sizes.items()))

    # 4. overall
    print("\n4. overall, all columns in one payload. 'pays below': the link speed (Gbit/s) under which the\n"
          "   bytes saved take longer to send than the extra CPU time vs 'none'; serial = encode + decode\n"
          "   on one path, learner = decode only (the learner decodes every worker's rollouts through one\n"
          "   NIC, while workers encode in parallel); enc/sample = encode time / worker.sample time\n"
          f"{'config':<15}{'wire B/step':>12}{'ratio':>8}{'comp MB/s':>11}{'decomp MB/s':>13}"
          f"{'pays: serial':>14}{'learner':>9}{'enc/sample':>12}")
    _, te0, td0 = _timed(cols, dict(compression="none"), repeat)
    rows = []
    for lab, kw in OVERALL:
        p, te, td = _timed(cols, kw, repeat)
        rows.append((lab, _body(p), te, td))
    for lab, filt in (("zstd1 (ref)", False), ("zstd1 xor+s(ref)", True)):
        runs = [_zstd(cols, filt) for _ in range(max(3, repeat))]
        rows.append((lab, runs[0][0], statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs)))
    for lab, b, te, td in rows:
        frac = f"{te / sample_s:.1%}" if sample_s else "-"
        b = raw_all if lab == "none" else b
        print(f"{lab:<15}{b / steps:>12.1f}{raw_all / b:>8.2f}{raw_all / te / 1e6:>11.0f}{raw_all / td / 1e6:>13.0f}"
              f"{_pays(raw_all - b, te + td - te0 - td0):>14}{_pays(raw_all - b, td - td0):>9}{frac:>12}")
    by = {lab: (b, te, td) for lab, b, te, td in rows}
    vs = []
    for lab, _ in LEVELS + [("accel8", -8)]:
        (b0, te0_, td0_), (b1, te1, td1) = by[lab], by[lab + " auto"]
        vs.append(f"{lab} {_pays(b0 - b1, te1 + td1 - te0_ - td0_)} / {_pays(b0 - b1, td1 - td0_)}")
    print("auto vs plain at the same level, pays below (Gbit/s) serial / learner: " + ", ".join(vs))
    print(f"('none' = a checksummed copy: {raw_all / te0 / 1e6:.0f} / {raw_all / td0 / 1e6:.0f} MB/s; {_load()})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="all", help=f"one of {', '.join(ENVS)}, another registered env, or 'all'")
    ap.add_argument("--train-rounds", type=int, default=None, help="learner rounds before the trained rollout "
                    "(default per env: " + ", ".join(f"{k} {v[2]}" for k, v in ENVS.items()) + "; 0: untrained only)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for the sampled rollouts, e.g. --set workers.num_envs=512")
    ap.add_argument("--save-rollouts", metavar="DIR", help="also write the sampled payloads to DIR/<env>-<i>.rlro")
    ap.add_argument("--rollouts", nargs="+", metavar="FILE", help="bench saved payloads instead of sampling")
    ap.add_argument("--synthetic", action="store_true", help="a synthetic CartPole-like rollout (no env)")
    ap.add_argument("--filter-speeds", action="store_true", help="only the speed of each filter step")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.filter_speeds:
        filter_speeds()
        return
    if args.synthetic:
        bench("synthetic CartPole-like rollout", synthetic_rollout(), args.repeat)
        return
    if args.rollouts:
        todo = [(pathlib.Path(f).name, pathlib.Path(f).read_bytes(), None) for f in args.rollouts]
    else:
        from rl_system.envs import registered_names

        envs = [e for e in ENVS if e in registered_names()] if args.env == "all" else [args.env]
        todo = []
        for env in envs:
            k = ENVS.get(env, (None, [], 0))[2] if args.train_rounds is None else args.train_rounds
            t0 = time.perf_counter()
            got = real_rollouts(env, k, tuple(args.set))
            print(f"[{env}: sampled {len(got)} rollouts in {time.perf_counter() - t0:.0f} s]", file=sys.stderr)
            if args.save_rollouts:
                pathlib.Path(args.save_rollouts).mkdir(parents=True, exist_ok=True)
                for i, (_, p, _) in enumerate(got):
                    (pathlib.Path(args.save_rollouts) / f"{env}-{i}.rlro").write_bytes(p)
            todo += got
    command = command_line("python -m bench.bench_codec", argv)
    print(f"# {command}\n# {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"lz4 {lz4.library_version_string()}, codec format v{codec.VERSION}")
    for label, payload, sample_s in todo:
        cols, _ = decode(payload)
        bench(label, cols, args.repeat, sample_s)


if __name__ == "__main__":
    main()
