"""Population-based training of the HMASD preset on Alice_and_Bob beside the preset's reseed on
stall, on the same seeds and the same total env-step budget.

The PBT population is an ``rl-system tune`` experiment: one member per seed (``seed=grid(...)``),
every member starting at the preset's values (``--pbt-start config``), the reseed on stall off
(exploiting a better member does its job), each member with the preset's budget:

    rl-system tune launch/configs/alice_bob_hmasd.yaml --scheduler pbt --metric success_rate \\
        --num-samples 1 --search 'seed=grid(2, 6, 13, 16)' --search 'hmasd.lr=loguniform(3e-4, 3e-3)' \\
        --search 'hmasd.lambda_h=choice(0.0, 0.0003, 0.001, 0.003)' --search 'hmasd.lambda_l=choice(0.02, 0.05, 0.1)' \\
        --set 'reseed.at_env_steps=[]' --set max_wall_s=null --perturbation-steps 300000 --pbt-start config \\
        --max-concurrent 4 --seed 0 --out runs/tune --name pbt-alicebob

This script then tests each member's final policy and its best one (the Tune checkpoint with the
highest training success, chosen by the training return as ``best.json`` is, never by test
episodes) exactly as ``bench.bench_hmasd`` tests a run: 200 fresh episodes of the task's own start
(the config's ``eval_kwargs``), both levels sampled, seed 10,000 + the member's seed. Beside them
it prints the preset's figures for the same seeds from ``bench/results/hmasd/default.txt.xz`` (the
runs of the reseed-on-stall preset, 3M env steps each, at ``--preset-commit``; by default the rerun
at the commit the PBT run ended on, ``python -m bench.bench_hmasd --seeds 2 6 --methods hmasd``
beside ``--seeds 13 16``):

    python -m bench.experiments.pbt_alice_bob --experiment runs/tune/pbt-alicebob [--preset-commit 649ff2f]
"""

from __future__ import annotations

import argparse
import json
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench.harness.learning import with_test_env
from bench.harness.results import RESULTS, read_text
from rl_system.checkpoint import load_checkpoint, read_manifest
from rl_system.policy.evaluation import evaluate

PRESET_RUNS = RESULTS / "hmasd" / "default.txt.xz"
PRESET_COMMIT = "9eb0479"  # the preset rerun on the PBT seeds at the commit the PBT run ended on


def preset_rows(seeds: list[int], commit: str = PRESET_COMMIT, path: Path = PRESET_RUNS) -> dict[int, dict[str, str]]:
    """The reseed-on-stall preset's row of each seed in the blocks of ``path`` run at ``commit``
    (its last, where a seed ran twice)."""
    block = re.compile(rf"^# == \S+ · {re.escape(commit)}.*(restart on stall|reseed on stall)")
    rows: dict[int, dict[str, str]] = {}
    in_block, header = False, None
    for line in read_text(path).splitlines():
        if line.startswith("# =="):
            in_block = bool(block.match(line)) and "flat MAPPO" not in line
            continue
        cells = [c.strip() for c in line.split("|")]
        if cells[0] == "method":
            header = cells if "seed" in cells else None  # per-seed tables only, not the summaries
        elif in_block and header and cells[0] == "hmasd" and len(cells) == len(header):
            row = dict(zip(header, cells))
            if int(row["seed"]) in seeds:
                rows[int(row["seed"])] = row
    return rows


def members(exp: Path) -> list[dict[str, Any]]:
    """Each trial: its first config, its last, its Tune checkpoints (manifest and path)."""
    out = []
    for trial in sorted(p for p in exp.iterdir() if (p / "result.json").is_file()):
        results = [json.loads(line) for line in (trial / "result.json").read_text().splitlines() if line]
        ckpts = []
        for f in sorted(trial.glob("checkpoint_*/*.rlck")):
            ckpts.append({"path": f, **read_manifest(str(f))})
        # An exploit shows as a change of config between two reports (the clone's perturbed one).
        exploits = sum(a["config"] != b["config"] for a, b in pairwise(results))
        out.append({"trial": trial.name, "first": results[0]["config"], "last": results[-1]["config"],
                    "env_steps": results[-1]["env_steps"], "train_success": results[-1].get("success_rate"),
                    "checkpoints": ckpts, "exploits": exploits})
    return out


def test(path: Path, seed: int) -> float:
    state, _ = load_checkpoint(str(path))
    return evaluate(with_test_env(state, []), episodes=200, deterministic=False, seed=10_000 + seed).get(
        "success_rate", 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", type=Path, required=True, help="the rl-system tune experiment directory")
    ap.add_argument("--preset-commit", default=PRESET_COMMIT,
                    help=f"the commit of the preset's runs to print beside ({PRESET_RUNS.name}'s blocks)")
    args = ap.parse_args()
    population = members(args.experiment)
    seeds = [m["first"]["seed"] for m in population]
    print(f"PBT population of {len(population)} in {args.experiment}")
    print("member | first seed | exploits | env steps | train success | last hmasd.lr | lambda_h | lambda_l"
          " | final test success | best checkpoint at env steps | its train success | best test success")
    print("---|---|---|---|---|---|---|---|---|---|---|---")
    finals, bests = [], []
    for m in population:
        seed = m["first"]["seed"]
        final = max(m["checkpoints"], key=lambda c: (c["env_steps"], c["path"].parent.name))
        best = max(m["checkpoints"], key=lambda c: (c.get("mean_return") or -1.0, c["env_steps"]))
        f, b = test(final["path"], seed), test(best["path"], seed)
        finals.append(f)
        bests.append(b)
        last = m["last"]
        print(f"{m['trial']} | {seed} | {m['exploits']} | {m['env_steps']:,} | {m['train_success']:.2f} | "
              f"{last['hmasd.lr']:.2e} | {last['hmasd.lambda_h']} | {last['hmasd.lambda_l']} | {f:.3f} | "
              f"{best['env_steps']:,} | {best.get('mean_return') or 0:.2f} | {b:.3f}")
    print(f"\nPBT: mean final test success {sum(finals) / len(finals):.3f}, mean best {sum(bests) / len(bests):.3f}; "
          f"members >= 0.8: final {sum(x >= 0.8 for x in finals)}/{len(finals)}, "
          f"best {sum(x >= 0.8 for x in bests)}/{len(bests)}")
    preset = preset_rows(seeds, args.preset_commit)
    print(f"\nThe reseed-on-stall preset on the same seeds ({PRESET_RUNS.name}, {args.preset_commit}, 3M env steps each):")
    print("seed | reseeded at | test success (final) | best.json test success")
    print("---|---|---|---")
    pf, pb = [], []
    for seed in seeds:
        row = preset.get(seed)
        if row is None:
            print(f"{seed} | not in the results file | - | -")
            continue
        pf.append(float(row["test success"]))
        pb.append(float(row["best.json test success"]))
        print(f"{seed} | {row.get('reseeded at', row.get('restarted at', 'not in that table'))} | {row['test success']} | {row['best.json test success']}")
    if pf:
        print(f"\npreset: mean final test success {sum(pf) / len(pf):.3f}, mean best {sum(pb) / len(pb):.3f}; "
              f"seeds >= 0.8: final {sum(x >= 0.8 for x in pf)}/{len(pf)}, best {sum(x >= 0.8 for x in pb)}/{len(pb)}")


if __name__ == "__main__":
    main()
