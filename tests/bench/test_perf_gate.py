"""The performance gate's verdict, and its bad input: a base that names no commit, a base checkout
with uncommitted changes, a base that does not install or run, Ctrl-C. Each ends in one line and
exit 2 (130 for Ctrl-C), and no worktree is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from child_env import foreground_sigint

from bench import perf_gate

ROOT = Path(__file__).resolve().parents[2]


def gate(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.perf_gate", *args], cwd=ROOT, capture_output=True, check=False,
                          text=True, timeout=timeout)


def worktrees(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True,
                         check=True).stdout
    return [ln for ln in out.splitlines() if ln.startswith("worktree ") and "perf_gate_" in ln]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("rs, word", [([1.0, 0.98, 1.03], "ok"), ([0.80, 0.85, 0.82], "SLOWER"),
                                      ([0.80, 1.10, 0.90], "ok"),  # a noisy machine: the spread covers 0.95
                                      ([1.20, 1.25, 1.30], "faster"), ([0.93, 0.94, 0.93], "SLOWER")])
def test_a_metric_fails_only_below_the_threshold_by_more_than_its_spread(rs, word):
    _, spread, got = perf_gate.verdict(rs, gated=True)
    assert got == word
    assert spread == pytest.approx((max(rs) - min(rs)) / 2)
    assert perf_gate.verdict(rs, gated=False)[2] == "info"
    assert perf_gate.verdict([], gated=True)[2] == "no figure"


def test_ratios_say_faster_above_one_for_rates_and_for_times():
    rate = perf_gate.Metric("r", lambda s: s["x"], "", higher_is_better=True)
    time_ = perf_gate.Metric("t", lambda s: s["x"], "s", higher_is_better=False)
    base, head = [{"x": 100.0}, {"x": 200.0}], [{"x": 150.0}, {"x": 100.0}]
    assert perf_gate.ratios(rate, base, head) == [1.5, 0.5]
    assert perf_gate.ratios(time_, base, head) == pytest.approx([100 / 150, 2.0])
    assert perf_gate.ratios(rate, [{"x": None}], [{"x": 1.0}]) == []  # a run without the figure


def test_every_case_is_a_shipped_config_and_quick_is_a_subset():
    for case in perf_gate.CASES:
        assert (ROOT / "launch" / "configs" / case.config).exists(), case.config
    assert {c.name for c in perf_gate.CASES if c.quick} == {"cartpole_throughput", "cartpole_to_475"}


def test_an_unknown_base_is_one_line_and_exit_2():
    before = worktrees(ROOT)
    out = gate("--base", "nosuchref")
    assert out.returncode == 2
    assert one_line(out.stderr) == "perf_gate: --base nosuchref: no such commit in this repository"
    assert worktrees(ROOT) == before


def _repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(textwrap.dedent(text))
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True, capture_output=True)
    return path


CONFIGS = {f"launch/configs/{c.config}": "algo: ppo\n" for c in perf_gate.CASES}


def test_a_base_checkout_with_uncommitted_changes_is_refused(tmp_path):
    repo = _repo(tmp_path / "other", {"README.md": "x\n", **CONFIGS})
    (repo / "README.md").write_text("changed\n")
    out = gate("--base", str(repo))
    assert out.returncode == 2
    assert one_line(out.stderr).startswith(f"perf_gate: the base checkout {repo} has uncommitted changes")


@pytest.mark.slow  # pip builds in an isolated environment: seconds
def test_a_base_that_does_not_install_is_one_line_and_leaves_no_worktree(tmp_path):
    repo = _repo(tmp_path / "broken", {"pyproject.toml": "[project]\nname = \n", **CONFIGS})
    out = gate("--base", str(repo), "--quick", "--pairs", "1")
    assert out.returncode == 2, out.stderr
    line = one_line(out.stderr)
    assert line.startswith("perf_gate: the base ") and " did not install: " in line
    assert worktrees(repo) == []


@pytest.mark.slow  # an install and a run's start
def test_a_base_that_cannot_run_is_one_line_and_leaves_no_worktree(tmp_path):
    # It installs (a package named rl_system) but has no command line: `python -m rl_system` fails.
    repo = _repo(tmp_path / "norun", {
        "pyproject.toml": """\
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "rl-system"
            version = "0.0.1"
            [tool.setuptools]
            packages = ["rl_system"]
            """, "rl_system/__init__.py": "", **CONFIGS})
    out = gate("--base", str(repo), "--cases", "cartpole_to_475", "--pairs", "1")
    assert out.returncode == 2, out.stderr
    line = one_line(out.stderr)
    assert line.startswith("perf_gate: base ") and " could not run cartpole_to_475 (exit 1): " in line
    assert worktrees(repo) == []


def test_ctrl_c_leaves_no_worktree_behind():
    before = worktrees(ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "bench.perf_gate", "--base", "HEAD", "--quick", "--pairs", "1"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=foreground_sigint)
    try:
        deadline = time.monotonic() + 60
        while len(worktrees(ROOT)) == len(before) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(worktrees(ROOT)) == len(before) + 1, "the gate never made its worktree"
        time.sleep(1.0)  # into the install
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "perf_gate: interrupted; the base worktree is removed"
    assert worktrees(ROOT) == before
