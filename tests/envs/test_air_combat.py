"""Tests of the batched 2D air-combat env (``rl_system.envs.air_combat``)."""

from __future__ import annotations

import math

import pytest
import torch

from rl_system.envs import make_env
from rl_system.envs.air_combat import (
    ACTION_STRAIGHT_FULL,
    BLUE,
    MISSILE_MAX_TOF_S,
    MISSILE_MIN_SPEED,
    N_DISCRETE_ACTIONS,
    OBS_DIM,
    OUTCOME_LOSS,
    OUTCOME_WIN,
    RED,
    V_STALL,
    V_TERMINAL,
    AirCombatVecEnv,
    turn_rate_limit,
)
from rl_system.envs.air_combat.rewards import PursuitShaping, RewardModule
from rl_system.envs.base import Box, Discrete

FIRE_STRAIGHT_FULL = 6 + ACTION_STRAIGHT_FULL


@pytest.fixture(autouse=True)
def _one_thread():
    # These batches are small; intra-op threads only add overhead (and contention on 2 cores).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class StraightFlyer:
    """Opponent that never turns or fires (discrete action 3)."""

    def act(self, obs):
        assert obs["obs"].shape[1] == OBS_DIM
        return torch.full((obs["obs"].shape[0],), ACTION_STRAIGHT_FULL, dtype=torch.int64)


def _random_actions(n, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, N_DISCRETE_ACTIONS, (steps, n), generator=g)


def _place(env, red=(0.0, 0.0, 0.0, 300.0), blue=(10_000.0, 0.0, 0.0, 300.0)):
    """Put red/blue at (x, y, heading, speed) in every env, no missiles in flight."""
    s = env.state_dict()
    for side, (x, y, h, v) in enumerate((red, blue)):
        s["x"][:, side], s["y"][:, side], s["heading"][:, side], s["speed"][:, side] = x, y, h, v
    s["m_active"].zero_()
    s["cooldown"].zero_()
    env.load_state_dict(s)


def test_registry_and_spec_conformance():
    env = make_env("AirCombat", num_envs=8, seed=0)
    assert isinstance(env, AirCombatVecEnv)
    assert env.action_spec == Discrete(N_DISCRETE_ACTIONS)
    obs = env.reset()
    assert set(obs) == set(env.observation_spec) == {"obs", "action_mask"}
    for key, spec in env.observation_spec.items():
        assert obs[key].shape == (8, *spec.shape) and obs[key].dtype == spec.dtype
    assert obs["action_mask"].dtype == torch.bool
    res = env.step(torch.zeros(8, dtype=torch.int64))
    for o in (res.obs, res.final_obs):
        for key, spec in env.observation_spec.items():
            assert o[key].shape == (8, *spec.shape) and o[key].dtype == spec.dtype
    assert res.reward.shape == (8,) and res.reward.dtype == torch.float32
    assert res.terminated.dtype == torch.bool and res.truncated.dtype == torch.bool
    assert res.info["outcome"].dtype == torch.int8 and res.info["outcome"].shape == (8,)

    cont = AirCombatVecEnv(4, seed=0, action_type="continuous")
    assert isinstance(cont.action_spec, Box) and cont.action_spec.shape == (3,)
    obs = cont.reset()
    assert set(obs) == {"obs"}
    res = cont.step(torch.tensor([[1.0, 1.0, 1.0]] * 4))
    assert torch.isfinite(res.obs["obs"]).all()
    assert (cont.state_dict()["left"][:, 0] == 5).all()  # fire > 0.5 launched one missile each


def test_auto_reset_only_done_envs():
    env = AirCombatVecEnv(4, seed=3, opponent=StraightFlyer())
    twin = AirCombatVecEnv(4, seed=3, opponent=StraightFlyer())
    env.reset(), twin.reset()
    for e in (env, twin):
        e.step(torch.full((4,), ACTION_STRAIGHT_FULL))
    # A red missile sitting on blue's position in env 2 only.
    s = env.state_dict()
    s["m_active"][2, 0, 0] = True
    s["m_x"][2, 0, 0], s["m_y"][2, 0, 0] = s["x"][2, 1], s["y"][2, 1]
    s["m_speed"][2, 0, 0] = 800.0
    s["m_cos"][2, 0, 0], s["m_sin"][2, 0, 0] = s["heading"][2, 1].cos(), s["heading"][2, 1].sin()
    env.load_state_dict(s)
    a = torch.full((4,), ACTION_STRAIGHT_FULL)
    res, ref = env.step(a), twin.step(a)
    assert res.terminated.tolist() == [False, False, True, False]
    assert res.info["outcome"][2] == OUTCOME_WIN and res.reward[2] == 1.0
    assert not torch.equal(res.final_obs["obs"][2], res.obs["obs"][2])
    assert res.obs["obs"][2, 4] == 1.0 and res.obs["obs"][2, 15] == 0.0  # fresh: 6 left, none flying
    assert 20_000 / 50_000 <= res.obs["obs"][2, 5] <= 40_000 / 50_000
    others = [0, 1, 3]
    assert torch.equal(res.obs["obs"][others], ref.obs["obs"][others])
    assert torch.equal(res.obs["obs"][others], res.final_obs["obs"][others])
    assert (res.reward[others] == 0).all()


def test_turn_rate_within_lift_limit_and_speed_bounds():
    n, steps = 64, 600
    env = AirCombatVecEnv(n, seed=1, time_scale=1.0)  # one sub-step per step
    env.reset()
    actions = _random_actions(n, steps)
    worst = 0.0
    for t in range(steps):
        if t % 60 == 0:  # hold each random action for a second, so turns get tight
            a = actions[t]
        h0, v0 = env._heading[:, 0].clone(), env._speed[:, 0].clone()
        res = env.step(a)
        live = ~(res.terminated | res.truncated)
        dh = torch.remainder(env._heading[:, 0] - h0 + math.pi, 2 * math.pi) - math.pi
        rate = dh.abs() / env.dt
        limit = turn_rate_limit(v0)
        assert (rate[live] <= limit[live] * (1 + 1e-3) + 1e-5).all()
        worst = max(worst, float((rate[live] / limit[live]).max()))
        assert (env._speed >= V_STALL - 1e-3).all() and (env._speed <= V_TERMINAL + 1e-3).all()
    assert worst > 0.99  # the limit is actually reached
    # The lift limit is below the commanded rate at high speed, and turning bleeds speed.
    assert turn_rate_limit(torch.tensor(550.0)) < turn_rate_limit(torch.tensor(250.0))


def test_turning_bleeds_energy():
    env = AirCombatVecEnv(2, seed=0, opponent=StraightFlyer())
    env.reset()
    _place(env, red=(0.0, 0.0, 0.0, 400.0), blue=(-90_000.0, 0.0, math.pi, 400.0))
    straight, hard_turn = ACTION_STRAIGHT_FULL, 1  # rudder -1, full throttle
    for _ in range(300):
        env.step(torch.tensor([straight, hard_turn]))
    v = env._speed[:, 0]
    assert v[1] < v[0] - 30.0


@pytest.mark.parametrize("blue_heading", [0.0, math.pi / 2])  # fleeing, crossing
def test_missile_pn_hits_non_maneuvering_target(blue_heading):
    env = AirCombatVecEnv(1, seed=0, time_scale=2.0, opponent=StraightFlyer())
    env.reset()
    _place(env, red=(0.0, 0.0, 0.0, 300.0), blue=(10_000.0, 0.0, blue_heading, 300.0))
    res = env.step(torch.tensor([FIRE_STRAIGHT_FULL]))
    assert env._m_active[0, 0, 0]
    for _ in range(int(MISSILE_MAX_TOF_S / env.dt)):
        if res.terminated[0] or res.truncated[0]:
            break
        res = env.step(torch.tensor([ACTION_STRAIGHT_FULL]))
    assert res.terminated[0] and res.info["outcome"][0] == OUTCOME_WIN and res.reward[0] == 1.0


def test_missile_self_destructs_when_slow_or_old():
    env = AirCombatVecEnv(1, seed=0, opponent=StraightFlyer())
    env.reset()
    _place(env, red=(0.0, 0.0, 0.0, 300.0), blue=(200_000.0, 0.0, 0.0, 300.0))
    s = env.state_dict()
    s["m_active"][0, 0, :3] = True
    s["m_speed"][0, 0, :3] = torch.tensor([MISSILE_MIN_SPEED - 1, 1000.0, MISSILE_MIN_SPEED - 1])
    s["m_tof"][0, 0, :3] = torch.tensor([20.0, MISSILE_MAX_TOF_S - 1e-3, 1.0])  # slot 2 still burning
    env.load_state_dict(s)
    env.step(torch.tensor([ACTION_STRAIGHT_FULL]))
    assert env._m_active[0, 0, :3].tolist() == [False, False, True]

    # A missile fired at an unreachable target dies on its own, without a hit.
    env = AirCombatVecEnv(1, seed=0, time_scale=8.0, opponent=StraightFlyer())
    env.reset()
    _place(env, red=(0.0, 0.0, 0.0, 300.0), blue=(60_000.0, 0.0, 0.0, 600.0))
    env.step(torch.tensor([FIRE_STRAIGHT_FULL]))
    for _ in range(int((MISSILE_MAX_TOF_S + 1) / env.dt)):
        if not env._m_active[0, 0, 0]:
            break
        speed, tof = float(env._m_speed[0, 0, 0]), float(env._m_tof[0, 0, 0])
        res = env.step(torch.tensor([ACTION_STRAIGHT_FULL]))
        assert not res.terminated[0]
    assert not env._m_active[0, 0, 0]
    assert tof <= MISSILE_MAX_TOF_S + env.dt
    assert speed < MISSILE_MIN_SPEED + 10.0 or tof > MISSILE_MAX_TOF_S - env.dt


@pytest.mark.parametrize("time_scale", [0.5, 1.0, 4.0, 8.0])
def test_time_scale_stability(time_scale):
    n = 32
    env = AirCombatVecEnv(n, seed=7, time_scale=time_scale)
    steps = 800 if env.substeps == 1 else 500  # 800-2000 physics sub-steps (67 s of sim at x8)
    env.reset()
    actions = _random_actions(n, steps, seed=2)
    for t in range(steps):
        res = env.step(actions[t])
        if t % 100 == 0:
            assert torch.isfinite(res.obs["obs"]).all() and torch.isfinite(res.reward).all()
    for key in ("x", "y", "speed", "heading", "m_x", "m_y", "m_speed", "m_cos", "m_sin"):
        assert torch.isfinite(getattr(env, "_" + key)).all(), key
    assert (env._speed >= V_STALL - 1e-3).all() and (env._speed <= V_TERMINAL + 1e-3).all()
    assert (env._m_speed <= 1500.0).all()
    assert env.dt / env.substeps <= 1 / 30 + 1e-9


def test_deterministic_seeding():
    actions = _random_actions(16, 100, seed=5)

    def run(seed):
        env = AirCombatVecEnv(16, seed=seed, time_scale=4.0)
        out = [env.reset()["obs"]]
        for a in actions:
            r = env.step(a)
            out += [r.obs["obs"], r.reward]
        return torch.cat([o.flatten() for o in out])

    assert torch.equal(run(11), run(11))
    assert not torch.equal(run(11), run(12))
    env = AirCombatVecEnv(16, seed=11)
    first = env.reset()["obs"]
    env.step(actions[0])
    assert torch.equal(env.reset(seed=11)["obs"], first)
    assert not torch.equal(env.reset()["obs"], first)


def test_fire_masked_without_missiles_and_during_cooldown():
    env = AirCombatVecEnv(2, seed=0, opponent=StraightFlyer())
    obs = env.reset()
    assert obs["action_mask"].all()
    s = env.state_dict()
    s["left"][0, 0] = 0
    env.load_state_dict(s)
    res = env.step(torch.tensor([FIRE_STRAIGHT_FULL, FIRE_STRAIGHT_FULL]))
    mask = res.obs["action_mask"]
    assert not mask[0, 6:].any() and mask[0, :6].all()
    assert not env._m_active[0].any() and env._left[0, 0] == 0  # the illegal fire was ignored
    assert env._m_active[1, 0, 0] and env._left[1, 0] == 5
    assert not mask[1, 6:].any()  # cooldown right after a launch


def test_scripted_opponent_beats_do_nothing_red():
    n = 48
    env = AirCombatVecEnv(n, seed=4, time_scale=8.0)
    env.reset()
    outcome = torch.zeros(n, dtype=torch.int8)
    finished = torch.zeros(n, dtype=torch.bool)
    a = torch.full((n,), ACTION_STRAIGHT_FULL)
    for _ in range(env.max_steps):
        res = env.step(a)
        new = (res.terminated | res.truncated) & ~finished
        outcome[new] = res.info["outcome"][new]
        finished |= new
        if finished.all():
            break
    assert finished.all()
    assert (outcome == OUTCOME_LOSS).float().mean() > 0.8


def test_reward_modules_are_added():
    assert isinstance(PursuitShaping(), RewardModule)
    actions = _random_actions(8, 50, seed=9)
    plain = AirCombatVecEnv(8, seed=2)
    shaped = AirCombatVecEnv(8, seed=2, reward_modules=[PursuitShaping(closing_coef=10.0, pointing_coef=0.01)])
    plain.reset(), shaped.reset()
    diff = 0.0
    for a in actions:
        r0, r1 = plain.step(a), shaped.step(a)
        assert torch.equal(r0.obs["obs"], r1.obs["obs"])
        extra = r1.reward - r0.reward
        assert torch.isfinite(extra).all() and (extra.abs() < 0.1).all()
        diff += float(extra.abs().sum())
    assert diff > 0


def test_state_dict_round_trip():
    actions = _random_actions(8, 40, seed=1)
    env = AirCombatVecEnv(8, seed=0)
    env.reset()
    for a in actions[:20]:
        env.step(a)
    state = env.state_dict()
    a_rewards = [env.step(a).obs["obs"] for a in actions[20:]]
    other = AirCombatVecEnv(8, seed=99)
    other.reset()
    other.load_state_dict(state)
    b_rewards = [other.step(a).obs["obs"] for a in actions[20:]]
    assert all(torch.equal(x, y) for x, y in zip(a_rewards, b_rewards))


def test_info_win_matches_outcome():
    n = 48
    env = AirCombatVecEnv(n, seed=4, time_scale=8.0)
    env.reset()
    actions = _random_actions(n, 400, seed=3)
    finished = 0
    for a in actions:
        res = env.step(a)
        win = res.info["win"]
        assert win.dtype == torch.bool and win.shape == (n,)
        done = res.terminated | res.truncated
        assert torch.equal(win[done], res.info["outcome"][done] == OUTCOME_WIN)
        assert not win[~done].any()
        finished += int(done.sum())
    assert finished > 0


class RecordingOpponent:
    """Flies straight at full throttle (callable form); records the observations it was given."""

    def __init__(self):
        self.seen = []

    def __call__(self, obs):
        self.seen.append({k: v.clone() for k, v in obs.items()})
        return torch.full((obs["obs"].shape[0],), ACTION_STRAIGHT_FULL, dtype=torch.int64)


def test_set_opponent_at_runtime_gets_mirrored_obs():
    n = 16
    env = AirCombatVecEnv(n, seed=6, time_scale=4.0)
    env.reset()
    actions = _random_actions(n, 120, seed=4)
    for a in actions[:20]:
        env.step(a)
    opp = RecordingOpponent()
    env.set_opponent(opp)
    for t, a in enumerate(actions[20:]):
        expected = env.observe(BLUE)  # blue's observation of the current state, before the step
        env.step(a)
        got = opp.seen[-1]
        assert set(got) == {"obs", "action_mask"}
        assert torch.allclose(got["obs"], expected["obs"], atol=1e-6)
        assert torch.equal(got["action_mask"], expected["action_mask"])
    assert len(opp.seen) == 100 and all(o["obs"].shape == (n, OBS_DIM) for o in opp.seen)
    # Mirrored: blue's own range/closure equal red's, its own-state entries are blue's state.
    red, blue = env.observe(RED), env.observe(BLUE)
    assert torch.allclose(red["obs"][:, 5], blue["obs"][:, 5]) and torch.allclose(red["obs"][:, 8], blue["obs"][:, 8])
    assert torch.allclose(blue["obs"][:, 0], env._speed[:, BLUE] / V_TERMINAL)
    # Back to the scripted opponent; an object with act() works too.
    env.set_opponent(None)
    assert env.opponent == "scripted"
    env.step(actions[0])
    assert len(opp.seen) == 100
    env.set_opponent(StraightFlyer())
    env.step(actions[1])
    with pytest.raises(TypeError):
        env.set_opponent(42)
    with pytest.raises(ValueError):
        env.set_opponent("nonsense")


def test_observe_rows_and_fresh_obs_match_full_batch():
    env = AirCombatVecEnv(32, seed=8, time_scale=8.0)
    env.reset()
    for a in _random_actions(32, 300, seed=6):
        res = env.step(a)
        rows = torch.tensor([0, 5, 31])
        for side in (RED, BLUE):
            full, sub = env.observe(side), env.observe(side, rows)
            assert torch.allclose(full["obs"][rows], sub["obs"], atol=1e-6)
            assert torch.equal(full["action_mask"][rows], sub["action_mask"])
        # The observation returned for just-reset envs equals the generic one.
        assert torch.allclose(res.obs["obs"], env.observe(RED)["obs"], atol=1e-6)
        assert torch.equal(res.obs["action_mask"], env.observe(RED)["action_mask"])


def test_scripted_opponent_evades_close_missiles():
    def blue_turn(evade_range):
        env = AirCombatVecEnv(1, seed=0, opponent="scripted", scripted_evade_range_m=evade_range)
        env.reset()
        # Blue heads straight at red (red dead ahead, slightly to its left), a red missile 5 km
        # in front of blue, coming at it.
        _place(env, red=(0.0, 0.0, 0.0, 300.0), blue=(30_000.0, 100.0, math.pi, 300.0))
        s = env.state_dict()
        s["m_active"][0, 0, 0] = True
        s["m_x"][0, 0, 0], s["m_y"][0, 0, 0], s["m_speed"][0, 0, 0] = 25_000.0, 100.0, 900.0
        s["m_cos"][0, 0, 0], s["m_sin"][0, 0, 0] = 1.0, 0.0
        s["left"][0, 0] = 5
        env.load_state_dict(s)
        env.step(torch.tensor([ACTION_STRAIGHT_FULL]))
        return float(env.state_dict()["rudder"][0, BLUE])

    assert abs(blue_turn(0.0)) < 0.5      # pure pursuit: red is nearly dead ahead
    assert abs(blue_turn(12_000.0)) == 1.0  # evading: full rudder to turn tail


def test_reward_modules_from_config_specs():
    from rl_system.envs.air_combat.rewards import FireDisciplineShaping, MissileEvasionShaping, build_reward_modules

    mods = build_reward_modules(["pursuit", {"name": "fire_discipline", "cost": 0.1}, {"name": "missile_evasion"},
                                 PursuitShaping(closing_coef=2.0)])
    assert [type(m) for m in mods] == [PursuitShaping, FireDisciplineShaping, MissileEvasionShaping, PursuitShaping]
    assert mods[1].cost == 0.1 and mods[3].closing_coef == 2.0
    with pytest.raises(ValueError, match="unknown reward module"):
        build_reward_modules(["nope"])
    with pytest.raises(TypeError):
        build_reward_modules([3])
    env = make_env("AirCombat", num_envs=8, seed=0, time_scale=8.0,
                   reward_modules=[{"name": "fire_discipline"}, {"name": "missile_evasion"}])
    env.reset()
    res = env.step(torch.full((8,), FIRE_STRAIGHT_FULL))
    assert torch.isfinite(res.reward).all() and (res.reward != 0).all()  # every env launched one


def test_load_state_dict_accepts_missile_heading():
    env = AirCombatVecEnv(2, seed=0, opponent=StraightFlyer())
    env.reset()
    s = env.state_dict()
    del s["m_cos"], s["m_sin"]
    s["m_heading"] = torch.full((2, 2, 6), math.pi / 2)
    env.load_state_dict(s)
    assert torch.allclose(env._m_sin, torch.ones(2, 2, 6)) and env._m_cos.abs().max() < 1e-6


def test_fire_discipline_window_rewards_only_launches_inside_it():
    from rl_system.envs.air_combat import OBS_BEARING_COS, OBS_DIM, OBS_MISSILES_LEFT, OBS_RANGE, RANGE_SCALE_M
    from rl_system.envs.air_combat.rewards import FireDisciplineShaping

    mod = FireDisciplineShaping(cost=0.1, in_range_bonus=0.3, min_range_m=17_000.0, max_range_m=21_000.0,
                                max_off_boresight_rad=0.26)
    ranges_km = torch.tensor([16.0, 17.5, 20.5, 22.0, 19.0, 19.0])
    before = torch.zeros(6, OBS_DIM)
    before[:, OBS_RANGE] = ranges_km * 1000.0 / RANGE_SCALE_M
    before[:, OBS_BEARING_COS] = 1.0
    before[4, OBS_BEARING_COS] = math.cos(0.5)            # in the window but off the nose
    before[:, OBS_MISSILES_LEFT] = 1.0
    after = before.clone()
    after[:5, OBS_MISSILES_LEFT] = 5.0 / 6.0              # env 5 did not launch
    r = mod.compute({"obs": before}, {"obs": after}, torch.zeros(6), torch.zeros(6, dtype=torch.bool), {})
    torch.testing.assert_close(r, torch.tensor([-0.1, 0.3, 0.3, -0.1, -0.1, 0.0]))
    with pytest.raises(ValueError, match="min_range_m"):
        FireDisciplineShaping(min_range_m=30_000.0, max_range_m=20_000.0)


def test_pursuit_floor_stops_rewarding_closing_inside_the_firing_envelope():
    from rl_system.envs.air_combat import OBS_BEARING_COS, OBS_DIM, OBS_RANGE, RANGE_SCALE_M

    mod = PursuitShaping(closing_coef=1.0, pointing_coef=0.5, min_range_m=21_000.0)
    before, after = torch.zeros(3, OBS_DIM), torch.zeros(3, OBS_DIM)
    before[:, OBS_RANGE] = torch.tensor([30.0, 22.0, 20.0]) * 1000.0 / RANGE_SCALE_M   # km
    after[:, OBS_RANGE] = torch.tensor([29.0, 20.0, 19.0]) * 1000.0 / RANGE_SCALE_M
    after[:, OBS_BEARING_COS] = 1.0
    r = mod.compute({"obs": before}, {"obs": after}, torch.zeros(3), torch.zeros(3, dtype=torch.bool), {})
    # 1 km closed outside the floor (+ pointing); only the 1 km down to 21 km counts when crossing
    # it, and no pointing reward below it; nothing at all inside it.
    torch.testing.assert_close(r, torch.tensor([1000.0 / RANGE_SCALE_M + 0.5, 1000.0 / RANGE_SCALE_M, 0.0]))


def test_scripted_opponent_is_beaten_only_by_the_right_manoeuvre():
    from bench.experiments.air_combat_baselines import outcome_rates, random_red, scripted_red

    right = outcome_rates(scripted_red(fire_km=20.0, evade_km=20.0, salvo=1), episodes=200, num_envs=128, time_scale=16.0)
    late = outcome_rates(scripted_red(fire_km=18.0, evade_km=20.0, salvo=1), episodes=200, num_envs=128, time_scale=16.0)
    rand = outcome_rates(random_red, episodes=200, num_envs=128, time_scale=16.0)
    assert right["win"] > 0.9
    assert late["timeout"] > 0.9      # evades blue's 20 km shot before it ever gets its own off
    assert rand["win"] < 0.05 and rand["loss"] > 0.5


def test_entry_points_naming_the_modules_from_before_the_package_still_resolve(monkeypatch):
    """Configs, checkpoints and scripts from before AirCombat became a package name its modules
    ``rl_system.envs.air_combat_<part>`` (and, from before the envs installed under rl_system,
    ``envs.air_combat_<part>``): those entry points load the same objects."""
    import importlib

    from rl_system.envs import MOVED_MODULES, import_entry_point, own_module_name
    from rl_system.envs import render as renderers
    from rl_system.envs.air_combat.render import AirCombatRenderer

    assert len(MOVED_MODULES) == 6  # spec, rewards, envelope, envelope_plot, render, launches
    for old, new in MOVED_MODULES.items():
        assert own_module_name(old) == own_module_name(old.removeprefix("rl_system.")) == new
        importlib.import_module(new)
    assert import_entry_point("rl_system.envs.air_combat_render:AirCombatRenderer", "renderer") is AirCombatRenderer
    assert import_entry_point("envs.air_combat_rewards:PursuitShaping", "reward module") is PursuitShaping
    for name in ("AirCombat", "rl_system.envs.air_combat:AirCombatVecEnv", "envs.air_combat:AirCombatVecEnv"):
        env = make_env(name, num_envs=2, seed=0)
        assert isinstance(env, AirCombatVecEnv)
        env.close()
    monkeypatch.setitem(renderers._RENDERERS, "OldAirCombat", "rl_system.envs.air_combat_render:AirCombatRenderer")
    assert isinstance(renderers.make_renderer("OldAirCombat"), AirCombatRenderer)
