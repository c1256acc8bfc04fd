"""Start-up and shutdown of ``rl-system train``: the whole process's wall time minus training,
per phase, for this checkout and (optionally) another commit, run back to back.

    python -m bench.bench_startup [--config launch/configs/cartpole_ppo.yaml] [--repeats 3]
                                  [--against REV] [--set KEY=VALUE ...] [--beside-ray] [--out DIR]

Each run is ``python -m rl_system train CONFIG --log-level debug`` in a fresh process, started only
once no Ray process of an earlier run is left (their teardown would otherwise be billed to the
next run; Ray processes already running when the bench started are not waited for).
``--beside-ray`` keeps another embedded Ray running on the machine for the whole bench, as with
two runs side by side or a run beside a sweep.

The process's wall time comes from outside; training is the summary's ``wall_time_s``;
the difference is the overhead a user waits for. Runs alternate between the checkouts, so a
machine that slows down mid-way slows both. ``--against REV`` checks REV out into a temporary
git worktree and runs the same command there (``python -m`` imports the package from the current
directory first). Its phases appear where that commit records them (``summary.json`` →
``phases_s``); older commits give only the totals.

Prints a table (medians over the repeats) and writes ``startup.json`` / ``startup.md`` to ``--out``
(default ``bench/results/startup/``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness.results import RESULTS, write_suite
from bench.harness.stamp import ROOT as REPO
from bench.harness.stamp import stamp

PHASES = ("interpreter", "config", "imports", "probe", "ray_init", "actors", "train", "finish", "stop_actors",
          "ray_shutdown")
RAY_PROCESSES = "ray::|raylet|gcs_server|dashboard|ray/autoscaler"


def ray_pids() -> set[int]:
    """The machine's Ray processes now."""
    out = subprocess.run(["pgrep", "-f", RAY_PROCESSES], capture_output=True, text=True, check=False).stdout
    return {int(pid) for pid in out.split()}


def wait_for_quiet(present: set[int], timeout_s: float = 60.0) -> None:
    """Until no Ray process but those ``present`` before the bench is left (or ``timeout_s``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if ray_pids() <= present:
            return
        time.sleep(0.5)


BESIDE = ("import ray, sys; ray.init(address='local', num_cpus=1, include_dashboard=False); "
          "print('up', flush=True); sys.stdin.read()")
"""Another embedded Ray, held until its stdin closes (Ray's own defaults: it takes the ports a
plain ``ray.init`` takes)."""


@contextlib.contextmanager
def beside_ray(enabled: bool) -> Iterator[None]:
    """Another Ray on the machine while the bench runs, if ``enabled``."""
    if not enabled:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", BESIDE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "up":
            raise SystemExit("bench_startup: the Ray beside the runs did not start")
        yield
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def one_run(checkout: Path, config: str, overrides: list[str], run_dir: Path, present: set[int]) -> dict[str, Any]:
    """One ``train`` process in ``checkout``: its wall time, training time and phases."""
    wait_for_quiet(present)
    cmd = [sys.executable, "-m", "rl_system", "train", str(REPO / config), "--run-dir", str(run_dir),
           "--log-level", "debug", *[a for o in overrides for a in ("--set", o)]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_startup: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    train = summary["wall_time_s"]
    return {"wall_s": wall, "train_s": train, "overhead_s": wall - train, "phases_s": summary.get("phases_s", {})}


def median_row(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    phases = {p: statistics.median(r["phases_s"][p] for r in runs) for p in PHASES
              if all(p in r["phases_s"] for r in runs)}
    return {"checkout": name, "runs": len(runs),
            **{k: statistics.median(r[k] for r in runs) for k in ("wall_s", "train_s", "overhead_s")},
            "phases_s": phases}


def markdown(result: dict[str, Any]) -> str:
    s = result["stamp"]
    lines = [f"Measured {s['date_utc']} at commit `{s['commit']}` on {s['cpu']} ({s['cores']} cores); "
             f"`{result['command']}`, "
             f"{result['repeats']} runs each, alternating; medians"
             + ("; another Ray running on the machine throughout" if result.get("beside_ray") else "") + ".", "",
             "| checkout | wall | training | overhead (wall − training) | " + " | ".join(PHASES) + " |",
             "|---|---|---|---|" + "---|" * len(PHASES)]
    for row in result["rows"]:
        cells = [f"{row['phases_s'][p]:.2f}" if p in row["phases_s"] else "–" for p in PHASES]
        lines.append(f"| {row['checkout']} | {row['wall_s']:.2f} s | {row['train_s']:.2f} s | "
                     f"**{row['overhead_s']:.2f} s** | " + " | ".join(cells) + " |")
    if len(result["rows"]) == 2:
        a, b = result["rows"]
        lines += ["", f"Overhead of `{a['checkout']}` / `{b['checkout']}`: **{a['overhead_s'] / b['overhead_s']:.2f}**."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="launch/configs/cartpole_ppo.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--against", default=None, metavar="REV", help="another commit, run back to back")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--beside-ray", action="store_true", help="another Ray runs on the machine throughout")
    ap.add_argument("--out", type=Path, default=RESULTS / "startup")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp, beside_ray(args.beside_ray):
        present = ray_pids()
        checkouts = {"this checkout": REPO}
        if args.against:
            other = Path(tmp) / "against"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), args.against],
                           check=True, capture_output=True)
            checkouts[args.against] = other
        try:
            runs: dict[str, list] = {name: [] for name in checkouts}
            for i in range(args.repeats):
                for name, checkout in checkouts.items():
                    r = one_run(checkout, args.config, args.overrides, Path(tmp) / f"run-{len(runs[name])}-{i}-{id(name)}",
                                present)
                    runs[name].append(r)
                    print(f"{name:>14} run {i + 1}: wall {r['wall_s']:.2f} s, training {r['train_s']:.2f} s, "
                          f"overhead {r['overhead_s']:.2f} s", flush=True)
        finally:
            if args.against:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], capture_output=True)
    result = {"stamp": stamp(), "repeats": args.repeats, "against": args.against, "beside_ray": args.beside_ray,
              "command": f"rl-system train {args.config}" + "".join(f" --set {o}" for o in args.overrides),
              "rows": [median_row(name, rs) for name, rs in runs.items()], "runs": runs}
    text = markdown(result)
    print("\n" + text)
    write_suite(args.out, "startup", result, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
