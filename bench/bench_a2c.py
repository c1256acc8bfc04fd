"""A2C beside Stable-Baselines3's A2C with the RL Zoo's settings: the same return at equal env steps,
and the wall time to the peer's final return.

    python -m bench.bench_a2c [--env CartPole|HalfCheetah] [--seeds 0 1 2] [--steps N] [--systems rl_system sb3_a2c]
    python -m bench.bench_a2c --from-runs bench/results/a2c/CartPole_*_s[0-9].json.xz    # the table again

rl_system trains ``launch/configs/cartpole_a2c.yaml`` (the Zoo's CartPole-v1 geometry: 8 envs x
5 steps an update) on its torch CartPole, whose dynamics are Gymnasium's CartPole-v1 bit for bit;
the peer is :mod:`bench.peers.sb3_a2c` on Gymnasium's env. Both run the whole budget (no stop at
475) and keep a curve of the 100-episode mean training return. The table gives, per seed, that
return at a quarter, half and all of the budget, the env steps to 475, and each system's wall time
to the peer's final return on that seed. Writes one ``.json.xz`` per run and ``a2c.{json,md}`` to ``--out``
(default ``bench/results/a2c``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.harness.learning import first_at, read_run, train_row
from bench.harness.markdown import md_table
from bench.harness.results import RESULTS, write_run, write_tables
from bench.harness.stamp import where_it_ran

SYSTEMS = ("rl_system", "sb3_a2c")
ENVS = {  # --env -> (our config, the peer's Gymnasium id, the return the table counts env steps to, the file name)
    "CartPole": ("launch/configs/cartpole_a2c.yaml", "CartPole-v1", 475.0, "a2c"),
    # 3096.61 +/- 82.49: the RL Zoo's A2C on HalfCheetah-v3 (its model card on the Hugging Face hub, sb3/a2c-HalfCheetah-v3)
    "HalfCheetah": ("launch/configs/halfcheetah_a2c.yaml", "HalfCheetah-v5", 3096.61, "a2c_halfcheetah"),
}


def at(curve: list, steps: int) -> float | None:
    """The curve's return at the first row at or past ``steps`` env steps."""
    return next((row[2] for row in curve if row[0] >= steps), None)


STORED_POINTS = 250
"""A run's curve is kept at about this many points (a round of 40 env steps is a point: 12,500 of them)."""


def thinned(curve: list) -> list:
    """About :data:`STORED_POINTS` rows of ``curve``, its last row kept."""
    step = max(1, len(curve) // STORED_POINTS)
    return curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else [])


def run(env: str, system: str, seed: int, steps: int) -> dict[str, Any]:
    config, gym_id, _, _ = ENVS[env]
    if system == "sb3_a2c":
        from bench.peers.sb3_a2c import run as sb3

        return {**sb3(gym_id, steps, seed), **where_it_ran()}
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="bench_a2c_"))
    try:
        row = train_row(config, [f"max_env_steps={steps}", "stop_at_target=false", "checkpoint.every_rounds=0"], seed,
                        folder / f"a2c-s{seed}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {**row, "peer": "rl_system", "env": env, "run_dir": None}


def env_of(runs: list[dict[str, Any]]) -> str:
    """The ``ENVS`` name of the runs' env (the peer's rows hold its Gymnasium id)."""
    names = {next((n for n, e in ENVS.items() if r["env"] in (n, e[1])), r["env"]) for r in runs}
    if len(names) != 1:
        raise SystemExit(f"bench_a2c: one env per table, these runs hold {sorted(names)}")
    return names.pop()


def markdown(st: dict[str, Any], runs: list[dict[str, Any]], command: str) -> str:
    env = env_of(runs)
    target = ENVS[env][2]
    steps = max(r["env_steps"] for r in runs)
    marks = (steps // 4, steps // 2, steps)
    peer_final = {r["seed"]: r["final_return"] for r in runs if r["peer"] == "sb3_a2c"}
    header = ["system", "seed", *(f"return at {m // 1000}k" for m in marks), f"env steps to {target:g}", "wall s",
              "env steps/s", "wall s to the peer's final return"]
    body = []
    for r in sorted(runs, key=lambda r: (r["peer"] != "rl_system", r["seed"])):
        hit = first_at(r["curve"], target)
        reach = first_at(r["curve"], peer_final[r["seed"]]) if r["seed"] in peer_final else None
        body.append([r["peer"], r["seed"], *(f"{v:.1f}" if (v := at(r["curve"], m)) is not None else "–" for m in marks),
                     f"{hit[0]:,}" if hit else "not reached", f"{r['train_wall_s']:.0f}",
                     f"{r['env_steps'] / r['train_wall_s']:,.0f}", f"{reach[1]:.0f}" if reach else "–"])
    finals = {p: [r["final_return"] for r in runs if r["peer"] == p] for p in SYSTEMS}
    means = "; ".join(f"{p} {statistics.mean(v):.1f}" for p, v in finals.items() if v)
    return "\n".join([f"# A2C beside Stable-Baselines3 on {env} ({st['date_utc']}, commit {st['commit']})", "",
                      f"`{command}` on {st['cpu']} ({st['cores']} cores), torch {st['torch']}, Ray {st['ray']}.", "",
                      *md_table(header, body), "", f"Mean final return over the seeds: {means}."]) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_a2c", description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", choices=sorted(ENVS), default="CartPole")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="default: the Zoo's budget (500k CartPole, 1M HalfCheetah)")
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="JSON",
                    help="the table again from stored runs (CartPole_<system>_s<seed>.json.xz)")
    ap.add_argument("--out", type=Path, default=RESULTS / "a2c")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    steps = args.steps or (500_000 if args.env == "CartPole" else 1_000_000)
    runs = [read_run(p) for p in args.from_runs or ()]
    for seed in [] if args.from_runs else args.seeds:
        for system in args.systems:
            print(f"seed {seed}: {system} ...", flush=True)
            r = run(args.env, system, seed, steps)
            r["curve"] = thinned(r["curve"])  # the table reads what is stored
            r["source"] = str(write_run(args.out / f"{args.env}_{system}_s{seed}", r))
            runs.append(r)
    name = ENVS[env_of(runs) if args.from_runs else args.env][3]
    print(write_tables(args.out, name, runs, markdown, "python -m bench.bench_a2c", argv))


if __name__ == "__main__":
    main()
