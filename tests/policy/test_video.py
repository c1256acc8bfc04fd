"""`rl-system eval CHECKPOINT --video OUT.mp4` (rl_system/policy/video.py): one episode of a real
checkpoint's policy on a real env, drawn frame by frame and encoded as H.264; read back with PyAV
(frame count and size as written). Navigation, AirCombat and CartPole draw with their renderers; a
Gymnasium env gives its own rgb_array pictures, a VMAS scenario (a MAPPO policy) VMAS's own. What
cannot be filmed is one line, exit 2, no file."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("matplotlib")
av = pytest.importorskip("av")

from policy_checkpoint import AIR, NAV, env_checkpoint  # noqa: E402 - after the skips

from rl_system.cli.main import main  # noqa: E402
from rl_system.policy.video import frame_indices  # noqa: E402


def _read_back(path) -> tuple[int, int, int, str]:
    """(frames, width, height, codec) of the video at ``path``, decoded."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        return len(frames), frames[0].width, frames[0].height, stream.codec_context.name


VMAS = ["algo=mappo", "env.name=vmas:balance", "env.kwargs={continuous_actions: true, max_steps: 8, n_agents: 3}"]
NO_VMAS = pytest.mark.skipif(importlib.util.find_spec("vmas") is None, reason="needs vmas")
CASES = {
    "navigation": NAV,
    "air_combat": AIR,
    "cartpole": ["env.name=CartPole"],
    "gym_cartpole": ["env.name=gym:CartPole-v1"],
    "vmas_balance": pytest.param(VMAS, marks=NO_VMAS),
}


@pytest.mark.parametrize("overrides", CASES.values(), ids=CASES.keys())
def test_eval_video_writes_an_episode_that_reads_back(tmp_path, capsys, overrides):
    env_checkpoint(tmp_path / "run", overrides)
    out = tmp_path / "clips" / "episode.mp4"
    assert main(["eval", str(tmp_path / "run"), "--video", str(out), "--deterministic", "--max-frames", "6",
                 "--fps", "10"]) == 0
    line = capsys.readouterr().out.strip()
    steps = int(line.split("one episode of ")[1].split(" steps")[0])
    expected = len(frame_indices(steps, 6))
    assert f"wrote {out} ({expected} frames of " in line and "at 10 fps" in line
    width, height = map(int, line.split(" frames of ")[1].split(" at ")[0].split("x"))
    assert (_read_back(out)) == (expected, width, height, "h264")
    assert width >= 400 and height >= 300 and width % 2 == 0 and height % 2 == 0
    assert not list(out.parent.glob(".*"))  # no temporary file left


def test_frames_spread_evenly_over_a_long_episode():
    assert frame_indices(5, 300) == [0, 1, 2, 3, 4, 5]
    picks = frame_indices(1000, 11)
    assert picks == list(range(0, 1001, 100))


@pytest.mark.parametrize("flags,why", [
    (["--video", "{tmp}/a.gif"], "a video is written as .mp4, .mkv, .mov"),
    (["--video", "{tmp}/a.mp4", "--render", "{tmp}/a.png"], "--render and --video: one at a time"),
    (["--video", "{tmp}/a.mp4", "--opponent", "{tmp}/run"], "--opponent does not apply to --video"),
    (["--video", "{tmp}/a.mp4", "--fps", "0"], "fps >= 1"),
], ids=["container", "render_too", "opponent", "fps"])
def test_a_video_that_cannot_be_made_is_one_line_exit_2_and_no_file(tmp_path, capsys, flags, why):
    env_checkpoint(tmp_path / "run", ["env.name=CartPole"])
    flags = [f.format(tmp=tmp_path) for f in flags]
    assert main(["eval", str(tmp_path / "run"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and why in err
    assert not list(tmp_path.glob("a.*")) and not list(tmp_path.glob(".a.*"))


def test_a_video_of_an_env_without_a_renderer_is_one_line_exit_2(tmp_path, capsys):
    env_checkpoint(tmp_path / "run", ["env.name=Chaos"])
    assert main(["eval", str(tmp_path / "run"), "--video", str(tmp_path / "c.mp4")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "no renderer for env 'Chaos'" in err and "gym:<id>" in err
    assert not (tmp_path / "c.mp4").exists()


@NO_VMAS
def test_a_vmas_scenario_that_cannot_draw_here_is_one_line_exit_2_and_no_file(tmp_path, capsys, monkeypatch):
    """Where pyglet finds neither EGL nor a display (as VMAS's render raises it then)."""
    from vmas.simulator.environment.environment import Environment

    def no_display(*args, **kwargs):
        raise RuntimeError('Cannot connect to "None"\n(pyglet.canvas.xlib.NoSuchDisplayException)')

    monkeypatch.setattr(Environment, "render", no_display)
    env_checkpoint(tmp_path / "run", VMAS)
    assert main(["eval", str(tmp_path / "run"), "--video", str(tmp_path / "v.mp4")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("rl-system: cannot render: VMAS cannot draw here "), err
    assert "RuntimeError: Cannot connect to \"None\")" in err and "libEGL" in err and "DISPLAY" in err
    assert not list(tmp_path.glob("*.mp4")) and not list(tmp_path.glob(".v.*"))
