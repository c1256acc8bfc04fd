"""The documentation site (mkdocs.yml) builds in strict mode, and strict mode catches what it should.

The first test builds the real site: every page in the nav, every link between pages and every anchor
resolves, every link to a repository file outside docs/ names a file that exists
(docs/hooks/repo_links.py), the API reference renders from the docstrings, CHANGELOG.md and
CONTRIBUTING.md are included. The second builds a copy of the docs with a broken page link, a broken
anchor and a link to a repository file that is not there, and expects the build to fail naming each."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

for _package in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
    pytest.importorskip(_package, reason=f"the docs site needs {_package} (pip install -e '.[docs]')")

REPO = Path(__file__).resolve().parents[2]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2 is not a finding
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line or "ERROR" in line]


def test_the_site_builds_in_strict_mode(tmp_path):
    result = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, "\n".join(warnings(result)) or result.stderr[-3000:]
    site = tmp_path / "site"
    api = (site / "api" / "index.html").read_text()
    assert "RunConfig" in api and "load_policy" in api and ":class:" not in api
    assert "Keep a Changelog" in (site / "changelog" / "index.html").read_text()
    assert "bench.publish.report" in (site / "contributing" / "index.html").read_text()
    assert not (site / "hooks").exists()  # the build's own hooks are not published


def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path):
    # A copy of the checkout: the docs copied (to break them), everything else linked in place.
    root = tmp_path / "repo"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name in ("docs", "mkdocs.yml", ".git") or entry.name.startswith("."):
            continue
        (root / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    faq = root / "docs" / "faq.md"
    faq.write_text(faq.read_text() + "\n[gone](no_such_page.md), [no anchor](user_guide.md#no-such-section), "
                   "[no file](../launch/configs/no_such_config.yaml)\n")

    result = build(root / "mkdocs.yml", tmp_path / "site")
    found = "\n".join(warnings(result))
    assert result.returncode != 0, "a strict build with broken links passed"
    assert "no_such_page.md" in found
    assert "no-such-section" in found
    assert "launch/configs/no_such_config.yaml" in found
    assert len(warnings(result)) == 3, found  # the copy itself builds clean: only the three breaks fail it
