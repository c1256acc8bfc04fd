"""Every command README.md and the manual (docs/*.md) show still runs as written, as far as can be
told without running it: each ``rl-system ...`` line in a code block parses with the CLI's own
parser; a ``train`` line whose config is in the checkout loads it with its ``--set`` overrides (the
dry run: every key and value is validated, nothing starts); a usage synopsis names only flags its
command has; every ``python -m bench.X`` names a module that exists. The lab log (docs/lab/) is a
dated record of past commands and is not checked."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from rl_system.cli.main import parser
from rl_system.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(\$ )?(rl-system(?!:)|python -m rl_system|python -m bench\.)")


def shown_commands(page: Path) -> list[tuple[int, str, bool]]:
    """``(line, command, fails)`` for every command line in the page's fenced code blocks
    (continuations joined; a synopsis's ``[...]`` lines included). ``fails``: the block shows the
    command's one-line error right under it (``rl-system: ...``)."""
    out: list[tuple[int, str, bool]] = []
    inside, current, start = False, "", 0
    for number, line in enumerate(page.read_text().splitlines(), 1):
        text = line.strip()
        if text.startswith("```"):
            inside, current = not inside, ""
            continue
        if not inside:
            continue
        if text.startswith("rl-system:") and out and out[-1][0] == start:
            out[-1] = (*out[-1][:2], True)  # an error line: the command above is shown failing
            continue
        if current:
            current += " " + text
        elif out and out[-1][0] == start and text.startswith("[") and "[" in out[-1][1]:
            out[-1] = (start, out[-1][1] + " " + text, out[-1][2])  # a synopsis goes on
            continue
        elif COMMAND.match(text):
            current, start = text.removeprefix("$ "), number
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1]
            continue
        out.append((start, current, False))
        current = ""
    return out


CASES = [pytest.param(page, line, command, fails, id=f"{page.relative_to(REPO)}:{line}")
         for page in PAGES for line, command, fails in shown_commands(page)]


def _words(command: str) -> list[str]:
    """The command's argv; a ``<placeholder>`` stands for one word."""
    words = shlex.split(re.sub(r"<[^>]*>", "X", command), comments=True)
    if words[:3] == ["python", "-m", "rl_system"]:
        words = ["rl-system", *words[3:]]
    return words


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a.choices for a in p._actions if isinstance(a, argparse._SubParsersAction))


def _flags(p: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``p`` and of its subcommands."""
    flags: set[str] = set()
    for action in p._actions:
        flags.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _flags(sub)
    return flags


def _check_synopsis(words: list[str]) -> None:
    """A usage line (``rl-system eval CHECKPOINT [--pick latest|best] ...``): its command exists and
    has every flag it names."""
    top = parser()
    if len(words) == 1 or words[1].startswith("-"):
        known = _flags(top)
    else:
        known = _flags(_subparsers(top)[words[1]])
    named = {m for w in words for m in re.findall(r"--[a-z][a-z-]*", w)}
    assert named <= known, f"flags the command does not have: {sorted(named - known)}"


def _check_command(words: list[str], fails: bool) -> None:
    """A concrete command: it parses; a ``train`` of a config in the checkout loads with its overrides."""
    if words[1:2] == ["--version"]:
        return
    args = parser().parse_args(words[1:])
    if args.command != "train" or not (REPO / args.config).is_file():
        return
    overrides = [o for o in args.overrides if "$" not in o]  # a shell variable's value is the shell's
    if fails:
        with pytest.raises(ConfigError):
            load_config(REPO / args.config, overrides)
    else:
        load_config(REPO / args.config, overrides)


@pytest.mark.parametrize("page, line, command, fails", CASES)
def test_shown_command_runs_as_written(page, line, command, fails):
    if command.startswith("python -m bench."):
        module = command.split()[2]
        assert importlib.util.find_spec(module) is not None, f"no module {module}"
        return
    synopsis = any(re.fullmatch(r"[A-Z_]+(\.[a-z0-9]+)?", w) for w in _words(command)[1:]) or "|" in command
    if synopsis:
        _check_synopsis(_words(command))
    else:  # what stands in [...] is optional: the command as shown without it
        _check_command(_words(re.sub(r"(?<=\s)\[[^\]]*\]", "", command)), fails)


def test_the_pages_show_commands():
    """The walk finds what it should (a regression of the reader would pass every page)."""
    readme = [c for _, c, _ in shown_commands(REPO / "README.md")]
    assert any(c.startswith("rl-system train launch/configs/cartpole_ppo.yaml") for c in readme)
    assert len(CASES) > 60


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [*PAGES, *sorted((REPO / "docs" / "lab").glob("*.md"))],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_links_between_pages_and_files_resolve(page):
    """Every relative link of README, the manual and the lab log names a file or folder that exists."""
    broken = []
    for target in LINK.findall(page.read_text()):
        path = target.split("#", 1)[0]
        if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path):  # an anchor on the page, or a URL
            continue
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: links to nothing: {broken}"


def test_the_user_guide_lists_every_shipped_config():
    """Its table of configs names each file under launch/configs/ (a new config joins the table)."""
    guide = (REPO / "docs" / "user_guide.md").read_text()
    missing = sorted(p.name for p in (REPO / "launch" / "configs").glob("*.yaml") if f"`{p.name}`" not in guide)
    assert not missing, f"docs/user_guide.md's table of shipped configs lacks {missing}"
