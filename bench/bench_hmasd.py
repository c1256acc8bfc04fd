"""HMASD vs flat MAPPO on Alice_and_Bob, over seeds, through the real system (Ray workers,
gate, learner), plus a table of what each learned individual skill does.

For each method (``launch/configs/alice_bob_hmasd.yaml`` and ``alice_bob_mappo.yaml``, the same
code with the hierarchy switched off) and seed, trains until the 100-episode training success
rate reaches ``--target`` (the team reward is 1 on success, so the mean return is the success
rate) -- recorded, training goes on -- and until the env-step budget runs out, then measures the
*test* success rate of the final policy with ``rl_system.evaluate`` (200 episodes on a fresh env
seed, sampling as in training and argmax at both levels). Runs checkpoint as the preset says
(``checkpoint.every_rounds``), and the checkpoint a user keeps as ``best.json`` (the best
*training* return; ``rl-system eval RUN --pick best``) is tested on the same episodes beside it.

    python -m bench.bench_hmasd --size small --steps 100000 --seeds 0 1 2
    python -m bench.bench_hmasd --size default --steps 3000000 --seeds 0   # ~15-20 min a run here

Prints one row per run, a summary per method, and (HMASD) the skill table: for each agent and
individual skill z, the share of steps under that skill spent on each button/diamond cell and in
the start hall / left / right half of the map, and the plan table: which ``(Z, z_Alice, z_Bob)``
the coordinator picks in each skill window of an episode and which diamond gets collected in it.
``--checkpoint RUN`` prints only those two tables of an existing run, and a third: its test success
with the argmax taken at neither level, at one (``rl-system eval --greedy-level high|low``) or at
both (``--deterministic``), which shows which level's argmax a policy tolerates:

    python -m bench.bench_hmasd --checkpoint runs/<hmasd run>

It also prints what the actors do (action shares, entropy, cells reached) and a map of how surely
``q_d`` tells Alice's skills apart on each part of the map. Training progress goes to stderr (one
line a minute; ``--quiet`` drops it); the runs' directories are deleted at the end unless ``--keep``.
Test episodes and tables use the run's test env (``env.kwargs`` updated with ``env.eval_kwargs``:
the preset trains with exploring starts and tests on the task's fixed start); ``--test-env
KWARG=VALUE`` overrides it further, e.g. ``--test-env random_start=true``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from envs import make_env
from rl_system.algos.hmasd.trainer import next_inputs
from rl_system.checkpoint import CheckpointError
from rl_system.checkpoint_store import CheckpointStore
from rl_system.cli import with_env_kwargs
from rl_system.config import RunConfig, load_config
from rl_system.driver import train
from rl_system.evaluate import evaluate, policy_sampler

CONFIGS = {"hmasd": "launch/configs/alice_bob_hmasd.yaml", "mappo": "launch/configs/alice_bob_mappo.yaml"}
# The skill settings the small-map figures (bench/results/hmasd_small.txt, the learning test) were
# measured with; the default map's preset, tuned for exploring its rooms, differs.
SMALL_MAP_SKILLS = ["env.kwargs.own_position=true", "env.kwargs.random_start=false", "hmasd.n_agent_skills=3",
                    "hmasd.lambda_l=0.01", "hmasd.lambda_h=0.01", "hmasd.lambda_d=0.5", "hmasd.logq_floor=false",
                    "hmasd.lambda_e=1.0"]
# Geometry per map: the small map's 30-step episodes want short windows and rollouts.
GEOMETRY = {
    "small": ["workers.num_envs=32", "workers.rollout_len=30", "hmasd.skill_interval=10", "hmasd.lr=0.001",
              *SMALL_MAP_SKILLS],
    "default": [],
    "large": [],
}
OBJECTS = {"r": "red button", "b": "blue button", "R": "red diamond", "B": "blue diamond"}
REGIONS = ("hall", "left half", "right half")


def bench_config(method: str, size: str, extra: list[str], run: list[str] = ()) -> RunConfig:
    """The method's preset on the map ``size``: then the run's own settings, the map geometry and
    the user's ``--set`` overrides, in that order (later ones win)."""
    return load_config(CONFIGS[method], [f"env.kwargs.size={size}", *run, *GEOMETRY[size], *extra])


def run_one(method: str, seed: int, size: str, steps: int, target: float, root: Path, extra: list[str],
            test_env: list[str], quiet: bool = False) -> dict:
    run_dir = root / f"{method}-s{seed}"
    cfg = bench_config(method, size, extra, [f"seed={seed}", f"max_env_steps={steps}", f"target_return={target}",
                                             "stop_at_target=false", "return_window=100", "tensorboard=false",
                                             "log_every_s=60", "max_wall_s=1800"])
    # The trainer's progress lines (one a minute) go to stderr; stdout keeps only the tables.
    with contextlib.redirect_stdout(sys.stderr):
        summary = train(cfg, run_dir=run_dir, quiet=quiet)
    store = CheckpointStore(str(run_dir / "checkpoints"))
    state = store.load_latest_valid()[0]
    tested = with_env_kwargs(state, test_env)  # over the run's own eval_kwargs
    test = evaluate(tested, episodes=200, deterministic=False, seed=10_000 + seed)
    test_argmax = evaluate(tested, episodes=200, deterministic=True, seed=10_000 + seed)
    # The checkpoint a user of `rl-system train` keeps as best.json (chosen by the training return,
    # never by these test episodes), tested on the same episodes as the final policy.
    try:
        best_state = store.load_best()[0]
    except CheckpointError:  # no checkpoint saw a finished episode
        best_state = state
    same = best_state["learner"]["version"] == state["learner"]["version"]  # then the same episodes' result
    best = test if same else evaluate(with_env_kwargs(best_state, test_env), episodes=200, deterministic=False,
                                      seed=10_000 + seed)
    return {"method": method, "seed": seed, "steps_to_target": summary["steps_to_target"],
            "time_to_target_s": summary["time_to_target_s"], "env_steps": summary["env_steps"],
            "wall_s": summary["wall_time_s"], "steps_per_s": summary["steps_per_s"],
            "train_success": summary.get("final_success_rate", 0.0), "test_success": test.get("success_rate", 0.0),
            "test_success_argmax": test_argmax.get("success_rate", 0.0), "test_length": test["length_mean"],
            "best_steps": best_state["driver"]["env_steps"], "best_test_success": best.get("success_rate", 0.0),
            "state": tested}  # the tables below sample the test env too


def _sampled(state: dict, rollouts: int, n_envs: int = 64):
    """``(env, [rollout columns])`` of a checkpoint's policy sampling both levels as in
    training, from a fresh seeded env batch (the same tables every time)."""
    env, sampler = policy_sampler(state, n_envs, seed=777)
    return env, [sampler.collect(deterministic=False) for _ in range(rollouts)]


@torch.no_grad()
def skill_table(state: dict, rollouts: int = 3) -> list[str]:
    """Share of steps each (agent, z) spends on each object cell and in each part of the map (the
    start hall: rows above the buttons; the left and right halves below it, i.e. the rooms of the
    default and large maps), from rollouts that sample both levels as in training (so every
    skill the coordinator still picks shows up)."""
    cfg = RunConfig.model_validate(state["config"])
    if not cfg.hmasd.hierarchy:
        return []
    env, runs = _sampled(state, rollouts)
    n_z = cfg.hmasd.n_agent_skills
    places = [*OBJECTS.values(), *REGIONS]
    counts = torch.zeros(2, n_z, len(places) + 1)
    for cols in runs:
        cell, region = _where(env, cols)
        z = cols["skill_agent"]  # [T, N, agent]
        for a in range(2):
            masks = [cell[..., a] == env._cell[ch] for ch in OBJECTS] + [region[..., a] == k for k in range(3)]
            for k, on in enumerate(masks):
                counts[a, :, k] += torch.bincount(z[..., a][on], minlength=n_z).float()
            counts[a, :, -1] += torch.bincount(z[..., a].reshape(-1), minlength=n_z).float()
    lines = ["agent | z | steps | " + " | ".join(places), "---|---|---|" + "---|" * len(places)]
    for a, name in enumerate(("Alice", "Bob")):
        for s in range(n_z):
            total = counts[a, s, -1].item()
            shares = " | ".join(f"{100 * counts[a, s, k].item() / max(total, 1):.0f}%" for k in range(len(places)))
            lines.append(f"{name} | {s} | {int(total)} | {shares}")
    return lines


def _where(env, cols: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each agent's cell and region index (``REGIONS``: the start hall, i.e. the rows above both
    buttons, then the left and right halves below it), both ``[T, N, agent]``, from the state."""
    H, W = env.height, env.width
    pos = cols["obs.state"][..., :4].reshape(*cols["obs.state"].shape[:2], 2, 2)  # [T, N, agent, (row, col)]
    row, col = (pos[..., 0] * (H - 1)).round().long(), (pos[..., 1] * (W - 1)).round().long()
    hall_rows = min(env._cell["r"], env._cell["b"]) // W
    return row * W + col, torch.where(row < hall_rows, 0, torch.where(col < W // 2, 1, 2))


def hall_trace(checkpoints: list[Path]) -> list[str]:
    """Per checkpoint of a run (oldest first): the share of each agent's steps in the start hall
    and how many (agent, z) pairs with more than 50 steps spend more than half of theirs there,
    from one 64-env rollout sampling both levels: how early skills settle in the hall."""
    from rl_system.checkpoint import load_checkpoint

    lines = ["env steps | hall share Alice | hall share Bob | pairs > 50% in the hall", "---|---|---|---"]
    for path in checkpoints:
        state, manifest = load_checkpoint(str(path))
        env, (cols,) = _sampled(state, 1)
        hall = _where(env, cols)[1] == 0  # [T, N, agent]
        z, n_z = cols["skill_agent"], RunConfig.model_validate(state["config"]).hmasd.n_agent_skills
        shares = [hall[..., a][z[..., a] == s].float().mean().item()
                  for a in range(2) for s in range(n_z) if int((z[..., a] == s).sum()) > 50]
        lines.append(f"{manifest['env_steps']:,} | {hall[..., 0].float().mean():.2f} | {hall[..., 1].float().mean():.2f} | "
                     f"{sum(sh > 0.5 for sh in shares)} of {len(shares)}")
    return lines


@torch.no_grad()
def actor_table(state: dict, rollouts: int = 3) -> list[str]:
    """What each agent's actor does, both levels sampled: its action shares, its entropy (the
    mean of ``-log pi(a)`` over the sampled actions, an unbiased estimate; ln 5 = 1.61 is
    uniform) and how many distinct cells of each part of the map it reaches."""
    from envs.alice_bob import N_ACTIONS

    if not RunConfig.model_validate(state["config"]).hmasd.hierarchy:
        return []
    env, runs = _sampled(state, rollouts)
    action = torch.cat([c["action"] for c in runs])  # [T, N, agent]
    logp = torch.cat([c["logp"] for c in runs])
    where = [_where(env, c) for c in runs]
    cell, region = torch.cat([w[0] for w in where]), torch.cat([w[1] for w in where])
    lines = ["agent | stay | up | down | left | right | entropy | cells reached: " + " | ".join(REGIONS),
             "---|---|---|---|---|---|---|---|---|---"]
    for a, name in enumerate(("Alice", "Bob")):
        shares = torch.bincount(action[..., a].reshape(-1), minlength=N_ACTIONS).float() / action[..., a].numel()
        reached = [len(cell[..., a][region[..., a] == k].unique()) for k in range(len(REGIONS))]
        lines.append(f"{name} | " + " | ".join(f"{100 * x:.0f}%" for x in shares.tolist())
                     + f" | {float(-logp[..., a].mean()):.2f} | " + " | ".join(map(str, reached)))
    return lines


@torch.no_grad()
def _log_q_d_on_every_cell(state: dict, agent: int) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int, int]]:
    """``log q_d(. | o, Z)`` with ``agent`` placed on every free cell (the other agent on its start,
    no diamond collected): ``[n_Z, cells, n_z]``, the cells' (row, col) ``[cells, 2]``, and the
    map's (height, width, first room row)."""
    cfg = RunConfig.model_validate(state["config"])
    probe = make_env(cfg.env.name, 1, "cpu", **cfg.env.test_kwargs())  # the env policy_sampler builds
    free = (~probe._wall).nonzero().squeeze(-1)  # one env per free cell
    probe.close()
    env, sampler = policy_sampler(state, len(free), seed=777)
    W = env.width
    cells = torch.tensor([divmod(int(c), W) for c in free])
    other = torch.tensor(divmod(env._cell["2" if agent == 0 else "1"], W)).expand_as(cells)
    obs = env.set_state(torch.stack([cells, other] if agent == 0 else [other, cells], dim=1))["obs"]
    lq = torch.stack([sampler.policy.disc.log_q_agent(obs, torch.full((len(free),), Z))[:, agent]
                      for Z in range(cfg.hmasd.n_team_skills)])
    dims = (env.height, W, min(env._cell["r"], env._cell["b"]) // W)
    env.close()
    return lq, cells, dims


def discriminator_map(state: dict) -> list[str]:
    """``log q_d(z | o_Alice, Z)`` with Alice placed on every free cell (Bob on his start, no
    diamond collected), per team skill Z and part of the map: the mean over cells of the best
    skill's log-probability (how surely some z owns the cell) and of the worst one's (what a
    skill is paid for entering a cell another skill owns)."""
    if not RunConfig.model_validate(state["config"]).hmasd.hierarchy:
        return []
    lq, cells, (_, W, hall_rows) = _log_q_d_on_every_cell(state, agent=0)
    region = torch.where(cells[:, 0] < hall_rows, 0, torch.where(cells[:, 1] < W // 2, 1, 2))
    lines = ["Z | part | cells | mean best log q_d | mean worst log q_d", "---|---|---|---|---"]
    for Z, lq_Z in enumerate(lq):
        for k, part in enumerate(REGIONS):
            at = region == k
            lines.append(f"{Z} | {part} | {int(at.sum())} | {lq_Z[at].max(-1).values.mean():.2f} | "
                         f"{lq_Z[at].min(-1).values.mean():.2f}")
    return lines


def discriminator_cells(state: dict) -> list[str]:
    """Per agent, the map with the skill ``q_d`` credits on each free cell (argmax over z of
    ``log q_d`` averaged over Z) and that log-probability, ``#`` for walls. A skill can own cells
    it never visits (``q_d`` generalises over similar views): entering them then pays every other
    skill little, whatever object lies there."""
    if not RunConfig.model_validate(state["config"]).hmasd.hierarchy:
        return []
    lines = []
    for agent, name in enumerate(("Alice", "Bob")):
        lq, cells, (H, W, _) = _log_q_d_on_every_cell(state, agent)
        best, owner = lq.mean(0).max(-1)
        grid = [["#"] * W for _ in range(H)]
        for (i, j), z, b in zip(cells.tolist(), owner.tolist(), best.tolist()):
            grid[i][j] = f"{z}:{b:+.1f}"
        lines += [f"{name} (z:log q_d)"] + [" ".join(f"{c:>6}" for c in row) for row in grid] + [""]
    return lines[:-1]


def greedy_table(state: dict, episodes: int = 200, seed: int = 12345) -> list[str]:
    """Test success of a checkpoint with the argmax at neither, each and both levels (HMASD with
    its hierarchy; none for flat MAPPO)."""
    if not RunConfig.model_validate(state["config"]).hmasd.hierarchy:
        return []
    lines = ["argmax at | success | red collected | blue collected | length", "---|---|---|---|---"]
    for name, level in (("neither (both sampled)", False), ("the coordinator only", "high"),
                        ("the discoverer only", "low"), ("both", True)):
        r = evaluate(state, episodes=episodes, deterministic=level, seed=seed)
        lines.append(f"{name} | {r['success_rate']:.3f} | {r['red_collected_rate']:.3f} | "
                     f"{r['blue_collected_rate']:.3f} | {r['length_mean']:.1f}")
    return lines


def window_stats(cols: dict[str, torch.Tensor]) -> list[dict]:
    """Per skill window j of the first episode of every env in one rollout (all envs fresh at
    t=0): ``episodes`` (how many reached window j), ``choices`` ``[episodes, 1+n]`` (Z, z_1..n),
    and ``red`` / ``blue``, how many episodes collected that diamond during window j."""
    start, done = cols["h_start"], cols["terminated"] | cols["truncated"]
    alive = torch.cumsum(done.int(), 0) - done.int() == 0  # [T, N] step t belongs to the first episode
    window = torch.cumsum((start & alive).int(), 0) - 1  # [T, N] window index within that episode
    now = cols["obs.state"][..., 4:6] > 0.5  # [T, N, 2] red / blue collected before step t
    # ... and after it: the episode's final observation where it ended (the next one is a reset).
    after = next_inputs(cols["obs.state"], cols["last_obs.state"], cols["final_obs.state"], done)[..., 4:6] > 0.5
    got = ~now & after
    out = []
    for j in range(int(window.max()) + 1):
        at = start & alive & (window == j)  # one True per env that reached window j
        in_j = (alive & (window == j))[..., None]
        red, blue = (got & in_j).any(0).sum(0).tolist()
        out.append({"episodes": int(at.sum()), "red": red, "blue": blue,
                    "choices": torch.stack([cols["skill_team"][at], *cols["skill_agent"][at].unbind(-1)], -1)})
    return out


@torch.no_grad()
def plan_table(state: dict, n_envs: int = 256, top: int = 3) -> list[str]:
    """How the coordinator composes skills: for the j-th skill window of an episode (the first
    episode of ``n_envs`` fresh envs, both levels sampled), the most frequent ``(Z, z_Alice,
    z_Bob)`` choices with their share of the episodes that reached window j, and in how many of
    those episodes the red / blue diamond was collected during that window."""
    cfg = RunConfig.model_validate(state["config"])
    if not cfg.hmasd.hierarchy:
        return []
    _, (cols,) = _sampled(state, 1, n_envs)
    lines = ["window | episodes | most frequent (Z, z_Alice, z_Bob) | red collected in it | blue collected in it",
             "---|---|---|---|---"]
    for j, w in enumerate(window_stats(cols)):
        n = w["episodes"]
        combos, counts = w["choices"].unique(dim=0, return_counts=True)
        shown = ", ".join(f"({', '.join(map(str, combos[i].tolist()))}) {100 * counts[i].item() / n:.0f}%"
                          for i in counts.argsort(descending=True)[:top])
        lines.append(f"{j + 1} | {n} | {shown} | {100 * w['red'] / n:.0f}% | {100 * w['blue'] / n:.0f}%")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="small", choices=sorted(GEOMETRY))
    ap.add_argument("--steps", type=int, default=150_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=["hmasd", "mappo"], choices=sorted(CONFIGS))
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every run (after the preset and the map geometry), repeatable")
    ap.add_argument("--checkpoint", default=None, metavar="RUN",
                    help="only print the skill and plan tables of an existing HMASD run (run dir, checkpoints dir or file)")
    ap.add_argument("--hall-trace", default=None, metavar="RUN_DIR",
                    help="only print the start-hall share at every checkpoint kept in RUN_DIR/checkpoints")
    ap.add_argument("--test-env", action="append", default=[], metavar="KWARG=VALUE",
                    help="env kwarg for the test episodes only (repeatable; wins over the run's env.eval_kwargs), "
                         "e.g. random_start=true")
    ap.add_argument("--quiet", action="store_true", help="no training progress lines on stderr")
    ap.add_argument("--keep", action="store_true",
                    help="keep the runs' directories (final checkpoints, for --checkpoint) instead of deleting them")
    args = ap.parse_args()
    if args.hall_trace is not None:
        found = sorted(Path(args.hall_trace, "checkpoints").glob("ckpt-v*.rlck"))
        if not found:
            raise SystemExit(f"bench_hmasd: no checkpoints in {Path(args.hall_trace, 'checkpoints')}")
        print("\n".join(hall_trace(found)))
        return
    if args.checkpoint is not None:
        from rl_system.resume import find_resume

        found = find_resume(args.checkpoint, load_config(None), None)
        state = with_env_kwargs(found.state, args.test_env)
        print(f"skills of {found.path} (v{state['learner']['version']}; share of the steps under z on "
              "each object cell and in each part of the map, both levels sampled):")
        print("\n".join(skill_table(state)))
        print("\nhow the coordinator composes them (first episode of 256 fresh envs, both levels sampled):")
        print("\n".join(plan_table(state)))
        print("\nwhat the actors do (both levels sampled; entropy in nats):")
        print("\n".join(actor_table(state)))
        print("\nhow surely q_d tells Alice's skills apart, by where she stands:")
        print("\n".join(discriminator_map(state)))
        print("\nwhich skill q_d credits on each cell, with the other agent on its start (z:log q_d, mean over Z):")
        print("\n".join(discriminator_cells(state)))
        greedy = greedy_table(state)
        if greedy:
            print("\ntest success by the level taking the argmax (200 episodes, `rl-system eval` seed 12345):")
            print("\n".join(greedy))
        return
    check_configs(args)
    root = Path(tempfile.mkdtemp(prefix="bench_hmasd_"))
    try:
        report(args, root)
    finally:
        if args.keep:
            print(f"\nruns kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def check_configs(args: argparse.Namespace) -> None:
    """Every method's config with the overrides, and with the test env kwargs, builds an env and
    a policy: a typo is one line now rather than a traceback after a 20-minute run."""
    from rl_system.config import ConfigError, build_config
    from rl_system.startup import probe_specs

    for method in args.methods:
        try:
            cfg = bench_config(method, args.size, args.overrides)
            probe_specs(cfg)
            if args.test_env:
                probe_specs(build_config(with_env_kwargs({"config": cfg.model_dump()}, args.test_env)["config"]))
        except (ConfigError, ValueError) as err:
            raise SystemExit(f"bench_hmasd: {method}: {err}") from None


def report(args: argparse.Namespace, root: Path) -> None:
    """Train every (method, seed) under ``root`` and print the tables."""
    rows = []
    print(f"Alice_and_Bob size={args.size}, budget {args.steps:,} env steps, target train success >= {args.target}"
          + (f", overrides {' '.join(args.overrides)}" if args.overrides else "")
          + (f", tested with {' '.join(args.test_env)}" if args.test_env else ""))
    print("method | seed | steps to target | time to target s | env steps | wall s | steps/s | train success | "
          "test success | test success (argmax) | test length | best.json at env steps | best.json test success")
    print("---|---|---|---|---|---|---|---|---|---|---|---|---")
    for method in args.methods:
        for seed in args.seeds:
            r = run_one(method, seed, args.size, args.steps, args.target, root, args.overrides, args.test_env,
                        args.quiet)
            rows.append(r)
            stt = f"{r['steps_to_target']:,}" if r["steps_to_target"] else "not reached"
            ttt = f"{r['time_to_target_s']:.0f}" if r["time_to_target_s"] else "-"
            print(f"{method} | {seed} | {stt} | {ttt} | {r['env_steps']:,} | {r['wall_s']:.0f} | "
                  f"{r['steps_per_s']:,.0f} | {r['train_success']:.2f} | {r['test_success']:.3f} | "
                  f"{r['test_success_argmax']:.3f} | {r['test_length']:.1f} | {r['best_steps']:,} | "
                  f"{r['best_test_success']:.3f}", flush=True)
    print("\nmethod | runs reaching target | median steps to target | mean test success | mean test success (argmax) | "
          "mean best.json test success")
    print("---|---|---|---|---|---")
    for method in args.methods:
        rs = [r for r in rows if r["method"] == method]
        hit = [r["steps_to_target"] for r in rs if r["steps_to_target"]]
        med = f"{statistics.median(hit):,.0f}" if hit else "-"
        print(f"{method} | {len(hit)}/{len(rs)} | {med} | {statistics.mean(r['test_success'] for r in rs):.3f} | "
              f"{statistics.mean(r['test_success_argmax'] for r in rs):.3f} | "
              f"{statistics.mean(r['best_test_success'] for r in rs):.3f}")
    for r in rows:
        table = skill_table(r["state"]) if r["method"] == "hmasd" else []
        if table:
            print(f"\nskills of hmasd seed {r['seed']} (share of the steps under z spent on each object cell, "
                  "both levels sampled):")
            print("\n".join(table))
            print("\nhow its coordinator composes them (first episode of 256 fresh envs, both levels sampled):")
            print("\n".join(plan_table(r["state"])))
            break


if __name__ == "__main__":
    main()
