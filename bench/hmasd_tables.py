"""What a trained HMASD checkpoint does on Alice_and_Bob, as markdown tables (``python -m
bench.bench_hmasd --checkpoint RUN`` prints them; the bench prints the first two after each run).

* ``skill_table``: per agent and individual skill z, the share of its steps on each button and
  diamond cell and in the start hall / left / right half of the map;
* ``plan_table`` (with ``window_stats``): which ``(Z, z_Alice, z_Bob)`` the coordinator picks in
  each skill window of an episode and which diamond is collected in it;
* ``actor_table``: action shares, entropy and cells reached per (agent, z);
* ``discriminator_map`` / ``discriminator_cells``: how surely ``q_d`` tells the skills apart on
  each part of the map, and which skill it credits on each cell;
* ``greedy_table``: test success with the argmax at neither, one or both levels;
* ``hall_trace``: the start-hall share at every kept checkpoint of a run.

All of them sample the checkpoint's *test* env (``env.kwargs`` updated with ``env.eval_kwargs``)
from fixed seeds, so the same checkpoint gives the same tables.
"""

from __future__ import annotations

from pathlib import Path

import torch

from rl_system.algos.hmasd.returns import next_inputs
from rl_system.checkpoint import keys
from rl_system.config import RunConfig
from rl_system.envs import make_env
from rl_system.policy.evaluation import evaluate, policy_sampler

OBJECTS = {"r": "red button", "b": "blue button", "R": "red diamond", "B": "blue diamond"}
REGIONS = ("hall", "left half", "right half")


def _sampled(state: dict, rollouts: int, n_envs: int = 64):
    """``(env, [rollout columns])`` of a checkpoint's policy sampling both levels as in
    training, from a fresh seeded env batch (the same tables every time)."""
    env, sampler = policy_sampler(state, n_envs, seed=777)
    return env, [sampler.collect(deterministic=False)[0] for _ in range(rollouts)]


@torch.no_grad()
def skill_table(state: dict, rollouts: int = 3) -> list[str]:
    """Share of steps each (agent, z) spends on each object cell and in each part of the map (the
    start hall: rows above the buttons; the left and right halves below it, i.e. the rooms of the
    default and large maps), from rollouts that sample both levels as in training (so every
    skill the coordinator still picks shows up)."""
    cfg = RunConfig.model_validate(state[keys.CONFIG])
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
        z, n_z = cols["skill_agent"], RunConfig.model_validate(state[keys.CONFIG]).hmasd.n_agent_skills
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
    from rl_system.envs.alice_bob import N_ACTIONS

    if not RunConfig.model_validate(state[keys.CONFIG]).hmasd.hierarchy:
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
    cfg = RunConfig.model_validate(state[keys.CONFIG])
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
    if not RunConfig.model_validate(state[keys.CONFIG]).hmasd.hierarchy:
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
    if not RunConfig.model_validate(state[keys.CONFIG]).hmasd.hierarchy:
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
    if not RunConfig.model_validate(state[keys.CONFIG]).hmasd.hierarchy:
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
    cfg = RunConfig.model_validate(state[keys.CONFIG])
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
