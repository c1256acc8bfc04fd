"""The pages' generated blocks say what ``bench/results/`` says, and README stays a front door:
short, few figures, each figure from one source (``bench.publish.pages``, ``bench.publish.page_stats``)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from bench.harness.stamp import ROOT
from bench.publish import pages
from bench.publish.page_stats import page_stats


def test_every_generated_block_matches_its_results():
    assert pages.stale() == [], "run `python -m bench.publish.pages` and commit the pages"


@pytest.mark.parametrize("block", pages.BLOCKS, ids=lambda b: b.name)
def test_a_hand_edited_figure_is_caught(tmp_path, block):
    page = tmp_path / block.page.name
    text = block.page.read_text()
    page.write_text(text)
    moved = dataclasses.replace(block, page=page)
    assert pages.stale((moved,)) == []
    inside = pages.current(moved)
    digit = re.search(r"\d", inside)
    if digit:  # a figure changed by hand
        edited = inside[:digit.start()] + str((int(digit.group()) + 1) % 10) + inside[digit.end():]
    elif "–" in inside:  # a capability claimed by hand
        edited = inside.replace("–", "✓", 1)
    else:  # a help text reworded by hand
        edited = inside.replace(" the ", " a ", 1)
    page.write_text(text.replace(inside, edited, 1))
    assert pages.stale((moved,)) == [block.name]
    assert pages.write(moved) and pages.stale((moved,)) == []  # and the tool puts it back


def test_check_names_the_stale_block_and_a_missing_source_is_one_line(tmp_path, capsys, monkeypatch):
    page = tmp_path / "README.md"
    page.write_text(pages.GLANCE.page.read_text().replace("| 1", "| 9", 1))
    monkeypatch.setattr(pages, "BLOCKS", (dataclasses.replace(pages.GLANCE, page=page),))
    assert pages.main(["--check"]) == 1
    assert "block 'glance' differs" in capsys.readouterr().err
    monkeypatch.setattr(pages, "MUJOCO_JSON", tmp_path / "absent.json")
    assert pages.main(["--only", "glance"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "absent.json" in err and "Traceback" not in err


def glance_rows() -> list[list[str]]:
    block = pages.current(pages.GLANCE).splitlines()
    return [[c.strip() for c in line.strip("|").split("|")] for line in block[2:] if line.startswith("|")]


def test_every_speed_figure_in_the_readme_names_its_commit():
    header = [c.strip() for c in pages.current(pages.GLANCE).splitlines()[0].strip("|").split("|")]
    at = header.index("measured at")
    rows = glance_rows()
    speed = [r for r in rows if re.search(r"steps/s|time|process", r[0])]
    assert len(speed) >= 5, rows  # throughput, MinAtar, the whole process, the times to a return
    for row in speed:
        assert re.search(r"`[0-9a-f]{7}(\+dirty)?`", row[at]), f"no commit for {row[0]!r}: {row[at]!r}"
    for row in rows:  # the rest name theirs or say where they are cited from
        assert re.search(r"`[0-9a-f]{7}", row[at]) or row[at].startswith("cited from"), row


def test_a_figure_is_older_code_where_the_product_differs_from_the_speed_sitting():
    # 353e22e changed bench/ only over 1c08c32; 2e341ac is a day of rl_system/ changes before them
    assert pages.same_code("1c08c32", "353e22e")
    assert not pages.same_code("2e341ac", "353e22e")
    assert not pages.same_code("353e22e+dirty", "353e22e")  # uncommitted changes: unknown code
    assert not pages.same_code("0000000", "353e22e")  # a commit this clone does not have


def test_the_readme_is_a_front_door():
    """At most 120 lines and 60 numeric figures outside code (tables included)."""
    stats = page_stats((ROOT / "README.md").read_text())
    assert stats.lines <= 120 and stats.figures <= 60, stats


def test_page_stats_counts_figures_in_prose_and_tables_only():
    text = "Ran 3 seeds in 1.8 s, 295,412 steps/s.\n\n```bash\nrun --seed 7\n```\n| a | 12 |\n`x=5` [v2](p3.md)\n"
    assert page_stats(text).figures == 4  # 3, 1.8, 295,412 and 12; not 7, 5, 2 or 3
