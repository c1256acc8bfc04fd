"""Tests for the batched lidar navigation env (``rl_system.envs.navigation``)."""

from __future__ import annotations

import math

import pytest
import torch

from rl_system.envs import make_env
from rl_system.envs.base import Box
from rl_system.envs.navigation import ELEVATIONS_DEG, LIDAR_RANGE, N_BEAMS, NavigationVecEnv

FAR = -1.0e4
E0 = ELEVATIONS_DEG.index(0.0)


def random_actions(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.rand((n, 3), generator=gen) * 2 - 1


def empty_scene(env: NavigationVecEnv, pos=(10.0, 10.0, 2.0), goal=(18.0, 10.0, 2.0)) -> dict:
    """All obstacles parked far away, robot at ``pos`` heading (goal frame) toward ``goal``."""
    n = env.num_envs
    cyl = torch.zeros(n, env.num_static, 4)
    cyl[..., 0:2] = FAR
    cyl[..., 2] = 0.5
    cyl[..., 3] = 2.0
    dyn_pos = torch.full((n, env.num_dynamic, 3), FAR)
    return dict(pos=torch.tensor(pos).expand(n, 3), vel=torch.zeros(n, 3), goal=torch.tensor(goal).expand(n, 3),
                cyl=cyl, dyn_pos=dyn_pos, dyn_vel=torch.zeros(n, env.num_dynamic, 3))


def test_spec_conformance_and_registry():
    env = make_env("Navigation", 7, seed=0)
    assert isinstance(env, NavigationVecEnv)
    assert isinstance(env.action_spec, Box) and env.action_spec.shape == (3,)
    expected = {"state": (8,), "lidar": (1, 36, 4), "direction": (2,), "dynamic_obstacle": (5, 10)}
    assert {k: s.shape for k, s in env.observation_spec.items()} == expected
    obs = env.reset()
    res = env.step(torch.zeros(7, 3))
    for o in (obs, res.obs, res.final_obs):
        assert set(o) == set(expected)
        for key, spec in env.observation_spec.items():
            assert tuple(o[key].shape) == (7, *spec.shape) and o[key].dtype == spec.dtype, key
    assert res.reward.shape == (7,) and res.reward.dtype == torch.float32
    for t in (res.terminated, res.truncated, res.info["success"], res.info["collision"]):
        assert t.shape == (7,) and t.dtype == torch.bool
    d = obs["direction"]
    torch.testing.assert_close(d.norm(dim=1), torch.ones(7))
    torch.testing.assert_close(obs["state"][:, :3].norm(dim=1), torch.ones(7))
    assert (obs["lidar"] >= 0).all() and (obs["lidar"] <= LIDAR_RANGE).all()


def test_lidar_single_cylinder_known_distance():
    env = NavigationVecEnv(2, seed=0, num_static=3, num_dynamic=2)
    env.reset()
    scene = empty_scene(env)
    # Env 0: a cylinder (r=0.5, h=3) centred 3 m ahead (toward the goal) -> surface at 2.5 m.
    scene["cyl"][0, 1] = torch.tensor([13.0, 10.0, 0.5, 3.0])
    # Env 1: goal frame rotated by 90 deg (goal in +y); cylinder 2 m ahead, r=0.3 -> surface 1.7 m.
    scene["goal"] = torch.tensor([[18.0, 10.0, 2.0], [10.0, 18.0, 2.0]])
    scene["cyl"][1, 2] = torch.tensor([10.0, 12.0, 0.3, 3.0])
    obs = env.set_state(**scene)
    lidar = obs["lidar"][:, 0]  # [N, 36, 4]
    assert lidar[0, 0, E0].item() == pytest.approx(LIDAR_RANGE - 2.5, abs=1e-3)
    assert lidar[1, 0, E0].item() == pytest.approx(LIDAR_RANGE - 1.7, abs=1e-3)
    # Tilted beams hit the same cylinder (top at 3 m is above the rays at 2.5 / 1.7 m): d / cos.
    for e, deg in enumerate(ELEVATIONS_DEG):
        expect = LIDAR_RANGE - 2.5 / math.cos(math.radians(deg))
        assert lidar[0, 0, e].item() == pytest.approx(expect, abs=1e-3)
    # Beams pointing away see nothing: the arena walls are 10 m away and floor/ceiling too far
    # for the shallow beams; only the -10 deg beams can see the floor (2 / tan 10deg = 11.3 m: no).
    assert (lidar[0, 9:28] == 0).all() and (lidar[1, 9:28] == 0).all()


def test_lidar_cylinder_top_floor_and_wall():
    env = NavigationVecEnv(1, seed=0, num_static=1, num_dynamic=1)
    env.reset()
    scene = empty_scene(env, pos=(10.0, 10.0, 2.0))
    # Low cylinder (h=1) 2 m ahead: the horizontal beam (z=2) passes over it; the -10 deg beam
    # descends to z=1 at t = 1/tan(10deg) = 5.67 m > exit, so it misses too.
    scene["cyl"][0, 0] = torch.tensor([12.0, 10.0, 0.5, 1.0])
    obs = env.set_state(**scene)
    assert (obs["lidar"][0, 0, 0] == 0).all()
    # Robot low (z=0.3) and close to the wall at x=20 (1.5 m ahead), no cylinders.
    scene = empty_scene(env, pos=(18.5, 10.0, 0.3), goal=(19.5, 10.0, 0.3))
    obs = env.set_state(**scene)
    lid = obs["lidar"][0, 0]
    assert lid[0, E0].item() == pytest.approx(LIDAR_RANGE - 1.5, abs=1e-3)
    floor = 0.3 / math.tan(math.radians(10.0))  # 1.70 m horizontally > 1.5 m wall: wall first
    assert lid[0, 0].item() == pytest.approx(LIDAR_RANGE - 1.5 / math.cos(math.radians(10.0)), abs=1e-3)
    # Backward (beam 18), -10 deg: floor at horizontal 1.70 m.
    assert lid[18, 0].item() == pytest.approx(LIDAR_RANGE - floor / math.cos(math.radians(10.0)), abs=1e-3)
    assert lid[18, E0].item() == 0.0
    # Top cap: robot above a wide cylinder's top, the -10 deg beam hits the top face.
    scene = empty_scene(env, pos=(10.0, 10.0, 2.0))
    scene["cyl"][0, 0] = torch.tensor([12.5, 10.0, 1.0, 1.8])  # side at 1.5 m, top at z=1.8
    obs = env.set_state(**scene)
    # The -10 deg ray is at z=1.8 after 1.134 m (still outside), so it enters the side at 1.5 m.
    t_top = 0.2 / math.tan(math.radians(10.0))
    cos10 = math.cos(math.radians(10.0))
    assert obs["lidar"][0, 0, 0, 0].item() == pytest.approx(LIDAR_RANGE - 1.5 / cos10, abs=1e-3)
    scene["cyl"][0, 0] = torch.tensor([11.5, 10.0, 1.0, 1.8])  # robot horizontally inside radius, above top
    obs = env.set_state(**scene)
    assert obs["lidar"][0, 0, 0, 0].item() == pytest.approx(LIDAR_RANGE - t_top / cos10, abs=1e-3)  # top face


def test_goal_and_collision_termination_and_auto_reset():
    env = NavigationVecEnv(4, seed=1, num_static=2, num_dynamic=2)
    env.reset()
    scene = empty_scene(env)
    pos = torch.tensor([[10.0, 10.0, 2.0]] * 4)
    goal = torch.tensor([[18.0, 10.0, 2.0]] * 4)
    goal[0] = torch.tensor([10.3, 10.0, 2.0])  # env 0: goal 0.3 m ahead -> success now
    scene["cyl"][1, 0] = torch.tensor([10.6, 10.0, 0.5, 3.0])  # env 1: inside the cylinder margin
    pos[2, 2] = 0.25  # env 2: hits the floor when moving down
    scene["dyn_pos"][3, 1] = torch.tensor([10.0, 10.3, 2.0])  # env 3: moving obstacle on top of it
    scene["dyn_size"] = torch.tensor([0.4, 0.4, 1.0]).expand(4, 2, 3)
    scene.update(pos=pos, goal=goal)
    before = env.set_state(**scene)
    action = torch.zeros(4, 3)
    action[2, 2] = -1.0
    res = env.step(action)
    assert res.terminated.tolist() == [True, True, True, True]
    assert res.info["success"].tolist() == [True, False, False, False]
    assert res.info["collision"].tolist() == [False, True, True, True]
    assert res.reward[0] > 9.0 and (res.reward[1:] < -9.0).all()
    # Auto-reset: fresh layouts, final_obs is the last obs of the old episode.
    torch.testing.assert_close(res.final_obs["state"][0, 3], before["state"][0, 3], atol=1e-5, rtol=0)
    assert (res.obs["state"][:, 3] > 5.0).all()  # new start/goal are far apart
    assert (env.state_dict()["steps"] == 0).all()


def test_auto_reset_only_done_envs_and_truncation():
    env = NavigationVecEnv(3, seed=2, num_static=2, num_dynamic=1, max_steps=3)
    env.reset()
    scene = empty_scene(env)
    scene["goal"] = torch.tensor([[10.3, 10.0, 2.0], [18.0, 10.0, 2.0], [18.0, 10.0, 2.0]])
    env.set_state(**scene)
    before = env.state_dict()
    res = env.step(torch.zeros(3, 3))
    assert res.terminated.tolist() == [True, False, False]
    after = env.state_dict()
    assert not torch.equal(after["goal"][0], before["goal"][0])  # env 0 got a new layout
    torch.testing.assert_close(after["goal"][1:], before["goal"][1:])
    torch.testing.assert_close(after["cyl"][1:], before["cyl"][1:])
    assert torch.equal(res.obs["lidar"][1:], res.final_obs["lidar"][1:])
    assert after["steps"].tolist() == [0, 1, 1]
    env.step(torch.zeros(3, 3))
    res = env.step(torch.zeros(3, 3))
    assert res.truncated.tolist() == [False, True, True]
    assert not res.terminated[1:].any()


def test_deterministic_seeding_and_state_dict():
    def rollout(env: NavigationVecEnv, steps: int) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(5)
        out = []
        for _ in range(steps):
            r = env.step(random_actions(env.num_envs, gen))
            out += [r.obs["lidar"], r.obs["dynamic_obstacle"], r.reward]
        return out

    a, b = NavigationVecEnv(16, seed=3), NavigationVecEnv(16, seed=3)
    torch.testing.assert_close(a.reset(), b.reset())
    for x, y in zip(rollout(a, 60), rollout(b, 60)):
        assert torch.equal(x, y)
    c = NavigationVecEnv(16, seed=4)
    assert not torch.equal(c.reset()["state"], a.reset(seed=3)["state"])
    # state_dict round trip continues bit-exactly.
    a.reset(seed=9)
    rollout(a, 10)
    snap = a.state_dict()
    ref = rollout(a, 30)
    d = NavigationVecEnv(16, seed=123)
    d.reset()
    d.load_state_dict(snap)
    for x, y in zip(ref, rollout(d, 30)):
        assert torch.equal(x, y)


def test_no_nan_random_rollout():
    env = NavigationVecEnv(64, seed=7)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    episodes = 0
    for _ in range(60):  # 64 * 60 = 3840 env steps
        r = env.step(random_actions(64, gen))
        for o in (r.obs, r.final_obs):
            for v in o.values():
                assert torch.isfinite(v).all()
        assert torch.isfinite(r.reward).all()
        assert (r.obs["lidar"] >= 0).all() and (r.obs["lidar"] <= LIDAR_RANGE).all()
        done = r.terminated | r.truncated
        episodes += int(done.sum())
    assert episodes > 0  # random actions collide sooner or later


def test_reset_layout_keeps_start_and_goal_clear():
    env = NavigationVecEnv(256, seed=11)
    env.reset()
    s = env.state_dict()
    for key in ("pos", "goal"):
        horiz = (s["cyl"][..., :2] - s[key][:, None, :2]).norm(dim=2) - s["cyl"][..., 2]
        assert (horiz > 0.99).all()
    assert ((s["dyn_pos"] - s["pos"][:, None]).norm(dim=2) > 2.99).float().mean() > 0.99
    res = env.step(torch.zeros(256, 3))
    assert not res.info["collision"].any()


def march_lidar(pos: torch.Tensor, yaw: float, cyl: torch.Tensor, arena: float, step: float = 1e-3) -> torch.Tensor:
    """Brute-force reference for one env: march every ray in ``step`` increments ([36, 4])."""
    from rl_system.envs.navigation import CEILING

    az = yaw + torch.arange(N_BEAMS, dtype=torch.float64) * (2 * math.pi / N_BEAMS)
    el = torch.tensor(ELEVATIONS_DEG, dtype=torch.float64).deg2rad()
    dirs = torch.stack([torch.cos(az)[:, None] * torch.cos(el), torch.sin(az)[:, None] * torch.cos(el),
                        torch.sin(el).expand(N_BEAMS, -1)], -1)  # [B, E, 3]
    ts = torch.arange(0, LIDAR_RANGE + step, step, dtype=torch.float64)
    pts = pos.double() + ts[:, None, None, None] * dirs  # [T, B, E, 3]
    cyl = cyl.double()
    inside = ((pts[..., None, :2] - cyl[:, :2]).norm(dim=-1) <= cyl[:, 2]) & (pts[..., None, 2] <= cyl[:, 3]) \
        & (pts[..., None, 2] >= 0)
    blocked = inside.any(-1) | (pts[..., 2] <= 0) | (pts[..., 2] >= CEILING) \
        | (pts[..., :2] <= 0).any(-1) | (pts[..., :2] >= arena).any(-1)
    first = torch.where(blocked.any(0), blocked.float().argmax(0).double() * step,
                        torch.full(blocked.shape[1:], LIDAR_RANGE + 1, dtype=torch.float64))
    return (LIDAR_RANGE - first).clamp(0, LIDAR_RANGE).float()


def test_lidar_matches_ray_marching_on_random_scenes():
    env = NavigationVecEnv(3, seed=21, num_static=24, arena=10.0)
    env.reset()
    gen = torch.Generator().manual_seed(1)
    r = env.step(random_actions(3, gen) * 0.3)
    s = env.state_dict()
    cylinder_hits = 0
    for i in range(3):
        ref = march_lidar(s["pos"][i], float(s["yaw"][i]), s["cyl"][i], env.arena, step=2e-3)
        torch.testing.assert_close(r.obs["lidar"][i, 0], ref, atol=3e-3, rtol=0)
        no_cyl = march_lidar(s["pos"][i], float(s["yaw"][i]), s["cyl"][i, :0], env.arena, step=2e-3)
        cylinder_hits += int((ref > no_cyl + 0.01).sum())
    assert cylinder_hits > 20  # the scenes do exercise the cylinder ray-cast


def test_action_is_a_velocity_command_in_the_goal_frame():
    env = NavigationVecEnv(2, seed=0, num_static=1, num_dynamic=1)
    env.reset()
    scene = empty_scene(env)
    scene["goal"] = torch.tensor([[18.0, 10.0, 2.0], [10.0, 18.0, 2.0]])  # goal frame x = world +x / +y
    env.set_state(**scene)
    for _ in range(30):  # 3 s: the first-order lag (tau 0.2 s) has converged
        res = env.step(torch.tensor([[1.0, 0.0, 0.0]] * 2))
    vel = env.state_dict()["vel"]
    torch.testing.assert_close(vel, torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]), atol=1e-4, rtol=0)
    # Both see themselves flying straight at the goal: velocity along the goal frame's x.
    torch.testing.assert_close(res.obs["state"][:, 5:8], torch.tensor([[2.0, 0.0, 0.0]] * 2), atol=1e-4, rtol=0)
    assert (res.reward > 0.19).all()  # progress: ~0.2 m per 0.1 s step


# Easy setting for the learning test: a 10 m arena, 4 cylinders, 1 moving obstacle, 10 s episodes.
# Reference points (bench/bench_navigation.py --baselines --set arena=10.0 num_static=4
# num_dynamic=1 max_steps=100): uniform random actions succeed in 0% of the episodes, flying
# straight at the goal in ~68%. This budget reached 0.85-0.96 (deterministic) with seeds 0, 1, 2.
EASY = {"arena": 10.0, "num_static": 4, "num_dynamic": 1, "max_steps": 100}


def _random_action_success(episodes: int = 200) -> float:
    env = NavigationVecEnv(100, seed=5, **EASY)
    env.reset()
    gen = torch.Generator().manual_seed(5)
    succ = done_n = 0
    while done_n < episodes:
        r = env.step(random_actions(100, gen))
        done = r.terminated | r.truncated
        succ += int((done & r.info["success"]).sum())
        done_n += int(done.sum())
    return succ / done_n


@pytest.mark.slow
def test_ppo_learns_to_reach_the_goal_on_an_easy_layout(ray_session, tmp_path):
    """Real Ray, the example config's model and PPO settings, 120k env steps (~40 s on 2 cores):
    the trained policy reaches the goal in most episodes, random actions never do."""
    from rl_system.checkpoint import load_checkpoint
    from rl_system.config import load_config
    from rl_system.policy.evaluation import evaluate
    from rl_system.run.loop import train

    cfg = load_config("launch/configs/navigation_ppo.yaml", [
        f"env.kwargs={EASY}".replace("'", '"'), "workers.num_envs=128", "workers.rollout_len=16",
        "max_env_steps=120000", "checkpoint.every_rounds=0", "tensorboard=false", "log_every_s=30"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary.status == "completed" and summary.env_steps >= 120000, summary
    state, _ = load_checkpoint(summary.checkpoints.last_path)
    result = evaluate(state, episodes=200, deterministic=True, num_envs=100)
    baseline = _random_action_success()
    assert baseline < 0.05, baseline
    assert result["episodes"] == 200 and result["success_rate"] >= 0.7, (result, baseline)
