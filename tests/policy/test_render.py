"""`rl-system eval CHECKPOINT --render OUT.png` (rl_system/policy/render.py driving the renderers of
envs/render.py): real checkpoints (a freshly
initialised policy saved through the checkpoint store, the same file format training writes),
real envs, a real PNG; and the one-line error for an env without a renderer."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

pytest.importorskip("matplotlib")

from policy_checkpoint import AIR, NAV, env_checkpoint

from rl_system.cli.main import main
from rl_system.envs.air_combat.render import AirCombatRenderer
from rl_system.envs.navigation_render import NavigationRenderer
from rl_system.envs.render import renderer_names
from rl_system.policy.render import record_episode

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR" and data.rstrip().endswith(b"IEND\xaeB`\x82")
    return struct.unpack(">II", data[16:24])


NAV_MEMORY = NAV + ["model.recurrent=gru", "model.encoders={lidar: scan}"]


@pytest.mark.parametrize("overrides", [NAV, AIR, NAV_MEMORY], ids=["navigation", "air_combat", "navigation_gru_scan"])
def test_eval_render_writes_a_png(tmp_path, capsys, overrides):
    env_checkpoint(tmp_path / "run", overrides)
    out = tmp_path / "pics" / "episode.png"
    assert main(["eval", str(tmp_path / "run"), "--render", str(out), "--deterministic"]) == 0
    width, height = _png_size(out)
    assert width >= 600 and height >= 500
    assert out.stat().st_size > 30_000  # tracks, obstacles and text, not an empty canvas
    line = capsys.readouterr().out.strip()
    assert f"wrote {out} (a picture)" in line and "v3: one episode of" in line
    from matplotlib.image import imread

    pixels = imread(out)
    assert pixels.shape[:2] == (height, width)
    assert float(pixels[..., :3].std()) > 0.05  # not a blank image


def test_render_of_an_env_without_renderer_is_one_line_and_exit_2(tmp_path, capsys):
    env_checkpoint(tmp_path / "run", ["env.name=Chaos"])
    out = tmp_path / "chaos.png"
    assert main(["eval", str(tmp_path / "run"), "--render", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert "no renderer for env 'Chaos'" in err and "AirCombat" in err and "Navigation" in err
    assert not out.exists()
    assert "Chaos" not in renderer_names() and "CartPole" in renderer_names()


def test_recording_sees_the_final_state_before_the_autoreset(tmp_path):
    """The envs reset a finished episode inside step(); the recorder must still see the state
    the episode ended in, and one frame per step."""
    state = env_checkpoint(tmp_path, NAV)
    nav = NavigationRenderer()
    meta = record_episode(state, nav, deterministic=True, seed=1)
    assert len(nav.pos) == len(nav.dyn_pos) == len(nav.lidar) == meta["steps"] + 1
    final = nav.pos[-1]
    arena, goal = nav.arena, nav.goal
    if meta["info"]["success"]:
        assert float(torch.linalg.vector_norm(goal - final)) < 0.5
    elif meta["info"]["collision"]:
        # Hit a wall, the floor/ceiling or an obstacle: not the next episode's start.
        assert float(torch.linalg.vector_norm(final - nav.pos[-2])) < 1.0
    else:
        assert meta["truncated"] and meta["steps"] == 80
    assert 0 <= float(final[0]) <= arena + 1 and 0 <= float(final[1]) <= arena + 1

    air = AirCombatRenderer()
    meta = record_episode(env_checkpoint(tmp_path / "air", AIR), air, deterministic=False, seed=2)
    assert len(air.frames) == meta["steps"] + 1
    outcome = meta["info"]["outcome"]
    alive = air.frames[-1][2]  # [2] red, blue at the end
    assert outcome in (1, 2, 3, 4)
    assert (outcome == 1) == (bool(alive[0]) and not bool(alive[1]))
    assert (outcome == 4) == (bool(alive[0]) and bool(alive[1]))
