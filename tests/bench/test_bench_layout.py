"""The benchmark tree stays usable and small: every module under ``bench/`` imports as a package
module (``python -m bench.X``, no ``sys.path`` edits) and none is over 400 lines, every
command-line one answers ``--help`` without running anything, and the tracked results stay under
2 MB."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS_LIMIT = 2_300_000  # bytes of tracked files under bench/results (1.5 MB until the MPE, VMAS and
# Overcooked comparisons joined the single-agent ones, 2 MB until agent groups and EPyMARL's tasks did;
# a clone stays small)
OPTIONAL = ("stable_baselines3", "sb3_contrib", "minatar", "envpool", "popgym", "benchmarl", "torchrl")
"""The peers' packages a module may need that are not installed here."""


def _modules() -> list[str]:
    files = [*BENCH.glob("*.py"), *BENCH.glob("harness/*.py"), *BENCH.glob("experiments/*.py"),
             *BENCH.glob("peers/*.py"), *BENCH.glob("publish/*.py")]
    names = [".".join(f.relative_to(ROOT).with_suffix("").parts) for f in sorted(files)]
    return [n.removesuffix(".__init__") for n in names]


MODULES = _modules()


def test_the_tree_is_what_the_docs_describe():
    assert {"bench.harness", "bench.experiments", "bench.peers", "bench.publish", "bench.publish.report", "bench.bench_ppo",
            "bench.compare_runs", "bench.gpu_check"} <= set(MODULES)
    assert not (ROOT / "rl_system" / "algos" / "hmasd" / "bench.py").exists()  # the library holds no bench
    big = [f"{f.relative_to(ROOT)}: {n} lines" for f in BENCH.rglob("*.py") if (n := len(f.read_text().splitlines())) > 400]
    assert not big, big  # one role per module


@pytest.mark.parametrize("path", sorted(p.relative_to(ROOT).as_posix() for p in BENCH.rglob("*.py")))
def test_no_module_edits_sys_path(path):
    assert not re.search(r"sys\.path\.(insert|append)|PYTHONPATH", (ROOT / path).read_text()), path


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports_and_its_command_line_answers_help(name, monkeypatch, capsys):
    pytest.importorskip("torch")
    try:
        module = importlib.import_module(name)
    except ImportError as err:  # an optional peer package (stable-baselines3, ...) not installed here
        if err.name and err.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"{name}: {err.name} is not installed")
        raise
    main = getattr(module, "main", None)
    if main is None:
        return
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)
    assert "usage" in capsys.readouterr().out


def test_a_suite_and_an_experiment_run_as_python_dash_m_from_the_checkout():
    for name in ("bench.tb_scalars", "bench.experiments.hmasd_round_stats"):
        out = subprocess.run([sys.executable, "-m", name, "--help"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, check=False)
        assert out.returncode == 0 and "usage" in out.stdout, (name, out.stderr[-2000:])
    sh = BENCH / "experiments" / "hmasd_update_commits.sh"
    assert subprocess.run(["bash", "-n", str(sh)], check=False).returncode == 0


def test_tracked_results_stay_under_the_limit():
    listed = subprocess.run(["git", "ls-files", "-z", "bench/results"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    files = [ROOT / p for p in listed.stdout.decode().split("\0") if p]
    total = sum(f.stat().st_size for f in files if f.exists())
    assert files and total <= RESULTS_LIMIT, f"bench/results holds {total:,} bytes of tracked files (limit {RESULTS_LIMIT:,})"
