"""Which modules may import which, read from the source with ``ast`` (nothing is imported):

* the envs (the repository's ``envs/`` folder, installed as ``rl_system.envs``) import nothing of
  ``rl_system`` but ``rl_system.envs`` itself, so an env, its renderer and its analysis tools
  run without the training library; what drives a policy lives in ``rl_system.policy`` and the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / "envs"


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the file at ``path`` (module ``module``),
    those inside functions included; ``from X import a`` counts as ``X`` and as ``X.a``, since
    ``a`` may be a submodule. Relative imports are resolved against ``module``."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[:len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def _envs_files() -> list[Path]:
    return sorted(p for p in ENVS.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_layering_check_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "envs" / "sub"
    pkg.mkdir(parents=True)
    probe = pkg / "probe.py"
    probe.write_text("import rl_system.config\nfrom rl_system import algos\nfrom .. import base\n"
                     "def f():\n    from ...policy import render\n")
    names = [name for _, name in imported_modules(probe, "rl_system.envs.sub.probe")]
    assert {"rl_system.config", "rl_system.algos", "rl_system.envs.base", "rl_system.policy.render"} <= set(names)


@pytest.mark.parametrize("path", _envs_files(), ids=lambda p: str(p.relative_to(ENVS)))
def test_envs_import_nothing_of_rl_system_but_the_envs(path):
    module = _module_name(path, ENVS, "rl_system.envs")
    upward = [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in imported_modules(path, module)
              if (name == "rl_system" or name.startswith("rl_system."))
              and name != "rl_system.envs" and not name.startswith("rl_system.envs.")]
    assert not upward, "an env imports the training library:\n" + "\n".join(upward)

