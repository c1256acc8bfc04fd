"""The report suite (bench/report.py, report_sections.py, report_md.py) and the harness's stamp and
tables, without training: the stamp, README's marker block, the Markdown tables."""

from __future__ import annotations

import json
import sys

import pytest

from bench.harness import hmasd_output, markdown, stamp
from bench.publish import report, report_md, report_sections

RESULTS = {
    "stamp": {"date_utc": "2026-01-02 03:04 UTC", "commit": "abc1234+dirty", "cpu": "AMD EPYC", "cores": 2,
              "memory_gib": 23.5, "gpu": None, "platform": "Linux", "python": "3.11.7", "torch": "2.13.0",
              "ray": "2.60.0", "gymnasium": "1.4.0", "numpy": "2.4.6", "load_1m_before": 0.25,
              "load_1m_after": 0.5},
    "mode": "full",
    "elapsed_s": 600.0,
    "sections": {
        "ttt": {"load_1m_before": 0.2, "load_1m_after": 0.4, "elapsed_s": 30.0,
                "rows": [{"peer": "rl_system", "seed": 0, "reached": True, "env_steps": 135168, "train_wall_s": 6.59,
                          "startup_s": 5.9, "command": "rl-system train launch/configs/cartpole_ppo.yaml --set seed=0"},
                         {"peer": "rl_system", "seed": 1, "reached": False, "env_steps": 2000000, "train_wall_s": 60.0,
                          "startup_s": 6.0,
                          "command": "rl-system train launch/configs/cartpole_ppo.yaml --set seed=1"}],
                "peer_rows": [{"peer": "rllib-ppo[tuned]", "seed": 0, "reached": True, "env_steps": 68343,
                               "train_wall_s": 34.97, "build_s": 2.3, "command": "python -m bench.peers.rllib_ppo"}]},
        "throughput": {"load_1m_before": 0.1, "load_1m_after": 0.2, "elapsed_s": 40.0,
                       "rows": [{"peer": "rl_system", "env_steps": 3000000, "steps_per_s": 104252.4,
                                 "update_share": 0.81, "command": "rl-system train x.yaml"}],
                       "peer_rows": [{"peer": "rllib-ppo[throughput]", "steps_per_s": 6641.0, "command": "rllib"}]},
        "envs": {"load_1m_before": 0.1, "load_1m_after": 0.1, "elapsed_s": 5.0,
                 "rows": [{"env": "AirCombat", "setting": "light | few missiles", "num_envs": 4096, "threads": 1,
                           "wall_best": 2700000.0, "wall_median": 2450000.0, "cpu_best": 2690000.0,
                           "cpu_median": 2400000.0, "command": "python -m bench.bench_air_combat --sizes 4096"}]},
        "codec": {"rows": [{"env": "CartPole", "num_envs": 512, "rollout_len": 16, "train_rounds": 20,
                            "raw_bytes_per_step": 42.7, "ratio_untrained": 1.84, "ratio_trained": 1.81,
                            "largest_column": "obs.obs", "largest_column_ratio": [1.5, 1.4],
                            "command": "python -m bench.bench_codec --env CartPole"}]},
        "field": {"rows": [], "error": "ActorDiedError: gone"},
    },
    "notes": ["RLlib peer skipped: not installed."],
}


def test_stamp_fields_present():
    st = stamp.stamp()
    for key in ("date_utc", "commit", "cpu", "cores", "memory_gib", "gpu", "python", "torch", "ray", "gymnasium",
                "load_1m_before"):
        assert key in st, key
    assert st["date_utc"].endswith("UTC")
    assert st["cores"] >= 1 and st["cpu"] and st["python"] and st["torch"]
    assert st["commit"] == "unknown" or st["commit"].split("+")[0].isalnum()
    json.dumps(st)  # goes into report.json as is
    line = stamp.stamp_line({**st, "load_1m_after": st["load_1m_before"]})
    assert st["commit"] in line and st["torch"] in line and "load average" in line


def test_stamp_line_flags_busy_and_quick_runs():
    assert "busy" not in stamp.stamp_line(RESULTS["stamp"])
    assert "busy" not in stamp.stamp_line({**RESULTS["stamp"], "load_1m_after": 3.5})  # the run's own load
    assert "busy" in stamp.stamp_line({**RESULTS["stamp"], "load_1m_after": 5.0})
    assert "busy" in stamp.stamp_line({**RESULTS["stamp"], "load_1m_before": 1.5})
    assert "quick mode" in stamp.stamp_line(RESULTS["stamp"], mode="quick")


def _readme(tmp_path, middle: str):
    p = tmp_path / "README.md"
    before = "# Title\n\nintro\n\n## Performance\n\n"
    after = "\n## Environments\n\ntext | with | pipes\n"
    p.write_text(before + middle + after)
    return p, before, after


def test_readme_block_replaced_exactly(tmp_path):
    old = f"{report_md.START_MARKER}\nold table\n| a | b |\n{report_md.END_MARKER}\n"
    p, before, after = _readme(tmp_path, old)
    block = "new line 1\n\n| x | y |\n|---|---|\n"
    report_md.replace_page_block(p, block)
    assert p.read_text() == before + f"{report_md.START_MARKER}\n{block}{report_md.END_MARKER}\n" + after
    report_md.replace_page_block(p, "again")  # idempotent on its own output, newline added
    assert p.read_text() == before + f"{report_md.START_MARKER}\nagain\n{report_md.END_MARKER}\n" + after


def test_readme_block_empty_between_markers(tmp_path):
    p, before, after = _readme(tmp_path, f"{report_md.START_MARKER}\n{report_md.END_MARKER}\n")
    report_md.replace_page_block(p, "t\n")
    assert p.read_text() == before + f"{report_md.START_MARKER}\nt\n{report_md.END_MARKER}\n" + after


@pytest.mark.parametrize("middle", ["no markers\n", f"{report_md.START_MARKER}\nonly a start\n",
                                    f"{report_md.END_MARKER}\nx\n{report_md.START_MARKER}\n",
                                    f"{report_md.START_MARKER}\n{report_md.END_MARKER}\n{report_md.START_MARKER}\n"])
def test_readme_without_markers_is_an_error(tmp_path, middle):
    p, _, _ = _readme(tmp_path, middle)
    text = p.read_text()
    with pytest.raises(report_md.ReportError, match="bench-report"):
        report_md.replace_page_block(p, "tables\n")
    assert p.read_text() == text  # untouched
    with pytest.raises(report_md.ReportError):
        report_md.check_page_markers(p)


def test_update_results_cli_exits_2_without_markers(tmp_path, capsys):
    p, _, _ = _readme(tmp_path, "nothing here\n")
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(RESULTS))
    assert report.main(["--from-json", str(saved), "--update-results", "--page", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bench-report:start" in err[0]


def test_update_results_cli_from_json(tmp_path):
    p, before, after = _readme(tmp_path, f"{report_md.START_MARKER}\nold\n{report_md.END_MARKER}\n")
    ok = {**RESULTS, "sections": {k: v for k, v in RESULTS["sections"].items() if not v.get("error")}}
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(ok))
    assert report.main(["--from-json", str(saved), "--update-results", "--page", str(p)]) == 0
    expected = before + f"{report_md.START_MARKER}\n{report_md.render_markdown(ok)}{report_md.END_MARKER}\n" + after
    assert p.read_text() == expected
    # quick figures, or a run with a section not measured, never go into README
    for bad in ({**ok, "mode": "quick"}, RESULTS):
        saved.write_text(json.dumps(bad))
        assert report.main(["--from-json", str(saved), "--update-results", "--page", str(p)]) == 2
        assert p.read_text() == expected


def test_md_table_format():
    assert markdown.md_table(["a", "b"], [[1, "x|y"], ["", 2.5]]) == [
        "| a | b |", "|---|---|", "| 1 | x\\|y |", "|  | 2.5 |"]


def test_render_markdown_from_fixed_results():
    md = report_md.render_markdown(RESULTS)
    lines = md.splitlines()
    assert lines[0].startswith("Measured 2026-01-02 03:04 UTC at commit `abc1234+dirty` on AMD EPYC (2 cores, 23.5 GiB")
    assert "torch 2.13.0" in lines[0] and "0.25 before, 0.50 after" in lines[0]
    assert ("| rl_system | 0 | yes | 6.6 s | 135k | 5.9 s | "
            "`rl-system train launch/configs/cartpole_ppo.yaml --set seed=0` |") in lines
    assert "| rl_system | 1 | **no** | 60.0 s | 2.00M | 6.0 s | " \
           "`rl-system train launch/configs/cartpole_ppo.yaml --set seed=1` |" in lines
    assert "| rllib-ppo[tuned] | 0 | yes | 35.0 s | 68k | 2.3 s | `python -m bench.peers.rllib_ppo` |" in lines
    assert ("rl_system: 1 of 2 seeds reached 475; train wall time 6.6–6.6 s (median 6.6 s), "
            "135k–135k env steps.") in lines
    assert "| rl_system | 3.00M | **104,252** | 81% | `rl-system train x.yaml` |" in lines
    assert "| rllib-ppo[throughput] | – | 6,641 (rl_system 15.7×) | – | `rllib` |" in lines
    assert ("| AirCombat | light \\| few missiles | 4,096 | 2,700,000 / 2,450,000 | 2,690,000 / 2,400,000 | "
            "`python -m bench.bench_air_combat --sizes 4096` |") in lines
    assert ("| CartPole | 512 × 16 | 42.7 | 1.84× | 1.81× (K = 20) | `obs.obs` 1.50× / 1.40× | "
            "`python -m bench.bench_codec --env CartPole` |") in lines
    assert "*Not measured: ActorDiedError: gone*" in lines
    assert "| env | seed | env steps |" not in md  # no empty table for a section that measured nothing
    err = lines.index("*Not measured: ActorDiedError: gone*")
    assert lines[err - 1] == ""  # never read as a table row
    assert "Note: RLlib peer skipped: not installed." in lines
    # every table: a header, a separator with as many columns, rows with as many cells, each with a command
    tables = [ln for ln in lines if ln.startswith("|")]
    assert tables
    # README order: time to target, throughput, field, env-only, codec
    order = [md.index(s) for s in ("time to a 100-episode", "training throughput", "Field envs", "Env-only",
                                   "wire format")]
    assert order == sorted(order)
    assert report_md.render_markdown(RESULTS) == md  # deterministic


def test_every_row_carries_its_command():
    md = report_md.render_markdown(RESULTS)
    for ln in md.splitlines():
        if ln.startswith("| ") and not ln.startswith(("| run ", "| env ", "| figure ")):
            assert "`" in ln.rsplit("|", 2)[-2], ln


HMASD_HEAD = ("method | seed | reseeded at | steps to target | solved (>= 0.9) at | lowest after | test success | "
              "test success (argmax) | best.json at env steps | best.json test success")


def _hmasd_output(path, commit: str, *rows: str) -> None:
    """A stored ``bench_hmasd`` transcript: its heading, the run table, the summary table after it."""
    path.write_text(f"# == 2026-11-29 · {commit} · the preset ==\n# python -m bench.bench_hmasd --seeds S\n"
                    + HMASD_HEAD + "\n" + "|".join(["---"] * 10) + "\n" + "\n".join(rows)
                    + "\n\nmethod | runs reaching target\n---|---\nhmasd | 2/3\n")


def test_hmasd_is_read_from_its_stored_outputs_not_rerun(tmp_path):
    _hmasd_output(tmp_path / "s100.txt", "abc1234",
                  "hmasd | 100 | - | 1,062,400 | 1,088,000 | 0.91 | 1.000 | 0.000 | 3,008,000 | 1.000")
    _hmasd_output(tmp_path / "s114.txt", "abc1234",
                  "hmasd | 114 | 1,203,200 | not reached | - | - | 0.000 | 0.000 | 3,008,000 | 0.000")
    _hmasd_output(tmp_path / "s115.txt", "def5678",
                  "hmasd | 115 | - | 793,600 | 819,200 | 0.42 | 0.850 | 1.000 | 2,560,000 | 0.910")
    (tmp_path / "collapse_s115.txt").write_text("not a seed of the preset\n")
    sec = hmasd_output.summary(tmp_path)
    assert sec["stored"] and sec["seeds"] == 3 and sec["fell_after_solving"] == 1
    assert sec["commits"] == ["abc1234", "def5678"]
    assert [(r["passed"], r["mean"]) for r in sec["rows"]] == [(2, pytest.approx(0.6166667)),
                                                              (2, pytest.approx(0.6366667))]
    md = "\n".join(report_md.md_hmasd(sec))
    assert "stored runs, not rerun" in md and "2 of 3" in md and "0.617" in md
    assert "fell below 0.5 after first reaching 0.9: 1 of 3" in md
    assert "error" in hmasd_output.summary(tmp_path / "missing")


def test_missing_rllib_is_a_one_line_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.rllib", None)  # import ray.rllib now raises ImportError
    sections: dict = {"throughput": {"rows": []}}  # no ttt: the CleanRL-style peer (which trains) is not run
    notes: list[str] = []
    report_sections.run_peers(report_sections.QUICK, sections, notes)
    assert len(notes) == 1 and "RLlib peer skipped" in notes[0] and "pip install -e ." in notes[0]
    assert "\n" not in notes[0] and "peer_rows" not in sections["throughput"]


def test_only_parsing():
    assert report._parse_only(None) == list(report_sections.SECTIONS)
    assert report._parse_only("ttt, codec") == ["ttt", "codec"]
    with pytest.raises(report_md.ReportError, match="unknown section"):
        report._parse_only("ttt,nope")
