"""A config eager against ``learner.compile: true``, seed by seed, one after the other on this
machine: whether compiling is faster end to end and keeps the learning (the rule for a shipped
config's mode, docs/ppo.md, "The mode each shipped config runs").

    python -m bench.experiments.compile_ab launch/configs/air_combat_ppo.yaml --seeds 0 1 2 \\
        --metric rollout/win_rate --threshold 0.8 [--set max_env_steps=6000000] [--episodes 1000] \\
        [--out bench/results/air_combat/2026-12-02_compile]

Each seed trains eager then compiled (the same seed back to back, so a drift of the machine hits
both), then ``rl-system eval RUN --episodes N`` tests the final policy. The table: when ``--metric``
first reached ``--threshold`` (env steps, and seconds since the run started: start-up and the
compile count), the training wall time and env steps/s of the whole budget, and the test's line.
Writes ``compile_ab.md`` and the runs (``<mode>_s<seed>/``) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.harness.stamp import load1, stamp, stamp_line
from rl_system.observe.metrics import RETURN_MEAN, ROLLOUT, first_at_least

MODES = {"eager": "false", "compiled": "true"}


def run(config: str, seed: int, mode: str, overrides: list[str], out: Path, episodes: int) -> Path:
    """Train and test one run; returns its run dir."""
    run_dir = out / f"{mode}_s{seed}"
    # autograd in both: a config that ships closed-form gradients refuses learner.compile
    sets = [f"seed={seed}", f"learner.compile={MODES[mode]}", "learner.gradients=autograd", *overrides]
    cmd = [sys.executable, "-m", "rl_system", "train", config, "--run-dir", str(run_dir), "--quiet"]
    subprocess.run(cmd + [a for kv in sets for a in ("--set", kv)], check=True)
    test = subprocess.run([sys.executable, "-m", "rl_system", "eval", str(run_dir), "--episodes", str(episodes)],
                          check=True, capture_output=True, text=True)
    (run_dir / "eval.txt").write_text(test.stdout)
    return run_dir


def row(run_dir: Path, seed: int, mode: str, metric: str, threshold: float) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    reached = first_at_least(run_dir / "tb", metric, threshold)
    at = f"{reached[0]:,} / {reached[1]:.1f} s" if reached else "not reached"
    test = [line for line in (run_dir / "eval.txt").read_text().splitlines() if line and not line.startswith("wrote ")]
    return (f"| {seed} | {mode} | {at} | {summary['env_steps']:,} | {summary['wall_time_s']:.1f} s | "
            f"{summary['steps_per_s']:,.0f} | {test[-1] if test else '-'} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--metric", default=ROLLOUT + RETURN_MEAN, help="TensorBoard tag timed to --threshold")
    ap.add_argument("--threshold", type=float, required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--episodes", type=int, default=1000, help="episodes of the final test")
    ap.add_argument("--out", type=Path, default=Path("bench/results/compile_ab"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    st = stamp()
    header = (f"| seed | mode | {args.metric} >= {args.threshold} at (env steps / s) | env steps | training wall | "
              "env steps/s | final test |")
    lines = [header, "|---|---|---|---:|---:|---:|---|"]
    for seed in args.seeds:
        for mode in MODES:
            run_dir = run(args.config, seed, mode, args.overrides, args.out, args.episodes)
            lines.append(row(run_dir, seed, mode, args.metric, args.threshold))
            print(lines[-1], flush=True)
    command = " ".join(["python -m bench.experiments.compile_ab", *(argv if argv is not None else sys.argv[1:])])
    st["load_1m_after"] = load1()
    text = f"`{command}`\n\n{stamp_line(st)}\n\n" + "\n".join(lines) + "\n"
    (args.out / "compile_ab.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
