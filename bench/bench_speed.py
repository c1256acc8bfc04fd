"""The headline speed figures, each beside its peer in the same sitting, every run a fresh process:

* ``throughput``: CartPole env steps/s with learning on, ``rl-system train
  launch/configs/cartpole_ppo_throughput.yaml`` (3M env steps) against RLlib's PPO with the same
  [32, 32] ReLU network and batch geometry (:mod:`bench.peers.rllib_ppo` ``throughput``, 30 s);
* ``minatar``: MinAtar Breakout env steps/s with learning on, ``minatar_breakout_ppo.yaml`` against
  Stable-Baselines3's PPO with the same CNN, batch geometry and settings
  (:mod:`bench.peers.sb3_minatar`, its two torch threads), ``--minatar-steps`` each;
* ``process``: the whole process of CartPole to a 100-episode mean return of 475, from the
  command to its exit: ``rl-system train launch/configs/cartpole_ppo.yaml`` against RLlib's tuned
  PPO (``python -m bench.peers.rllib_ppo --seeds 0 --config tuned``).

    python -m bench.bench_speed [--pairs 3] [--only throughput,minatar,process] [--minatar-steps 262144]
                                [--out DIR]

Each figure is taken ``--pairs`` times, rl_system and the peer alternating which goes first, and
reported as medians with every pair's ratio (above 1: rl_system is faster). Writes ``speed.json``
and ``speed.md`` to ``--out`` (default ``bench/results/speed/``); README's results at a glance and
docs/results.md's speed table are generated from ``speed.json`` (``python -m bench.publish.pages``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_startup import ray_pids, wait_for_quiet
from bench.harness.learning import read_summary, train_command
from bench.harness.markdown import md_table
from bench.harness.results import RESULTS, command_line, write_suite
from bench.harness.stamp import ROOT, load1, stamp, stamp_line

CONFIGS = ROOT / "launch" / "configs"
Runner = Callable[[Path], float]


def _process(cmd: list[str], cwd: Path) -> tuple[float, str]:
    """``cmd``'s wall seconds and its stdout; one line and exit 1 where it fails."""
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"bench_speed: {' '.join(cmd[1:4])} ... exited {out.returncode}: {tail}")
    return wall, out.stdout


def _ours(config: str, *sets: str) -> Callable[[Path], dict[str, Any]]:
    def run(tmp: Path) -> dict[str, Any]:
        wall, _ = _process(train_command(sys.executable, CONFIGS / config, tmp / "run", sets), tmp)
        return {**read_summary(tmp / "run"), "process_s": wall}
    return run


def ours_throughput(tmp: Path) -> float:
    return _ours("cartpole_ppo_throughput.yaml")(tmp)["steps_per_s"]


def rllib_throughput(tmp: Path) -> float:
    _, out = _process([sys.executable, "-m", "bench.peers.rllib_ppo", "--seeds", "0", "--config", "throughput",
                       "--budget", "0", "--throughput", "30"], ROOT)
    return float(re.search(r"throughput \[throughput, 4 epochs\]: (\d+) env steps/s", out).group(1))


def ours_minatar(steps: int) -> Runner:
    return lambda tmp: _ours("minatar_breakout_ppo.yaml", f"max_env_steps={steps}")(tmp)["steps_per_s"]


def sb3_minatar(steps: int) -> Runner:
    def run(tmp: Path) -> float:
        _process([sys.executable, "-m", "bench.peers.sb3_minatar", "--game", "Breakout", "--steps", str(steps),
                  "--threads", "2", "--json", str(tmp / "sb3.json")], ROOT)
        r = json.loads((tmp / "sb3.json").read_text())
        return r["env_steps"] / r["train_wall_s"]
    return run


def ours_process(tmp: Path) -> float:
    s = _ours("cartpole_ppo.yaml")(tmp)
    if not s["reached_target"]:
        raise SystemExit("bench_speed: rl_system's CartPole run did not reach 475")
    return s["process_s"]


def rllib_process(tmp: Path) -> float:
    wall, out = _process([sys.executable, "-m", "bench.peers.rllib_ppo", "--seeds", "0", "--config", "tuned"], ROOT)
    if "'reached': True" not in out:
        raise SystemExit("bench_speed: RLlib's tuned CartPole run did not reach 475 in its budget")
    return wall


def figures(minatar_steps: int) -> dict[str, dict[str, Any]]:
    """Each figure: what is measured, its unit, whether higher is faster, and the two runners."""
    return {
        "throughput": {"what": "CartPole env steps/s with learning on", "unit": "env steps/s", "higher": True,
                       "ours": ours_throughput, "peer": rllib_throughput, "peer_name": "RLlib PPO [throughput]",
                       "ours_cmd": "rl-system train launch/configs/cartpole_ppo_throughput.yaml",
                       "peer_cmd": "python -m bench.peers.rllib_ppo --seeds 0 --config throughput --budget 0 --throughput 30"},
        "minatar": {"what": "MinAtar Breakout env steps/s with learning on", "unit": "env steps/s", "higher": True,
                    "ours": ours_minatar(minatar_steps), "peer": sb3_minatar(minatar_steps),
                    "peer_name": "Stable-Baselines3 PPO, same CNN and batch",
                    "ours_cmd": f"rl-system train launch/configs/minatar_breakout_ppo.yaml --set max_env_steps={minatar_steps}",
                    "peer_cmd": f"python -m bench.peers.sb3_minatar --game Breakout --steps {minatar_steps} --threads 2"},
        "process": {"what": "CartPole to 475, whole process (start, train, shut down)", "unit": "s", "higher": False,
                    "ours": ours_process, "peer": rllib_process, "peer_name": "RLlib PPO [tuned]",
                    "ours_cmd": "rl-system train launch/configs/cartpole_ppo.yaml",
                    "peer_cmd": "python -m bench.peers.rllib_ppo --seeds 0 --config tuned"},
    }


def measure(names: list[str], pairs: int, minatar_steps: int) -> list[dict[str, Any]]:
    specs, rows = figures(minatar_steps), []
    present = ray_pids()
    for name in names:
        spec, got = specs[name], {"ours": [], "peer": []}
        for i in range(pairs):
            for side in ("ours", "peer") if i % 2 == 0 else ("peer", "ours"):
                wait_for_quiet(present)  # a run's Ray teardown is not billed to the next
                with tempfile.TemporaryDirectory(prefix="bench_speed_") as tmp:
                    got[side].append(spec[side](Path(tmp)))
                print(f"{name} pair {i + 1}/{pairs}: {side} {got[side][-1]:,.2f}", flush=True)
        ratios = [(o / p if spec["higher"] else p / o) for o, p in zip(got["ours"], got["peer"])]
        rows.append({"figure": name, "what": spec["what"], "unit": spec["unit"], "higher_is_faster": spec["higher"],
                     "ours": statistics.median(got["ours"]), "peer": statistics.median(got["peer"]),
                     "ours_each": got["ours"], "peer_each": got["peer"], "ratios": ratios,
                     "ratio": statistics.median(ratios), "peer_name": spec["peer_name"],
                     "ours_command": spec["ours_cmd"], "peer_command": spec["peer_cmd"]})
    return rows


def value(v: float, unit: str) -> str:
    return f"{v:.1f} s" if unit == "s" else f"{v:,.0f}"


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], command: str) -> str:
    header = ["figure", "rl_system", "peer", "rl_system's lead (each pair)", "commands"]
    body = [[r["what"], value(r["ours"], r["unit"]), f"{r['peer_name']}: {value(r['peer'], r['unit'])}",
             f"**{r['ratio']:.2f}×** ({' · '.join(f'{x:.2f}' for x in r['ratios'])})",
             f"`{r['ours_command']}`; `{r['peer_command']}`"] for r in rows]
    return "\n".join([f"# Speed beside peers ({meta['date_utc']}, commit {meta['commit']})", "", f"`{command}`", "",
                      stamp_line(meta), "", *md_table(header, body), "",
                      "Medians of the pairs; the lead is rl_system's rate over the peer's, or the peer's time over "
                      "rl_system's (above 1: rl_system is faster)."]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--only", default="throughput,minatar,process", metavar="NAME[,NAME]")
    ap.add_argument("--minatar-steps", type=int, default=262_144)
    ap.add_argument("--out", type=Path, default=RESULTS / "speed")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in figures(1)]
    if unknown or args.pairs < 1:
        ap.error(f"--only: no figure {', '.join(unknown)}" if unknown else "--pairs must be at least 1")
    meta, command = stamp(), command_line("python -m bench.bench_speed", argv)
    rows = measure(names, args.pairs, args.minatar_steps)
    meta["load_1m_after"] = load1()
    text = markdown(meta, rows, command)
    write_suite(args.out, "speed", {"meta": meta, "command": command, "pairs": args.pairs, "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
