"""``python -m bench.publish.figures`` draws the docs' pictures from the committed results: each is a PNG
within the size bound, and a figure whose source is missing stops with one line."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("PIL")

from bench.harness.plots import MAX_BYTES
from bench.publish import figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FROM_RESULTS = ["mujoco", "minatar", "memory", "marl", "marl_mpe", "overcooked_paper", "cartpole_ttt", "hmasd_seeds",
                "glance"]


def _check_png(path):
    from PIL import Image

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) <= MAX_BYTES, f"{path.name}: {len(data):,} bytes"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        w, h = image.size
    assert 400 <= w <= 1000 and 200 <= h <= 700, (path.name, image.size)


def test_the_result_figures_draw_from_the_committed_results(tmp_path, capsys):
    written = figures.build(FROM_RESULTS, out=tmp_path)
    assert {p.name for p in written} == {"curves_mujoco.png", "curves_minatar.png", "curves_memory.png",
                                         "curves_marl.png", "curves_marl_mpe.png", "curves_overcooked_paper.png",
                                         "cartpole_ttt.png",
                                         "hmasd_seeds.png", "results_at_a_glance.png"}
    for path in written:
        _check_png(path)
    assert "curves_mujoco.png" in capsys.readouterr().out  # one line per figure, with its size


def test_a_missing_source_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "results" / "mujoco").mkdir(parents=True)
    code = figures.main(["--only", "mujoco", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "img")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("bench.publish.figures: mujoco: no runs match ") and "rl_system_HalfCheetah-v5" in err
    assert not (tmp_path / "img" / "curves_mujoco.png").exists()


def test_an_unknown_name_is_one_line_listing_the_figures(capsys):
    assert figures.main(["--only", "mujoco,nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no figure nope" in err and "range_map" in err


def test_the_env_pictures_go_through_the_renderers(tmp_path):
    pytest.importorskip("torch")
    from bench.publish import figures_envs

    for draw in (figures_envs.render_cartpole, figures_envs.render_alice_bob, figures_envs.render_overcooked):
        _check_png(draw(tmp_path))
    vmas = importlib.util.find_spec("vmas") and figures_envs.render_vmas(tmp_path)  # eval --video's renderer
    if vmas:  # None where VMAS cannot draw on this machine (no EGL, no display): the figure notes it
        _check_png(vmas)
