"""Tests for the batched Alice_and_Bob env (``rl_system.envs.alice_bob``) and its PettingZoo view."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_system.envs import make_env
from rl_system.envs.alice_bob import (
    DOWN,
    LAYOUTS,
    LEFT,
    N_ACTIONS,
    RIGHT,
    STAY,
    UP,
    AliceBobVecEnv,
    oracle_actions,
    parse_layout,
)
from rl_system.envs.base import AgentDiscrete

# Small layout (rows, cols):          Alice 1 at (1,2), Bob 2 at (1,4)
#   #######                           red button r (1,1), blue button b (1,5)
#   #r1#2b#                           blue diamond B (3,1), red diamond R (3,5)
#   #.....#                           door in the middle wall at (2,3)
#   #B.#.R#
#   #######
SOLVE_SMALL = [(LEFT, DOWN), (STAY, DOWN), (STAY, RIGHT), (DOWN, UP), (DOWN, UP)]


def act(*pairs: tuple[int, int]) -> torch.Tensor:
    return torch.tensor(pairs, dtype=torch.int64)


def place(env: AliceBobVecEnv, alice, bob, collected=(False, False)):
    n = env.num_envs
    positions = torch.tensor([[alice, bob]] * n)
    return env.set_state(positions, torch.tensor([collected] * n))


def reference_obs(env: AliceBobVecEnv, pos, flags) -> np.ndarray:
    """Per-agent observation of one env written out cell by cell (the slow, obvious way)."""
    rows, r, k = env.layout, env.view_radius, env.view_size
    h, w = env.height, env.width
    out = np.zeros((2, env.obs_dim), dtype=np.float32)
    for a in range(2):
        (i, j), (oi, oj) = pos[a], pos[1 - a]
        for di in range(-r, r + 1):
            for dj in range(-r, r + 1):
                ci, cj = i + di, j + dj
                cell = (di + r) * k + (dj + r)
                inside = 0 <= ci < h and 0 <= cj < w
                ch = rows[ci][cj] if inside else "#"
                out[a, cell] = ch == "#"
                out[a, k * k + cell] = ch == "r"
                out[a, 2 * k * k + cell] = ch == "b"
                out[a, 3 * k * k + cell] = ch == "R" and not flags[0]
                out[a, 4 * k * k + cell] = ch == "B" and not flags[1]
                out[a, 5 * k * k + cell] = (ci, cj) == (oi, oj)
        base = 6 * k * k
        out[a, base:base + 6] = [i / (h - 1), j / (w - 1), flags[0], flags[1], a == 0, a == 1]
    return out


# ------------------------------------------------------------------ spec and observations


def test_spec_conformance_and_registry():
    env = make_env("AliceBob", 5, seed=0, size="small")
    assert isinstance(env, AliceBobVecEnv) and env.num_agents == 2
    assert env.action_spec == AgentDiscrete(N_ACTIONS, 2) and env.action_spec.shape == (2,)
    assert {k: s.shape for k, s in env.observation_spec.items()} == {"state": (7,), "obs": (2, 156)}
    obs = env.reset()
    res = env.step(torch.zeros(5, 2, dtype=torch.int64))
    for o in (obs, res.obs, res.final_obs):
        assert set(o) == {"state", "obs"}
        for key, spec in env.observation_spec.items():
            assert tuple(o[key].shape) == (5, *spec.shape) and o[key].dtype == spec.dtype, key
            assert (o[key] >= spec.low).all() and (o[key] <= spec.high).all(), key
    assert res.reward.shape == (5,) and res.reward.dtype == torch.float32
    for t in (res.terminated, res.truncated, *res.info.values()):
        assert t.shape == (5,) and t.dtype == torch.bool
    assert set(res.info) == {"success", "red_collected", "blue_collected"}
    # Default map and view radius; other radii change O = 6 K^2 + 6.
    assert AliceBobVecEnv(1).layout == LAYOUTS["default"] and AliceBobVecEnv(1).max_episode_steps == 100
    assert AliceBobVecEnv(1, view_radius=0).obs_dim == 12
    assert AliceBobVecEnv(1, view_radius=3).observation_spec["obs"].shape == (2, 6 * 49 + 6)


@pytest.mark.parametrize("size,radius", [("small", 2), ("small", 0), ("default", 2), ("large", 1), ("default", 4)])
def test_observation_matches_cell_by_cell_reference(size, radius):
    n = 64
    env = AliceBobVecEnv(n, size=size, view_radius=radius, random_start=True, seed=1)
    env.reset()
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        # Random agent cells (shared cells included) and random collected flags (never both).
        spawn = env._spawn_cells[torch.randint(0, env._spawn_cells.numel(), (n, 2), generator=gen)]
        spawn[: n // 8, 1] = spawn[: n // 8, 0]
        positions = torch.stack([spawn // env.width, spawn % env.width], dim=-1)
        flags = torch.randint(0, 3, (n,), generator=gen)
        collected = torch.stack([flags == 1, flags == 2], dim=1)
        obs = env.set_state(positions, collected, steps=torch.full((n,), 7))
        for e in range(n):
            pos = positions[e].tolist()
            ref = reference_obs(env, pos, collected[e].tolist())
            np.testing.assert_array_equal(obs["obs"][e].numpy(), ref)
            (ai, aj), (bi, bj) = pos
            h, w = env.height - 1, env.width - 1
            expected_state = [ai / h, aj / w, bi / h, bj / w, *collected[e].float().tolist(),
                              7 / env.max_episode_steps]
            torch.testing.assert_close(obs["state"][e], torch.tensor(expected_state))


def test_without_own_position_only_the_position_scalars_change():
    n = 16
    with_pos = AliceBobVecEnv(n, random_start=True, seed=3)
    without = AliceBobVecEnv(n, random_start=True, seed=3, own_position=False)
    a, b = with_pos.reset(), without.reset()
    kk = with_pos.view_size ** 2
    pos_cols = slice(6 * kk, 6 * kk + 2)
    assert (b["obs"][..., pos_cols] == 0).all() and (a["obs"][..., pos_cols] > 0).any()
    keep = torch.ones(with_pos.obs_dim, dtype=torch.bool)
    keep[pos_cols] = False
    assert torch.equal(a["obs"][..., keep], b["obs"][..., keep]) and torch.equal(a["state"], b["state"])


# ------------------------------------------------------------------ movement and the diamond rule


def test_walls_and_grid_edge_block_moves():
    env = AliceBobVecEnv(1, size="small")
    env.reset()
    # Alice at (1,2): up is the outer wall, right the middle wall; Bob at (1,4): up wall, left wall.
    env.step(act((UP, UP)))
    assert env.positions[0].tolist() == [[1, 2], [1, 4]]
    env.step(act((RIGHT, LEFT)))
    assert env.positions[0].tolist() == [[1, 2], [1, 4]]
    env.step(act((DOWN, DOWN)))
    env.step(act((RIGHT, LEFT)))  # both into the doorway (2,3): agents may share a cell
    assert env.positions[0].tolist() == [[2, 3], [2, 3]]
    env.step(act((UP, DOWN)))  # walls above and below the door
    assert env.positions[0].tolist() == [[2, 3], [2, 3]]
    # A map without a wall border: the grid edge blocks too.
    open_env = AliceBobVecEnv(1, layout=["1r.", "2R.", "bB."])
    open_env.reset()
    open_env.step(act((UP, LEFT)))
    assert open_env.positions[0].tolist() == [[0, 0], [1, 0]]
    open_env.set_state(torch.tensor([[[2, 2], [0, 2]]]))
    open_env.step(act((DOWN, RIGHT)))
    assert open_env.positions[0].tolist() == [[2, 2], [0, 2]]


def test_diamond_needs_its_own_button_held():
    env = AliceBobVecEnv(1, size="small", max_episode_steps=None)
    # Bob on the red diamond, Alice nowhere near the red button: nothing, however long he waits.
    place(env, alice=(2, 2), bob=(3, 5))
    for _ in range(5):
        res = env.step(act((STAY, STAY)))
        assert not res.info["red_collected"][0] and res.reward[0] == 0 and not res.terminated[0]
    # Alice on the *blue* button while Bob stands on the red diamond: still nothing.
    place(env, alice=(1, 5), bob=(3, 5))
    res = env.step(act((STAY, STAY)))
    assert not res.info["red_collected"][0] and not res.info["blue_collected"][0]
    # Alice on the blue button, Bob walking onto the blue diamond is what collects blue.
    place(env, alice=(1, 5), bob=(3, 2))
    res = env.step(act((STAY, LEFT)))
    assert res.info["blue_collected"][0] and not res.info["red_collected"][0]
    assert res.reward[0] == 0 and not res.terminated[0]
    # Bob waiting on the red diamond: collected on the step Alice reaches the red button.
    place(env, alice=(1, 2), bob=(3, 5))
    res = env.step(act((STAY, STAY)))
    assert not res.info["red_collected"][0]
    res = env.step(act((LEFT, STAY)))
    assert res.info["red_collected"][0] and res.reward[0] == 0 and not res.terminated[0]
    # The collected diamond is gone from the observations and stays collected off the button.
    k2 = env.view_size ** 2
    assert res.obs["obs"][0, :, 3 * k2:4 * k2].sum() == 0 and res.obs["state"][0, 4] == 1
    res = env.step(act((RIGHT, UP)))
    assert env.collected[0].tolist() == [True, False]
    # A lone agent standing on a button and then on its diamond collects nothing.
    place(env, alice=(1, 1), bob=(2, 4))
    env.step(act((DOWN, STAY)))
    res = env.step(act((DOWN, STAY)))  # Alice onto the blue diamond, nobody on the blue button
    assert env.collected[0].tolist() == [False, False]


def test_scripted_solution_rewards_only_on_success():
    env = AliceBobVecEnv(2, size="small")
    env.reset()
    rewards, collected = [], []
    for t, pair in enumerate(SOLVE_SMALL):
        res = env.step(act(pair, pair))
        rewards.append(res.reward[0].item())
        collected.append((res.info["red_collected"][0].item(), res.info["blue_collected"][0].item()))
        assert res.terminated.tolist() == [t == 4] * 2 and not res.truncated.any()
        assert res.info["success"].tolist() == [t == 4] * 2
    assert rewards == [0, 0, 0, 0, 1.0]
    assert collected == [(False, False), (False, False), (True, False), (True, False), (True, True)]
    # The episode ended on the last step: auto-reset to the start, flags cleared.
    assert env.positions[0].tolist() == [[1, 2], [1, 4]] and env.collected.sum() == 0
    assert env.episode_steps.tolist() == [0, 0]
    # The reward value is a parameter.
    env = AliceBobVecEnv(1, size="small", success_reward=10.0)
    env.reset()
    for pair in SOLVE_SMALL:
        res = env.step(act(pair))
    assert res.reward.tolist() == [10.0]


@pytest.mark.parametrize("size,limit", [("small", 5), ("default", 19), ("large", 32)])
@pytest.mark.parametrize("random_start", [False, True])
def test_oracle_solves_every_layout(size, limit, random_start):
    n = 16
    env = AliceBobVecEnv(n, size=size, random_start=random_start, seed=3)
    env.reset()
    solved = torch.zeros(n, dtype=torch.bool)
    lengths = torch.zeros(n, dtype=torch.int64)
    for t in range(1, env.max_episode_steps + 1):
        res = env.step(oracle_actions(env))
        assert not (res.truncated & ~solved).any(), "oracle ran into the time limit"
        assert (res.reward == res.terminated.float()).all()
        lengths = torch.where(res.terminated & ~solved, t, lengths)
        solved |= res.terminated
        if solved.all():
            break
    assert solved.all()
    if not random_start:
        assert (lengths == limit).all()  # the scripted route's length from the map's start cells


@pytest.mark.parametrize("size,optimum", [("small", 5), ("default", 19)])
def test_documented_optimum_is_the_joint_shortest_plan(size, optimum):
    """Breadth-first search over the joint state (both cells, collected flags) with the env's own
    move and collection tables: the oracle's route length is the true optimum."""
    env = AliceBobVecEnv(1, size=size)
    move, kind, collect = env._move.view(-1, N_ACTIONS).tolist(), env._kind.tolist(), env._collect.tolist()
    start = (*env._start.tolist(), 0)
    frontier, seen, depth = [start], {start}, 0
    while frontier:
        depth += 1
        nxt = []
        for a, b, f in frontier:
            for x in range(N_ACTIONS):
                for y in range(N_ACTIONS):
                    na, nb = move[a][x], move[b][y]
                    state = (na, nb, f | collect[kind[na] | kind[nb]])
                    if state[2] == 3:
                        assert depth == optimum
                        return
                    if state not in seen:
                        seen.add(state)
                        nxt.append(state)
        frontier = nxt
    raise AssertionError("unsolvable")


def test_random_policy_rarely_but_sometimes_succeeds_on_small():
    env = AliceBobVecEnv(512, size="small", seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    successes = episodes = 0
    for _ in range(60):
        res = env.step(torch.randint(0, N_ACTIONS, (512, 2), generator=gen))
        done = res.terminated | res.truncated
        episodes += int(done.sum())
        successes += int(res.info["success"].sum())
        assert (res.reward[res.info["success"]] == 1).all() and (res.reward[~res.info["success"]] == 0).all()
    assert episodes > 0 and 0 < successes < episodes


# ------------------------------------------------------------------ auto-reset, seeding, state capture


@pytest.mark.parametrize("sync_free", [False, True])
def test_auto_reset_only_finished_envs(sync_free):
    env = AliceBobVecEnv(3, size="small", max_episode_steps=30)
    env._sync_free_reset = sync_free  # the accelerator code path, exercised on CPU
    env.reset()
    probe = AliceBobVecEnv(1, size="small")
    for t, pair in enumerate(SOLVE_SMALL):
        # Env 0 solves, env 1 stays put, env 2 follows env 0 one step behind.
        third = SOLVE_SMALL[t - 1] if t > 0 else (STAY, STAY)
        before = env.positions
        res = env.step(act(pair, (STAY, STAY), third))
    assert res.terminated.tolist() == [True, False, False]
    # Env 0: obs is the start obs again, final_obs the obs of the solved state.
    start = probe.reset()
    for key in ("state", "obs"):
        torch.testing.assert_close(res.obs[key][0], start[key][0], rtol=0, atol=0)
    solved_pos = torch.tensor([[[3, 1], [1, 5]]])
    solved = probe.set_state(solved_pos, torch.tensor([[True, False]]), steps=torch.tensor([5]))
    solved["obs"][0, :, 6 * 25 + 3] = 1.0  # blue collected too, which set_state cannot express:
    solved["obs"][0, :, 4 * 25:5 * 25] = 0.0  # flag set, blue diamond gone from the windows
    solved["state"][0, 5] = 1.0
    for key in ("state", "obs"):
        torch.testing.assert_close(res.final_obs[key][0], solved[key][0], rtol=0, atol=0)
    # Envs 1 and 2 are untouched: obs == final_obs, positions continue.
    for key in ("state", "obs"):
        torch.testing.assert_close(res.obs[key][1:], res.final_obs[key][1:], rtol=0, atol=0)
    assert env.positions[1:].tolist() == [[[1, 2], [1, 4]], [[2, 1], [2, 5]]]
    assert before[2].tolist() == [[1, 1], [3, 5]]
    assert env.episode_steps.tolist() == [0, 5, 5]
    # Truncation: all envs hit the limit together; terminated stays False, reset happens.
    env = AliceBobVecEnv(2, size="small", max_episode_steps=3)
    env._sync_free_reset = sync_free
    env.reset()
    for t in range(3):
        res = env.step(act((DOWN, DOWN), (DOWN, DOWN)))
    assert res.truncated.all() and not res.terminated.any() and not res.info["success"].any()
    assert (res.final_obs["state"][:, 6] == 1.0).all() and (res.obs["state"][:, 6] == 0).all()
    assert env.positions.tolist() == [[[1, 2], [1, 4]]] * 2


@pytest.mark.parametrize("sync_free", [False, True])
def test_seeding_is_deterministic(sync_free):
    def run(seed):
        env = AliceBobVecEnv(32, size="default", random_start=True, seed=seed, max_episode_steps=10)
        env._sync_free_reset = sync_free
        out = [env.reset()["state"].clone()]
        gen = torch.Generator().manual_seed(0)
        for _ in range(25):
            res = env.step(torch.randint(0, N_ACTIONS, (32, 2), generator=gen))
            out.append(res.obs["obs"].clone())
        return out

    a, b, c = run(7), run(7), run(8)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    # Random starts: two distinct free cells, never on a wall, button or diamond.
    env = AliceBobVecEnv(4096, size="small", random_start=True, seed=0)
    env.reset()
    cells = env.positions
    assert (cells[:, 0] != cells[:, 1]).any(-1).all()
    chars = {env.layout[i][j] for i, j in cells.reshape(-1, 2).tolist()}
    assert chars <= {".", "1", "2"}
    assert len({tuple(p) for p in cells.reshape(-1, 2).tolist()}) == 9  # every free floor cell is used
    # reset(seed) reseeds; fixed starts ignore the generator entirely.
    env2 = AliceBobVecEnv(4096, size="small", random_start=True, seed=123)
    assert torch.equal(env2.reset(seed=0)["state"], AliceBobVecEnv(4096, size="small", random_start=True,
                                                                 seed=0).reset()["state"])


@pytest.mark.parametrize("sync_free", [False, True])
def test_random_start_episodes_ends_exploring_starts_per_env_index(sync_free):
    n = 512
    env = AliceBobVecEnv(n, size="default", random_start=True, random_start_episodes=2, seed=4,
                         max_episode_steps=1)
    env._sync_free_reset = sync_free
    start = [[list(env._where["1"]), list(env._where["2"])]] * n
    stay = torch.zeros((n, 2), dtype=torch.int64)
    env.reset()  # episode 1 of every env: random
    assert env.positions.tolist() != start
    env.step(stay)  # episode 2: random
    assert env.positions.tolist() != start
    for _ in range(3):  # episodes 3, 4, 5: the map's cells, also after a full reset
        env.step(stay)
        assert env.positions.tolist() == start
    env.reset()
    assert env.positions.tolist() == start
    # Envs that finish early move on early: a fresh batch where only env 0 ends its first episode.
    env = AliceBobVecEnv(4, size="default", random_start=True, random_start_episodes=1, seed=4)
    env.reset()
    env.set_state(env.positions, steps=torch.tensor([99, 0, 0, 0]))
    env.step(torch.zeros((4, 2), dtype=torch.int64))
    assert env.positions[0].tolist() == start[0] and env.state_dict()["episodes"].tolist() == [2, 1, 1, 1]
    with pytest.raises(ValueError, match="random_start_episodes"):
        AliceBobVecEnv(4, random_start=True, random_start_episodes=-1)
    assert AliceBobVecEnv(4, random_start_episodes=3).reset()  # ignored without random_start


def test_state_dict_round_trip_continues_bit_exactly():
    # Episodes begin at steps 0, 15, 30, 45: the fourth starts on the map's cells, after the snapshot.
    kw = dict(size="default", random_start=True, random_start_episodes=3, max_episode_steps=15)
    env = AliceBobVecEnv(64, seed=5, **kw)
    env.reset()
    gen = torch.Generator().manual_seed(1)
    actions = [torch.randint(0, N_ACTIONS, (64, 2), generator=gen) for _ in range(60)]
    for a in actions[:23]:
        env.step(a)
    snapshot = env.state_dict()
    assert set(snapshot) == {"pos", "flags", "steps", "episodes", "generator"}

    def tail(e):
        out = []
        for a in actions[23:]:
            r = e.step(a)
            out.append((r.obs["state"].clone(), r.obs["obs"].clone(), r.final_obs["obs"].clone(),
                        r.reward.clone(), r.terminated.clone(), r.truncated.clone(), r.info["success"].clone()))
        return out

    expected = tail(env)
    resumed = AliceBobVecEnv(64, seed=999, **kw)  # a different seed: the state dict must override it
    resumed.load_state_dict(snapshot)
    got = tail(resumed)
    assert any(bool(step[5].any()) for step in expected)  # resets (random draws) happened after the snapshot
    for x, y in zip(expected, got):
        assert all(torch.equal(p, q) for p, q in zip(x, y))
    with pytest.raises(ValueError):
        AliceBobVecEnv(8, **kw).load_state_dict(snapshot)


# ------------------------------------------------------------------ validation


def test_bad_input_raises():
    env = AliceBobVecEnv(2, size="small")
    with pytest.raises(RuntimeError):
        env.step(torch.zeros(2, 2, dtype=torch.int64))
    env.reset()
    with pytest.raises(ValueError):
        env.step(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(TypeError):
        env.step(torch.zeros(2, 2))
    with pytest.raises(ValueError):
        env.step(torch.full((2, 2), N_ACTIONS, dtype=torch.int64))
    with pytest.raises(ValueError):
        env.step(torch.full((2, 2), -1, dtype=torch.int64))
    env.step(torch.ones(2, 2, dtype=torch.int32))  # other integer dtypes are accepted
    with pytest.raises(ValueError):
        env.set_state(torch.tensor([[[0, 0], [1, 2]]] * 2))  # on a wall
    with pytest.raises(ValueError):
        place(env, (1, 2), (1, 4), collected=(True, True))
    with pytest.raises(ValueError):
        AliceBobVecEnv(1, size="huge")
    with pytest.raises(ValueError):
        AliceBobVecEnv(0)
    with pytest.raises(ValueError):
        AliceBobVecEnv(1, view_radius=-1)
    with pytest.raises(ValueError):
        parse_layout(["#r1#", "#b2#", "#R.#"])  # no blue diamond
    with pytest.raises(ValueError):
        AliceBobVecEnv(1, layout=["1r#.B", "2R#.b"])  # blue objects unreachable


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_with_fixed_starts():
    kw = dict(size="default", max_episode_steps=20)
    cpu, gpu = AliceBobVecEnv(256, **kw), AliceBobVecEnv(256, device="cuda", **kw)
    cpu.reset()
    gpu.reset()
    gen = torch.Generator().manual_seed(0)
    for t in range(60):
        a = torch.randint(0, N_ACTIONS, (256, 2), generator=gen)
        if t % 3 == 0:
            a = oracle_actions(cpu)
        rc, rg = cpu.step(a), gpu.step(a.cuda())
        for key in ("state", "obs"):
            assert torch.equal(rc.obs[key], rg.obs[key].cpu())
            assert torch.equal(rc.final_obs[key], rg.final_obs[key].cpu())
        assert torch.equal(rc.reward, rg.reward.cpu()) and torch.equal(rc.terminated, rg.terminated.cpu())


# ------------------------------------------------------------------ PettingZoo view


def test_pettingzoo_parallel_api():
    pytest.importorskip("pettingzoo")
    from pettingzoo.test import parallel_api_test, parallel_seed_test

    from rl_system.envs.pettingzoo_view import PettingZooParallelView, parallel_env

    env = parallel_env("AliceBob", seed=0, size="small")
    assert env.possible_agents == ["alice", "bob"]
    parallel_api_test(env, num_cycles=200)
    parallel_api_test(parallel_env(size="default", random_start=True, view_radius=1), num_cycles=500)
    parallel_seed_test(lambda: parallel_env(size="small", random_start=True), num_cycles=100)

    # Generic: any multi-agent VecEnv with num_envs == 1; unnamed agents get agent_<i>.
    generic = PettingZooParallelView(AliceBobVecEnv(1, size="small"), agent_names=["agent_0", "agent_1"])
    assert generic.possible_agents == ["agent_0", "agent_1"]
    with pytest.raises(ValueError):
        PettingZooParallelView(AliceBobVecEnv(2, size="small"))


def test_pettingzoo_view_plays_the_scripted_solution():
    pytest.importorskip("pettingzoo")
    from rl_system.envs.pettingzoo_view import parallel_env

    env = parallel_env(size="small", render_mode="ansi")
    obs, infos = env.reset(seed=0)
    assert set(obs) == {"alice", "bob"} and set(infos) == {"alice", "bob"}
    for agent in env.agents:
        assert env.observation_space(agent).contains(obs[agent])
    assert env.state_space.contains(env.state())
    assert env.render().splitlines()[1] == "#rA#Cb#"
    for t, (a, b) in enumerate(SOLVE_SMALL):
        assert env.agents == ["alice", "bob"]
        obs, rew, term, trunc, info = env.step({"alice": a, "bob": b})
        assert rew == {"alice": float(t == 4), "bob": float(t == 4)}
        assert term == {"alice": t == 4, "bob": t == 4} and not any(trunc.values())
        assert info["alice"]["success"] == (t == 4)
    assert env.agents == []
    # The last observation is the solved state's (not the internal auto-reset one).
    assert obs["alice"][-4] == 1.0 and obs["alice"][-3] == 1.0 and env.state()[4:6].tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError):
        env.step({"alice": 0, "bob": 0})
    obs, _ = env.reset()
    assert env.agents == ["alice", "bob"] and obs["alice"][-4] == 0.0
    with pytest.raises(ValueError):
        env.step({"alice": 0})
