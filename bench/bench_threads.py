"""The learner's torch threads on a machine another process shares: one config's update timed with
1 and 2 threads and, for 2, OpenMP's default wait policy and a passive one (``OMP_WAIT_POLICY``),
first with the machine to itself and then with each of ``--hogs`` other processes spinning on one
core (a Python busy loop: what another job, a test run or a browser tab does to a laptop's cores).

    python -m bench.bench_threads [--config vmas_balance_mappo] [--hogs 0 1] [--repeats 3]
                                  [--set KEY=VALUE ...] [--out DIR]

Every cell is ``python -m bench.bench_update --configs CONFIG --threads T --repeats R`` in a fresh
process (OpenMP reads its wait policy once, at start-up) with the variant's environment; the cell
is that run's median update. Torch's CPU wheels run their intra-op parallelism on GNU OpenMP:
with the default policy a thread that reaches a barrier first spins for a while before it sleeps,
so on a core another process holds it burns the time slice its partner needs.

Prints a table and writes ``threads.json`` / ``threads.md`` to ``--out`` (default
``bench/results/threads/``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.markdown import md_table, num
from bench.harness.results import RESULTS, command_line, write_suite
from bench.harness.stamp import ROOT, load1, stamp, stamp_line

#: each variant: its torch threads and the environment it adds
VARIANTS: dict[str, tuple[int, dict[str, str]]] = {
    "1 thread": (1, {}),
    "2 threads": (2, {}),
    "2 threads, OMP_WAIT_POLICY=PASSIVE": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
}
HOG = "while True: pass"


def update_cell(config: str, threads: int, env: dict[str, str], repeats: int, sets: list[str]) -> dict[str, Any]:
    """One bench_update run in a fresh process: its median update, every update, the wall s."""
    with tempfile.TemporaryDirectory(prefix="bench_threads_") as tmp:
        cmd = [sys.executable, "-m", "bench.bench_update", "--configs", config, "--threads", str(threads),
               "--repeats", str(repeats), "--out", tmp, *(a for kv in sets for a in ("--set", kv))]
        base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env={**base, **env}, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        result = json.loads(next(Path(tmp).glob("update_*.json")).read_text())
    row = result["rows"][0]
    if "skipped" in row:
        raise SystemExit(f"bench_threads: {config}: {row['skipped']}")
    return {"update_s": row["update_s"], "times": row["times"], "samples": row["samples"], "process_wall_s": wall}


def measure(config: str, hogs: list[int], repeats: int, sets: list[str]) -> list[dict[str, Any]]:
    """A row per (hogs, variant), the variants in turn under each number of hogs."""
    rows = []
    for n in hogs:
        spinners = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]
        try:
            for name, (threads, env) in VARIANTS.items():
                before = load1()
                cell = update_cell(config, threads, env, repeats, sets)
                rows.append({"hogs": n, "variant": name, "threads": threads, "env": env, **cell,
                             "load_1m_before": before, "load_1m_after": load1()})
                print(f"hogs {n} | {name}: {cell['update_s']:.2f} s", flush=True)
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    return rows


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], config: str, command: str) -> str:
    base = {r["hogs"]: r["update_s"] for r in rows if r["variant"] == "1 thread"}
    body = [[r["hogs"], r["variant"], num(r["update_s"], 3), " · ".join(num(t, 3) for t in r["times"]),
             f"{r['update_s'] / base[r['hogs']]:.2f}×" if r["hogs"] in base else "–",
             f"{num(r['load_1m_before'], 1)} → {num(r['load_1m_after'], 1)}"] for r in rows]
    header = ["other processes spinning", "learner threads", "update (median)", "each", "against 1 thread",
              "load before → after"]
    title = f"# The learner's threads on a shared machine: `{config}` ({meta['date_utc']}, commit {meta['commit']})"
    footer = (f"One update of the config's batch ({rows[0]['samples']:,} samples), `bench.bench_update` in a "
              "fresh process per cell; each other process is a Python busy loop on one core.")
    return "\n".join([title, "", f"`{command}`", "", stamp_line(meta), "", *md_table(header, body), "", footer]) + "\n"


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="vmas_balance_mappo")
    ap.add_argument("--hogs", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, default=RESULTS / "threads")
    args = ap.parse_args(argv)
    meta, command = stamp(), command_line("python -m bench.bench_threads", argv)
    rows = measure(args.config, args.hogs, args.repeats, args.set)
    meta["load_1m_after"] = load1()
    text = markdown(meta, rows, args.config, command)
    write_suite(args.out, "threads", {"meta": meta, "config": args.config, "set": args.set, "rows": rows}, text)
    print(text)
    return text


if __name__ == "__main__":
    main()
