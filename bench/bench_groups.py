"""Agent groups on MPE's mixed cooperative-competitive tasks whose agents differ: each trained side
scored against the other side acting at random, beside random play against random play.

    python -m bench.bench_groups [--tasks simple_crypto simple_world_comm] [--seeds 0 1 2] [--steps N]
    python -m bench.bench_groups --from-runs bench/results/groups/*_s[0-9].json.xz    # the table again

Each task trains its shipped config (MAPPO with a policy per agent group, continuous actions through
the PettingZoo adapter) for ``--steps`` env steps, then evaluates the newest checkpoint over
``--episodes`` episodes (sampled actions) four ways: every group trained; each side trained with the
other side's groups acting uniformly at random (``rl-system eval --random-groups``); every group at
random. A side is the groups on one team: crypto's eavesdropper ``eve`` against the speaker and
listener (``bob_alice``); world_comm's adversaries (``leadadversary`` and ``adversary``) against the
good agents (``agent``). A side's return is its agents' mean episode return. Writes one
``.json.xz`` per run and ``groups.{json,md}`` to ``--out`` (default ``bench/results/groups``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.harness.learning import read_run, train_row
from bench.harness.markdown import md_table
from bench.harness.results import RESULTS, write_run, write_tables

TASKS = {  # --tasks -> (config, {side: its groups})
    "simple_crypto": ("launch/configs/mpe_simple_crypto_mappo.yaml", {"eve": ["eve"], "bob_alice": ["bob_alice"]}),
    "simple_world_comm": ("launch/configs/mpe_simple_world_comm_mappo.yaml",
                          {"adversaries": ["leadadversary", "adversary"], "agents": ["agent"]}),
}
MODES = ("trained", "vs_random", "random")


def side_returns(state: dict, sides: dict[str, list[str]], episodes: int, seed: int = 12345) -> dict[str, Any]:
    """``{mode: {side: return}}`` of a checkpoint ``state``: every group trained, each side against
    the other at random (that side's return), every group at random."""
    from rl_system.policy.evaluation import evaluate

    every = [g for groups in sides.values() for g in groups]

    def score(at_random: list[str]) -> dict[str, float]:
        result = evaluate(state, episodes=episodes, seed=seed, random_groups=tuple(at_random))
        by_group, size = result["group_return_mean"], {g: len(rows) for g, rows in result["groups"].items()}
        # a side's return: its agents' mean, each group weighted by its agents
        return {side: sum(by_group[g] * size[g] for g in groups) / sum(size[g] for g in groups)
                for side, groups in sides.items()}

    trained, random = score([]), score(every)
    against = {side: score([g for g in every if g not in groups])[side] for side, groups in sides.items()}
    return {"trained": trained, "vs_random": against, "random": random}


def run_one(task: str, seed: int, steps: int, episodes: int, out: Path) -> dict[str, Any]:
    """Train ``task`` on ``seed`` for ``steps`` env steps, evaluate it (:func:`side_returns`)."""
    import tempfile

    from rl_system.checkpoint.store import CheckpointStore

    config, sides = TASKS[task]
    with tempfile.TemporaryDirectory(prefix=f"groups_{task}_") as tmp:
        run_dir = Path(tmp) / "run"
        row = train_row(config, [f"max_env_steps={steps}", "tensorboard=true"], seed, run_dir)
        state, _, _ = CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()
        row.update(task=task, sides=sides, episodes=episodes, scores=side_returns(state, sides, episodes))
    row.pop("run_dir", None)
    path = write_run(out / f"{task}_s{seed}", row)
    print(f"{task} seed {seed}: {row['scores']} -> {path}", flush=True)
    return {**row, "source": str(path)}


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.pstdev(values):.2f}"


def markdown(st: dict, runs: list[dict[str, Any]], command: str) -> str:
    lines = [f"# Agent groups on MPE's mixed tasks: each trained side against the other at random "
             f"({st['date_utc']}, commit {st['commit']})", "",
             f"`{command}` on {st['cpu']} ({st['cores']} cores), torch {st['torch']}, Ray {st['ray']}.", ""]
    rows = []
    for task in sorted({r["task"] for r in runs}):
        mine = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        for side in mine[0]["sides"]:
            got = {m: [r["scores"][m][side] for r in mine] for m in MODES}
            rows.append([task, side, ", ".join(mine[0]["sides"][side]), len(mine),
                         f"{mine[0]['env_steps']:,}", _mean_std(got["vs_random"]), _mean_std(got["random"]),
                         _mean_std(got["trained"]),
                         f"{statistics.fmean(r['train_wall_s'] for r in mine):.0f}"])
    lines += md_table(["task", "side", "its groups", "seeds", "env steps", "trained vs random",
                       "random vs random", "trained vs trained", "train wall s (mean)"], rows)
    lines += ["", "A side's return: its agents' mean episode return (sampled actions, "
              f"{runs[0]['episodes']} episodes a score, mean ± std over seeds). *trained vs random*: the side's "
              "groups trained, the other side's acting uniformly at random; *random vs random*: every group at "
              "random; *trained vs trained*: both trained (self-play of the run's own policies)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=300_000, help="env steps per run (default 300,000)")
    ap.add_argument("--episodes", type=int, default=500, help="episodes per score (default 500)")
    ap.add_argument("--out", type=Path, default=RESULTS / "groups")
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, help="stored runs to table instead")
    args = ap.parse_args(argv)
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs]
    else:
        runs = [run_one(t, s, args.steps, args.episodes, args.out) for t in args.tasks for s in args.seeds]
    print(write_tables(args.out, "groups", runs, markdown, "python -m bench.bench_groups", argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
