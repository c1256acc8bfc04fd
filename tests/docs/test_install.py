"""README's install story holds on a fresh machine: its Install section's two command blocks, run as
written in a new virtualenv (no package of the outer one visible) from a clone of this repository's
HEAD, install the package and train CartPole to its target; and ``.ci/run`` installs what README's
Tests section says, so CI proves the same lines users run.

README first tells Linux users without a GPU to take torch's CPU build from PyPI's CPU index. That
line runs here when the index answers; a machine with no route to it (CI's, whose pip finds the CPU
wheel of the pinned version on its own index) goes on to the two blocks, which are the test."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def section(title: str) -> str:
    """README's ``## title`` section."""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def cpu_torch_line() -> str:
    """The ``pip install torch==... --index-url ...`` README gives Linux users without a GPU."""
    (line,) = re.findall(r"`(pip install torch==\S+ --index-url \S+)`", section("Install"))
    return line


def _reachable(url: str) -> bool:
    host = url.split("//", 1)[1].split("/", 1)[0]
    try:
        socket.create_connection((host, 443), timeout=3).close()
        return True
    except OSError:
        return False


def test_ci_installs_what_readme_says():
    """``.ci/run``'s install lines are README's Tests block, minus the pytest command it runs itself."""
    (tests_block,) = bash_blocks(section("Tests"))
    readme_steps = [s.strip() for s in tests_block.split("&&") if "pytest" not in s]
    ci = (REPO / ".ci" / "run").read_text()
    ci_steps = [ln.strip().replace("python -m pip install --quiet ", "pip install ").replace("--quiet ", "")
                for ln in ci.splitlines() if re.match(r"\s*python -m pip install", ln)]
    normalised = [s.replace("python -m pip install", "pip install") for s in readme_steps]
    assert [s.replace("pip install -U pip", "pip install --upgrade pip") for s in normalised] == ci_steps


@pytest.mark.slow
def test_readme_install_lines_train_in_a_fresh_venv(tmp_path):
    clone_line, setup_line = bash_blocks(section("Install"))
    assert clone_line.startswith("git clone <this repository> rl_system") and "rl-system train" in setup_line
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    clone = clone_line.replace("<this repository>", shlex.quote(str(REPO)))
    torch = f" && {cpu_torch_line()}" if _reachable(cpu_torch_line().split("--index-url ")[1]) else ""
    script = f"set -e\n{clone}{torch}\n{setup_line}\n"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    venv_python = tmp_path / "rl_system" / ".venv" / "bin" / "python"
    probe = "import rl_system, torch; print(rl_system.__file__, torch.__version__)"
    where = subprocess.run([str(venv_python), "-I", "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    assert where[0].startswith(str(tmp_path / "rl_system")) and where[1].startswith("2.13.0")
    assert re.search(r"^done: [\d,]+ env steps in .*final mean return", done.stdout + done.stderr, flags=re.M)
    (summary,) = (tmp_path / "rl_system" / "runs").glob("*/summary.json")
    assert json.loads(summary.read_text())["reached_target"] is True
