"""Does a change leave training as it was? Runs the same seeded trainings from two commits and
compares their checkpoints version by version (:mod:`bench.compare_runs`): a refactoring that
means to change nothing must give identical weights and optimiser states, and the same env steps
to the target.

    python -m bench.compare_checkouts 7ffcb2a HEAD                    # the default set of runs
    python -m bench.compare_checkouts HEAD~1 HEAD --runs cartpole_s0 hmasd
    python -m bench.compare_checkouts HEAD~1 HEAD --runs all     # every network and update path

Each commit is checked out into a temporary git worktree and trained from there (its own
``rl_system`` and ``envs``, ahead of whatever is installed), so neither the working tree nor the
installation changes. The runs are lag 0 (``workers.wait_for: all``), which repeats bit for bit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.compare_runs import compare

REPO = Path(__file__).resolve().parents[1]
RUNS = {  # name -> config and overrides; one run per network and update path the trainers take
    "cartpole_s0": ("launch/configs/cartpole_ppo.yaml", ["seed=0", "checkpoint.every_rounds=10"]),  # closed form
    "cartpole_s1": ("launch/configs/cartpole_ppo.yaml", ["seed=1", "checkpoint.every_rounds=10"]),
    "cartpole_autograd": ("launch/configs/cartpole_ppo.yaml", ["learner.gradients=autograd", "max_env_steps=200000",
                                                               "checkpoint.every_rounds=10"]),
    "memory_gru": ("launch/configs/cartpole_memory_ppo.yaml", ["max_env_steps=100000", "checkpoint.every_rounds=10"]),
    "minatar": ("launch/configs/minatar_breakout_ppo.yaml", ["max_env_steps=100000", "checkpoint.every_rounds=5"]),
    "minatar_bf16": ("launch/configs/minatar_breakout_ppo.yaml", ["learner.precision=bf16", "max_env_steps=100000",
                                                                  "checkpoint.every_rounds=5"]),
    "hopper_compiled": ("launch/configs/hopper_ppo.yaml", ["learner.gradients=autograd", "learner.compile=true",
                                                          "max_env_steps=40960", "checkpoint.every_rounds=5"]),
    "air_combat": ("launch/configs/air_combat_ppo.yaml", ["max_env_steps=327680", "checkpoint.every_rounds=2"]),
    "hmasd": ("launch/configs/alice_bob_hmasd.yaml", ["max_env_steps=200000", "checkpoint.every_rounds=5"]),
    "alice_bob_mappo": ("launch/configs/alice_bob_mappo.yaml", ["max_env_steps=200000", "checkpoint.every_rounds=5"]),
    "mpe_spread_mappo": ("launch/configs/mpe_simple_spread_mappo.yaml", ["max_env_steps=60000",
                                                                        "checkpoint.every_rounds=2"]),  # PettingZoo
    "vmas_balance_mappo": ("launch/configs/vmas_balance_mappo.yaml", ["max_env_steps=60000",
                                                                      "checkpoint.every_rounds=2"]),  # VMAS
    "cartpole_a2c": ("launch/configs/cartpole_a2c.yaml", ["max_env_steps=100000", "checkpoint.every_rounds=250"]),
    "cartpole_2learners": ("launch/configs/cartpole_ppo.yaml", [
        "learner.num_learners=2", "learner.num_cpus=0.5", "learner.gradients=autograd", "max_env_steps=150000",
        "checkpoint.every_rounds=10"]),
    "hmasd_2learners": ("launch/configs/alice_bob_hmasd.yaml", [
        "learner.num_learners=2", "learner.num_cpus=0.5", "max_env_steps=100000", "checkpoint.every_rounds=5"]),
}
DEFAULT_RUNS = ["cartpole_s0", "cartpole_s1", "hmasd", "minatar"]


def checkout(rev: str, where: Path) -> Path:
    """A worktree of ``rev`` at ``where`` whose ``rl_system.envs`` is its own ``envs/`` (the
    package maps that folder there when installed; from a bare tree a link does the same)."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), rev], check=True,
                   capture_output=True)
    (where / "rl_system" / "envs").symlink_to("../envs")
    return where


def train(tree: Path, run: str, out: Path) -> dict:
    """One run of :data:`RUNS` from ``tree`` into ``out/<run>``; its ``summary.json``."""
    config, overrides = RUNS[run]
    sets = [a for o in [*overrides, "checkpoint.keep_last=1000"] for a in ("--set", o)]
    # `python -m` from the tree puts the tree first on the path; Ray's workers get the driver's path.
    subprocess.run([sys.executable, "-m", "rl_system", "train", config, *sets, "--run-dir", str(out / run),
                    "--quiet"], cwd=tree, check=True)
    return json.loads((out / run / "summary.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", nargs="+", choices=[*sorted(RUNS), "all"], default=DEFAULT_RUNS,
                    help="which runs (default: %(default)s; all: every one)")
    args = ap.parse_args()
    if "all" in args.runs:
        args.runs = list(RUNS)
    try:
        return _compare(args)
    except subprocess.CalledProcessError as err:
        detail = (err.stderr or b"").decode(errors="replace").strip().splitlines()
        print(f"compare_checkouts: {' '.join(map(str, err.cmd[:4]))} ... failed (exit {err.returncode})"
              f"{': ' + detail[-1] if detail else ''}", file=sys.stderr)
        return 2


def _compare(args: argparse.Namespace) -> int:
    same = True
    with tempfile.TemporaryDirectory(prefix="rl_ab_") as tmp:
        tmp = Path(tmp)
        trees = {side: checkout(rev, tmp / f"tree_{side}") for side, rev in (("a", args.before), ("b", args.after))}
        try:
            print(f"| run | {args.before}: steps to target | {args.after}: steps to target | versions compared | "
                  f"weights max abs diff | optimiser max abs diff |\n|---|---|---|---|---|---|")
            for run in args.runs:
                summaries = {side: train(tree, run, tmp / f"runs_{side}") for side, tree in trees.items()}
                rows = compare(tmp / "runs_a" / run, tmp / "runs_b" / run)
                weights = max((r[2] for r in rows), default=float("nan"))
                optim = max((r[3] for r in rows), default=float("nan"))
                same &= bool(rows) and weights == 0 and optim == 0
                same &= summaries["a"]["steps_to_target"] == summaries["b"]["steps_to_target"]
                print(f"| {run} | {summaries['a']['steps_to_target']} | {summaries['b']['steps_to_target']} | "
                      f"{len(rows)} | {weights:g} | {optim:g} |", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False,
                               capture_output=True)
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
