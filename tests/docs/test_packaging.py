"""The installed package cannot collide with a user's project: the built-in envs install as
``rl_system.envs`` (setup.py maps the repository's ``envs/`` folder there), so a project with its own
``envs`` package -- the usual name for a folder of environments -- trains both its env and a
built-in one with ``python -m rl_system`` from its own folder, and a config that names a built-in
env the old way (``envs.<module>:Name``) still loads. Run in a fresh virtualenv with the package
installed from a wheel built from this checkout (not editable), the way a user installs it."""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

USER_ENV = '''
"""The user's own env: CartPole cut at 50 steps; it leaves a mark where it is built."""
from pathlib import Path

from rl_system.envs.cartpole import CartPoleVecEnv


class ShortCartPole(CartPoleVecEnv):
    def __init__(self, num_envs, device="cpu", seed=None, marker=None):
        super().__init__(num_envs, device, seed, max_episode_steps=50)
        if marker:
            Path(marker).touch()
'''


# A config naming a built-in env the old way (envs.<module>:Name): loaded as `rl-system train`
# loads it, the env built; prints the file of the env's class.
OLD_NAME = """
import inspect
from rl_system.config import load_config
from rl_system.envs import make_env
cfg = load_config("train.yaml", ["env.name=envs.cartpole:CartPoleVecEnv"])
env = make_env(cfg.env.name, 2, "cpu", seed=0, **cfg.env.kwargs)
env.reset()
print(inspect.getfile(type(env)))
"""


def venv_site(venv: Path) -> Path:
    """The venv's site-packages."""
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def _train(python: Path, project: Path, run: str, *overrides: str) -> dict:
    cmd = [str(python), "-m", "rl_system", "train", "train.yaml", "--run-dir", f"runs/{run}", "--quiet",
           *(x for o in overrides for x in ("--set", o))]
    done = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((project / "runs" / run / "summary.json").read_text())


def _see_this_environments_packages(python: Path) -> None:
    """``venv --system-site-packages`` sees the *base* interpreter's packages; when the tests run in
    a virtualenv themselves, torch and Ray live in that virtualenv's site-packages instead, so the
    new venv gets them by a ``.pth`` file (plain path lines: the outer editable install's own
    ``.pth`` hooks are not run, so the new venv's rl_system is the wheel's)."""
    if sys.prefix == sys.base_prefix:
        return
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "outer_environment.pth").write_text("".join(f"{d}\n" for d in site.getsitepackages()))


@pytest.mark.slow
def test_a_user_project_with_its_own_envs_package_trains_its_env_and_a_built_in_one(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    _see_this_environments_packages(python)
    had_build = (REPO / "build").exists()
    try:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(REPO)],
                       check=True, capture_output=True, timeout=300)
    finally:
        if not had_build:  # pip builds in the tree; a stale build/lib would leak into later wheels
            shutil.rmtree(REPO / "build", ignore_errors=True)
    where = subprocess.run([str(python), "-c", "import rl_system.envs as e; print(e.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(venv)), where  # the wheel's copy, not this checkout's

    project = tmp_path / "project"
    (project / "envs").mkdir(parents=True)
    (project / "envs" / "__init__.py").write_text('"""The user\'s environments."""\n')
    (project / "envs" / "short_cartpole.py").write_text(USER_ENV)
    (project / "train.yaml").write_text(textwrap.dedent("""\
        env: {name: CartPole}
        workers: {num_workers: 1, num_envs: 16, rollout_len: 16}
        max_env_steps: 2048
        tensorboard: false
        """))
    marker = tmp_path / "user_env_built"
    mine = _train(python, project, "mine", "env.name=envs.short_cartpole:ShortCartPole", f"env.kwargs.marker={marker}")
    assert mine["status"] == "completed" and marker.exists()
    assert mine["final_mean_return"] is None or mine["final_mean_return"] <= 50
    built_in = _train(python, project, "built_in")
    assert built_in["status"] == "completed" and built_in["env_steps"] >= 2048
    # The old name loads from the project's folder, beside its own `envs` package, and means the
    # wheel's env (the driver resolves it as the runs above did; a third run would prove no more).
    old_name = subprocess.run([str(python), "-c", OLD_NAME], check=False, cwd=project, capture_output=True,
                              text=True, timeout=120)
    assert old_name.returncode == 0, old_name.stderr[-2000:]
    assert old_name.stdout.strip() == str(venv_site(venv) / "rl_system" / "envs" / "cartpole.py"), old_name.stdout
