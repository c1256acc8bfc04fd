"""Soak test: a long CartPole PPO run of small rounds, watching every process of the run for growth.

    python -m bench.soak [--rounds 10000] [--every 1000] [--warmup 2000] [--num-envs 8]
                         [--rollout-len 8] [--workers 2] [--checkpoint-every 500] [--out FILE]

A real training run (``RunLoop``, Ray embedded in this process, ``launch/configs/cartpole_ppo.yaml``
with small rounds, no target, checkpoints every ``--checkpoint-every`` rounds, TensorBoard on,
a progress/status/checkpointer poll every ``--log-every-s``). Every ``--every`` rounds the run
loop pauses after its round (the sample is taken by a round reporter, with nothing in
flight) and one row is printed:

  round         rounds done
  r/s           rounds per second since the previous row
  driver        RSS (MB) of this process; learner, w0, w1, ..., ckpt: RSS of the Ray actors'
                processes (the checkpointer's too); status: the rl-system-status actor
  store MB/objs object-store (plasma) bytes in use and objects held, from the raylet
  fds           open file descriptors: driver / learner / workers / checkpointer
  refs          object refs in scope in the driver / learner (Ray's reference table)
  pyobj k       Python objects tracked by the driver's gc, in thousands
  raylet, gcs   RSS (MB) of Ray's own raylet and GCS server (informational)
  disk MB       size of the run directory (TensorBoard events, console.log, checkpoints)

At the end: each watched figure's change from the first row at or after ``--warmup`` to the last,
and the largest deviation from that baseline in between; a figure outside +-10% is flagged (for
the object store, whose baseline is ~0, a change under 1 MB is not flagged; for fds and refs, a
change of at most 2 is not flagged). ``--out`` also writes the rows and the verdict as JSON.
Exit code 1 when something is flagged.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import ray

from rl_system.config import load_config
from rl_system.run.loop import RunLoop
from rl_system.run.startup import init_ray

CONFIG = Path(__file__).resolve().parents[1] / "launch/configs/cartpole_ppo.yaml"
MB = 1024 * 1024

# A change of at most this much is never flagged, whatever the relative change (by kind of figure).
WATCHED_ABS = {"store_mb": 1.0, "fds": 2, "refs": 2}


def _proc_stats(pid: int | None) -> dict[str, Any]:
    """RSS (VmRSS) and open file descriptors of ``pid``, read from /proc (Linux)."""
    if pid is None:
        return {"rss_mb": None, "fds": None}
    try:
        with open(f"/proc/{pid}/status") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return {"rss_mb": kb / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd"))}
    except (OSError, StopIteration, ValueError):
        return {"rss_mb": None, "fds": None}


def _fd_kinds(pid: int | None) -> dict[str, int]:
    """Open fds of ``pid`` by kind: socket, pipe, anon_inode:<what>, or the file's path."""
    out: dict[str, int] = {}
    if pid is None:
        return out
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":", 1)[0] if target.startswith(("socket:", "pipe:")) else target
        kind = target.split("[", 1)[0].rstrip(":") if target.startswith("anon_inode:") else kind
        out[kind] = out.get(kind, 0) + 1
    return dict(sorted(out.items()))


def _dir_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total / MB


class Probe:
    """Reads the figures of one sample: processes by actor name, the raylet's view of the object
    store and of every core worker's reference table."""

    def __init__(self) -> None:
        self.node = ray._private.worker._global_node
        procs = self.node.all_processes
        self.raylet_pid = procs["raylet"][0].process.pid if procs.get("raylet") else None
        self.gcs_pid = procs["gcs_server"][0].process.pid if procs.get("gcs_server") else None

    @staticmethod
    def actor_pids() -> dict[str, int]:
        """Alive actors of this cluster by name -> pid (after a Ray restart: the new process)."""
        out = {}
        for info in ray._private.state.actors().values():
            if info.get("State") == "ALIVE" and info.get("Name"):
                out[info["Name"]] = info.get("Pid")
        return out

    def raylet_view(self) -> tuple[dict[str, Any], dict[int, dict[str, int]]]:
        from ray._private import internal_api

        reply = internal_api.node_stats(self.node.node_ip_address, self.node.node_manager_port,
                                        include_memory_info=False)
        s = reply.store_stats
        store = {"store_mb": s.object_store_bytes_used / MB, "store_objs": s.num_local_objects,
                 "store_created_total": s.cumulative_created_objects}
        workers = {c.pid: {"refs": c.num_object_refs_in_scope, "owned": c.num_owned_objects}
                   for c in reply.core_workers_stats}
        return store, workers

    def sample(self, loop: Any, t_start: float) -> dict[str, Any]:
        pids = self.actor_pids()
        learner_name = max((n for n in pids if n == "learner" or n.startswith("learner-r")),
                           key=lambda n: (n != "learner", n), default=None)
        names = {"learner": learner_name, "ckpt": "checkpointer", "status": "rl-system-status",
                 **{f"w{i}": f"rollout-worker-{i}" for i in range(len(loop.workers))}}
        row: dict[str, Any] = {"round": loop.stats.rounds, "env_steps": loop.stats.env_steps,
                               "t_s": time.perf_counter() - t_start}
        # /proc first: the raylet query below opens a gRPC channel of its own.
        me = os.getpid()
        row["driver"] = {**_proc_stats(me), "pid": me, "fd_kinds": _fd_kinds(me),
                         "pyobj_k": len(gc.get_objects()) / 1000}
        for key, name in names.items():
            pid = pids.get(name) if name else None
            row[key] = {**_proc_stats(pid), "pid": pid, "fd_kinds": _fd_kinds(pid)}
        row["raylet_mb"] = _proc_stats(self.raylet_pid)["rss_mb"]
        row["gcs_mb"] = _proc_stats(self.gcs_pid)["rss_mb"]
        store, core = self.raylet_view()
        for key in ["driver", *names]:
            row[key]["refs"] = core.get(row[key]["pid"], {}).get("refs")
        row.update(store)
        row["disk_mb"] = _dir_mb(loop.run_dir)
        return row


class SoakSampler:
    """The run loop's round reporter: a sample after every ``every``-th round (taken in the driver
    thread at the end of the round, so no rollout is in flight and the figures are comparable)."""

    stop_requested = False

    def __init__(self, every: int, on_sample: Any):
        self.every, self.on_sample = every, on_sample
        self.probe: Probe | None = None
        self.t_start = time.perf_counter()

    def checkpoint_due(self, steps_before: int, steps_now: int) -> bool:
        return False

    def after_round(self, ctx: Any, checkpointed: bool, last: bool = False) -> None:
        if ctx.stats.rounds % self.every == 0:  # the last round is reported once, with last=True
            if self.probe is None:
                self.probe = Probe()
            self.on_sample(self.probe.sample(ctx, self.t_start))


def _fmt(v: Any, spec: str = ".0f") -> str:
    return "-" if v is None else format(v, spec)


def header(num_workers: int) -> str:
    w = " ".join(f"{f'w{i}':>6}" for i in range(num_workers))
    wf = "/".join(f"w{i}" for i in range(num_workers))
    return (f"{'round':>6} {'r/s':>5} {'driver':>6} {'learner':>7} {w} {'ckpt':>6} {'status':>6} "
            f"{'store MB/objs':>13} {'fds d/l/' + wf + '/c':>18} {'refs d/l':>9} {'pyobj k':>8} "
            f"{'raylet':>6} {'gcs':>6} {'disk MB':>7}")


def format_row(row: dict[str, Any], prev: dict[str, Any] | None, num_workers: int) -> str:
    ws = [f"w{i}" for i in range(num_workers)]
    rps = None
    if prev is not None and row["t_s"] > prev["t_s"]:
        rps = (row["round"] - prev["round"]) / (row["t_s"] - prev["t_s"])
    rss = " ".join(f"{_fmt(row[w]['rss_mb']):>6}" for w in ws)
    fds = "/".join(_fmt(row[k]["fds"]) for k in ["driver", "learner", *ws, "ckpt"])
    refs = f"{_fmt(row['driver']['refs'])}/{_fmt(row['learner']['refs'])}"
    store = f"{row['store_mb']:.2f}/{row['store_objs']}"
    return (f"{row['round']:>6} {_fmt(rps):>5} {_fmt(row['driver']['rss_mb']):>6} {_fmt(row['learner']['rss_mb']):>7} "
            f"{rss} {_fmt(row['ckpt']['rss_mb']):>6} {_fmt(row['status']['rss_mb']):>6} {store:>13} {fds:>18} "
            f"{refs:>9} {_fmt(row['driver']['pyobj_k'], '.1f'):>8} {_fmt(row['raylet_mb']):>6} "
            f"{_fmt(row['gcs_mb']):>6} {row['disk_mb']:>7.1f}")


def watched(row: dict[str, Any], num_workers: int) -> dict[str, tuple[float | None, str]]:
    """figure name -> (value, kind), the kind choosing the absolute tolerance."""
    out: dict[str, tuple[float | None, str]] = {}
    for k in ["driver", "learner", *[f"w{i}" for i in range(num_workers)], "ckpt", "status"]:
        out[f"{k} RSS MB"] = (row[k]["rss_mb"], "rss")
    for k in ["driver", "learner", *[f"w{i}" for i in range(num_workers)], "ckpt"]:
        out[f"{k} fds"] = (row[k]["fds"], "fds")
    out["driver refs"] = (row["driver"]["refs"], "refs")
    out["learner refs"] = (row["learner"]["refs"], "refs")
    out["object store MB"] = (row["store_mb"], "store_mb")
    out["object store objects"] = (row["store_objs"], "refs")
    return out


INFORMATIONAL = {"driver py objects k": lambda r: r["driver"]["pyobj_k"], "raylet RSS MB": lambda r: r["raylet_mb"],
                 "gcs RSS MB": lambda r: r["gcs_mb"], "run dir MB": lambda r: r["disk_mb"]}


def verdict(rows: list[dict[str, Any]], warmup: int, num_workers: int, tol: float = 0.10) -> dict[str, Any]:
    after = [r for r in rows if r["round"] >= warmup]
    if len(after) < 2:
        return {"baseline_round": None, "figures": {}, "flagged": [], "note": "fewer than 2 samples after warm-up"}
    base, last = after[0], after[-1]
    figures, flagged = {}, []
    for name, (b, kind) in watched(base, num_workers).items():
        series = [watched(r, num_workers)[name][0] for r in after]
        v = series[-1]
        if b is None or v is None or any(x is None for x in series):
            figures[name] = {"base": b, "last": v, "change": None, "max_dev": None, "flag": False}
            continue
        change = (v - b) / b if b else (0.0 if v == b else float("inf"))
        peak = max(series, key=lambda x: abs(x - b))
        max_dev = (peak - b) / b if b else (0.0 if peak == b else float("inf"))
        small = abs(v - b) <= WATCHED_ABS.get(kind, 0.0)
        flag = abs(change) > tol and not small
        figures[name] = {"base": b, "last": v, "change": change, "max_dev": max_dev, "flag": flag}
        if name.endswith(" fds"):  # which kinds of descriptor changed
            proc = name.split()[0]
            kb, kl = base[proc].get("fd_kinds", {}), last[proc].get("fd_kinds", {})
            figures[name]["fd_diff"] = {k: kl.get(k, 0) - kb.get(k, 0) for k in sorted({*kb, *kl})
                                        if kl.get(k, 0) != kb.get(k, 0)}
        if flag:
            flagged.append(name)
    info = {}
    for name, get in INFORMATIONAL.items():
        b, v = get(base), get(last)
        info[name] = {"base": b, "last": v,
                      "change": (v - b) / b if (b and v is not None) else None}
    return {"baseline_round": base["round"], "last_round": last["round"], "figures": figures,
            "informational": info, "flagged": flagged, "tolerance": tol}


def _pct(change: float | None, base: float | None, last: float | None) -> str:
    if change is None:
        return "-"
    if base == 0:  # no relative change from zero: show the absolute one
        return "+0" if change == 0 else (f"{last - base:+g}" if last is not None else "n/a")
    return f"{change:+.1%}"


def print_verdict(v: dict[str, Any]) -> None:
    if v["baseline_round"] is None:
        print(f"\nno verdict: {v['note']}")
        return
    print(f"\nchange from round {v['baseline_round']} (first sample after warm-up) to round {v['last_round']}, "
          f"tolerance +-{v['tolerance']:.0%}:")
    print(f"  {'figure':<24} {'base':>9} {'last':>9} {'change':>8} {'max dev':>8}")
    for name, f in v["figures"].items():
        ch, md = _pct(f["change"], f["base"], f["last"]), _pct(f["max_dev"], f["base"], None)
        mark = "  <-- GROWS" if f["flag"] else ""
        if f.get("fd_diff"):
            mark += "  (" + ", ".join(f"{k} {d:+d}" for k, d in f["fd_diff"].items()) + ")"
        print(f"  {name:<24} {_fmt(f['base'], '.2f'):>9} {_fmt(f['last'], '.2f'):>9} {ch:>8} {md:>8}{mark}")
    print("  informational (not judged):")
    for name, f in v["informational"].items():
        ch = "-" if f["change"] is None else f"{f['change']:+.1%}"
        print(f"  {name:<24} {_fmt(f['base'], '.2f'):>9} {_fmt(f['last'], '.2f'):>9} {ch:>8}")
    print("verdict: " + ("FLAT (all judged figures within tolerance)" if not v["flagged"]
                         else "GROWS: " + ", ".join(v["flagged"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=1000, help="sample every N rounds")
    ap.add_argument("--warmup", type=int, default=2000, help="baseline: the first sample at or after this round")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--rollout-len", type=int, default=8)
    ap.add_argument("--checkpoint-every", type=int, default=500, help="checkpoint.every_rounds")
    ap.add_argument("--archive-every", type=int, default=0, help="archive_every (0: no rollout archive)")
    ap.add_argument("--log-every-s", type=float, default=0.5)
    ap.add_argument("--run-dir", default=None, help="default: /tmp/rl_soak/<time>")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    ap.add_argument("--out", default=None, help="also write the rows and the verdict as JSON")
    args = ap.parse_args(argv)

    steps_per_round = args.workers * args.num_envs * args.rollout_len
    overrides = [f"workers.num_workers={args.workers}", f"workers.num_envs={args.num_envs}",
                 f"workers.rollout_len={args.rollout_len}", "target_return=null",
                 f"max_env_steps={args.rounds * steps_per_round}",
                 f"checkpoint.every_rounds={args.checkpoint_every}", "tensorboard=true",
                 f"log_every_s={args.log_every_s}", f"archive_every={args.archive_every}", *args.set]
    cfg = load_config(CONFIG, overrides)
    run_dir = Path(args.run_dir or f"/tmp/rl_soak/{time.strftime('%Y%m%d-%H%M%S')}")

    init_ray(cfg, None)  # Ray embedded, exactly as `rl-system train` starts it

    rows: list[dict[str, Any]] = []
    print(f"soak: {args.rounds:,} rounds of {args.workers} workers x {args.num_envs} envs x {args.rollout_len} steps "
          f"({steps_per_round} env steps/round), checkpoint every {args.checkpoint_every} rounds, TensorBoard on; "
          f"run dir {run_dir}")
    print(f"machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
          f"Python {platform.python_version()}, Ray {ray.__version__}, torch {__import__('torch').__version__}")
    print(header(args.workers), flush=True)

    def on_sample(row: dict[str, Any]) -> None:
        print(format_row(row, rows[-1] if rows else None, args.workers), flush=True)
        rows.append(row)

    loop = RunLoop(cfg, run_dir, log_level="warning", reporter=SoakSampler(args.every, on_sample))
    t0 = time.perf_counter()
    try:
        summary = loop.run()
    finally:
        ray.shutdown()
    wall = time.perf_counter() - t0
    expected = args.rounds // args.every
    if len(rows) != expected:
        print(f"warning: {len(rows)} samples, expected {expected} (is the reporter told of every round?)")
    print(f"\n{summary.rounds:,} rounds, {summary.env_steps:,} env steps in {wall:.0f}s "
          f"({summary.rounds / wall:.1f} rounds/s); checkpoints saved {summary.checkpoints.saved}, "
          f"skipped {summary.checkpoints.skipped}, failed {summary.checkpoints.failed}; "
          f"final mean return {summary.final_mean_return}")
    v = verdict(rows, args.warmup, args.workers)
    print_verdict(v)
    if args.out:
        on_disk = summary.to_json()  # the summary as summary.json holds it
        out = {"date": date.today().isoformat(), "argv": sys.argv[1:], "config_overrides": overrides,
               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "ray": ray.__version__,
                           "torch": __import__("torch").__version__},
               "wall_s": wall, "summary": {k: on_disk[k] for k in ("rounds", "env_steps", "checkpoints",
                                                           "final_mean_return", "wall_time_s")},
               "rows": rows, "verdict": v}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))
        print(f"wrote {args.out}")
    return 1 if v["flagged"] else 0


if __name__ == "__main__":
    sys.exit(main())
