"""The AirCombat missile envelope (``rl_system.envs.air_combat.envelope``), the launch log
(``rl_system.envs.air_combat.launches``) and their commands: ``rl-system air-combat range-map`` and
``rl-system eval RUN --launch-map``. Real env batches, real checkpoints, real PNGs."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from rl_system.cli.main import main
from rl_system.envs.air_combat import ACTION_STRAIGHT_FULL, AirCombatVecEnv
from rl_system.envs.air_combat.envelope import MANOEUVRES, EnvelopeError, SweepSpec, sweep
from rl_system.envs.air_combat.launches import LaunchLog
from rl_system.envs.air_combat.spec import BLUE, RED

FIRE_STRAIGHT_FULL = 6 + ACTION_STRAIGHT_FULL


@pytest.fixture(scope="module")
def wide():
    """Straight and cold targets over the whole reach, three aspects."""
    return sweep(SweepSpec(ranges_km=tuple(float(r) for r in range(4, 64, 4)), aspects_deg=(0.0, 90.0, 180.0),
                           manoeuvres=("straight", "cold"), samples=2))


def test_a_shot_well_inside_the_no_escape_range_hits_against_every_manoeuvre():
    env = sweep(SweepSpec(ranges_km=(3.0, 5.0, 8.0), aspects_deg=(0.0, 45.0, 90.0, 135.0, 180.0),
                          manoeuvres=MANOEUVRES, samples=2))
    assert env.p_hit.shape == (4, 5, 3)
    assert bool((env.p_hit == 1.0).all())
    assert bool((env.tof_s > 0).all()) and bool((env.closing_ms > 0).all())
    assert bool(torch.isnan(env.miss_m).all())                       # no misses to measure


def test_a_shot_beyond_the_kinematic_reach_never_hits():
    env = sweep(SweepSpec(ranges_km=(70.0, 90.0), aspects_deg=(0.0, 90.0, 180.0), manoeuvres=MANOEUVRES,
                          samples=2))
    assert bool((env.p_hit == 0.0).all())
    reach = float(torch.nan_to_num(env.reach_km).max())
    assert 15.0 < reach < 70.0                                       # straight flight until it self-destructs
    assert bool((env.miss_m > 1000.0).all())                         # nowhere near the target


def test_the_envelope_shrinks_as_the_target_aspect_turns_cold(wide):
    r_max, r_ne = wide.r_max_km, wide.r_no_escape_km
    assert float(r_max[0]) > float(r_max[1]) > float(r_max[2])        # hot > beam > cold
    assert float(r_max[0]) > 1.5 * float(r_max[2])
    assert bool((r_ne <= r_max + 4.0).all())                          # turning away never extends the reach
    assert float(r_ne[0]) < float(r_max[0])                           # a hot target that turns cold escapes sooner
    # time of flight grows with range; closing speed at impact falls once the motor has burnt out
    tof = wide.tof_s[0, 0]
    hits = ~torch.isnan(tof)
    assert bool((tof[hits].diff() > 0).all())


def test_the_sweep_is_deterministic_for_a_seed():
    spec = SweepSpec(ranges_km=(10.0, 16.0, 22.0), aspects_deg=(0.0, 120.0), samples=3, seed=7)
    a, b = sweep(spec), sweep(spec)
    for name in ("p_hit", "tof_s", "closing_ms", "miss_m", "edge_km", "reach_km"):
        assert torch.equal(torch.nan_to_num(getattr(a, name)), torch.nan_to_num(getattr(b, name))), name
    other = sweep(SweepSpec(ranges_km=spec.ranges_km, aspects_deg=spec.aspects_deg, samples=3, seed=8))
    assert not torch.equal(torch.nan_to_num(a.tof_s), torch.nan_to_num(other.tof_s))  # other speeds drawn


def test_the_time_scale_is_honoured_and_the_edges_do_not_depend_on_it():
    spec = dict(ranges_km=tuple(float(r) for r in range(6, 30, 2)), aspects_deg=(0.0, 180.0),
                manoeuvres=("straight", "cold"), samples=1)
    fine = sweep(SweepSpec(env_kwargs={"time_scale": 1.0}, **spec))
    coarse = sweep(SweepSpec(env_kwargs={"time_scale": 16.0}, **spec))
    assert fine.dt == pytest.approx(1 / 60) and coarse.dt == pytest.approx(16 / 60)
    assert (fine.substeps, coarse.substeps) == (1, 8)
    finite = ~torch.isnan(coarse.edge_km)
    assert bool(finite.all())
    assert torch.allclose(fine.edge_km[finite], coarse.edge_km[finite], atol=2.0)


def test_the_table_has_every_cell(wide):
    table = wide.to_json()
    assert len(table["cells"]) == 2 * 3 * 15 and table["shots"] == 2 * 3 * 15 * 2
    json.dumps(table)                                                # plain JSON: no NaN, no tensors
    assert set(table["edges_km"]) == {"straight", "cold"}
    assert table["params"]["env_kwargs"] == {"time_scale": 16.0}


@pytest.mark.parametrize("bad", [dict(ranges_km=(20.0, 10.0)), dict(aspects_deg=(0.0, 200.0)),
                                 dict(manoeuvres=("loop",)), dict(samples=0), dict(shooter_speed=(50.0, 300.0)),
                                 dict(ranges_km=tuple(float(r) for r in range(1, 1001)), samples=200)])
def test_a_bad_grid_is_one_error(bad):
    with pytest.raises(EnvelopeError):
        sweep(SweepSpec(**bad))


# ----------------------------------------------------------------------------- the launch log


def _duel(n: int, range_m: float, blue_heading: float) -> AirCombatVecEnv:
    env = AirCombatVecEnv(n, time_scale=16.0, max_time_s=120.0, seed=0,
                          opponent=lambda obs: torch.full((obs["obs"].shape[0],), ACTION_STRAIGHT_FULL))
    env.reset()
    state = env.state_dict()
    state["x"][:] = torch.tensor([0.0, range_m])
    state["y"].zero_()
    state["heading"][:] = torch.tensor([0.0, blue_heading])
    state["speed"].fill_(250.0)
    state["m_active"].zero_()
    state["cooldown"].zero_()
    env.load_state_dict(state)
    env.launch_log = LaunchLog(env)
    return env


def _fly(env: AirCombatVecEnv, fire_steps: set[int], steps: int = 260) -> None:
    for t in range(steps):
        action = FIRE_STRAIGHT_FULL if t in fire_steps else ACTION_STRAIGHT_FULL
        env.step(torch.full((env.num_envs,), action))


def test_the_launch_log_records_the_geometry_and_a_hit():
    env = _duel(1, 6_000.0, math.pi)                                  # blue 6 km ahead, nose on red: hot
    _fly(env, {0}, steps=40)
    rec = env.launch_log.records(side=RED)
    assert rec["outcome"] == ["hit"]
    assert rec["range_km"][0] == pytest.approx(6.0, abs=0.01)
    assert rec["aspect_deg"][0] == pytest.approx(0.0, abs=0.5)
    assert rec["off_boresight_deg"][0] == pytest.approx(0.0, abs=0.5)
    assert rec["shooter_speed"][0] == pytest.approx(250.0) and rec["t_s"][0] == 0.0 and rec["shot"] == [1]


def test_the_launch_log_tells_a_miss_from_a_missile_cut_short():
    env = _duel(1, 60_000.0, 0.0)                                     # blue 60 km ahead, running away: cold
    _fly(env, {0})
    rec = env.launch_log.records(side=RED)
    assert rec["outcome"] == ["miss"] and rec["aspect_deg"][0] == pytest.approx(180.0, abs=0.5)
    env = _duel(1, 8_000.0, math.pi)
    _fly(env, {0, 10}, steps=40)                                      # the second one is in flight when the first hits
    rec = env.launch_log.records(side=RED)
    assert rec["outcome"] == ["hit", "cut"] and rec["shot"] == [1, 2]
    assert rec["t_s"][1] == pytest.approx(10 * env.dt) and env.launch_log.episodes_ended == 1
    assert env.launch_log.records(side=BLUE)["outcome"] == []         # the opponent never fired


# ----------------------------------------------------------------------------- the commands


def test_range_map_command_writes_the_pictures_and_the_table(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "pics" / "map.png"
    code = main(["air-combat", "range-map", "--out", str(out), "--json", str(tmp_path / "t.json"),
                 "--ranges", "4:40:6", "--aspects", "0:180:90", "--samples", "2", "--env", "time_scale=8"])
    assert code == 0
    text = capsys.readouterr().out
    assert text.startswith("swept 168 shots (4 manoeuvres x 3 aspects x 7 ranges x 2) in one batch")
    assert "R_max" in text and "R_ne" in text
    for png in (out, tmp_path / "pics" / "map_space_time.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    table = json.loads((tmp_path / "t.json").read_text())
    assert table["params"]["env_kwargs"]["time_scale"] == 8 and len(table["cells"]) == 84


@pytest.mark.parametrize("argv, says", [
    (["--ranges", "10:5:1"], "--ranges"), (["--ranges", "ten"], "--ranges"),
    (["--aspects", "0:270:10"], "aspects"), (["--manoeuvres", "loop"], "unknown manoeuvre 'loop'"),
    (["--env", "time_scal=2"], "--env time_scal"), (["--env", "time_scale=-1"], "time_scale"),
    (["--shooter-speed", "50"], "shooter speed"), (["--samples", "0"], "samples")])
def test_range_map_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys, argv, says):
    code = main(["air-combat", "range-map", "--out", str(tmp_path / "m.png"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("rl-system:") and says in err
    assert not (tmp_path / "m.png").exists()


def test_eval_launch_map_draws_a_checkpoints_launches(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from policy_checkpoint import AIR, env_checkpoint

    env_checkpoint(tmp_path / "run", AIR)
    out = tmp_path / "launches.png"
    assert main(["eval", str(tmp_path / "run"), "--launch-map", str(out), "--episodes", "16"]) == 0
    line = capsys.readouterr().out
    assert re.search(r"launches in \d+ episodes \(win rate [\d.]+ over 16\)", line) and "inside R_ne" in line
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = json.loads((tmp_path / "run" / "launch_map.json").read_text())
    launches = result["launches"]
    assert launches["launches"] > 0 and sum(launches["outcomes"].values()) == launches["launches"]
    assert launches["episodes_ended"] >= 16
    first, later = launches["first_shots"], launches["later_shots"]
    assert first["count"] + later["count"] == launches["launches"]
    assert first["count"] <= launches["episodes_ended"] + 16          # at most one per episode (16 envs)


def test_eval_launch_map_of_another_env_is_one_line(tmp_path, capsys):
    from policy_checkpoint import NAV, env_checkpoint

    env_checkpoint(tmp_path / "run", NAV)
    code = main(["eval", str(tmp_path / "run"), "--launch-map", str(tmp_path / "x.png"), "--episodes", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "needs an AirCombat checkpoint" in err
