"""Where results go and how they are written (``bench/results/README.md`` describes the layout):

* one stamped JSON and one Markdown per suite and sitting (:func:`write_suite`), in the suite's
  folder under ``bench/results/``;
* per-run raw data (a run's curve and figures) compressed, one ``.json.xz`` per run
  (:func:`write_run`), read back by :func:`read_json` (which also reads plain ``.json``);
* aggregates that list the per-run files they were built from (:func:`run_index`) instead of
  repeating them.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.harness.stamp import RESULTS, stamp

__all__ = ["RESULTS", "command_line", "open_text", "read_json", "read_text", "run_index", "write_run", "write_suite", "write_tables"]

#: the fields an aggregate keeps of each run beside the file it points to (enough to tell runs apart)
INDEX_KEYS = ("peer", "env", "seed", "env_steps", "final_return", "commit")


def command_line(command: str, argv: list[str] | None = None) -> str:
    """The command a result records: ``command`` and its arguments, ``argv`` where ``main`` was
    called with them (tests, other scripts), else the process's own."""
    import sys

    return " ".join([command, *(sys.argv[1:] if argv is None else argv)])


def open_text(path: Path):
    """``path`` opened for reading text, decompressed where it ends in ``.xz`` or ``.gz``."""
    path = Path(path)
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_text(path: Path) -> str:
    """The text of ``path`` (a stored transcript), decompressed where it ends in ``.xz`` or ``.gz``."""
    with open_text(path) as f:
        return f.read()


def read_json(path: Path) -> Any:
    """A stored JSON, plain or compressed (``.json.xz``, ``.json.gz``)."""
    return json.loads(read_text(path))


def write_run(path: Path, row: dict[str, Any]) -> Path:
    """One run's row (its curve included) as ``<path>.json.xz`` (``path`` without suffix, or with
    ``.json``/``.json.xz``); returns the file written. Compressed: curves are most of a suite's bytes."""
    path = Path(path)
    name = path.name.removesuffix(".xz").removesuffix(".json")
    out = path.with_name(f"{name}.json.xz")
    out.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(out, "wt", encoding="utf-8", preset=9) as f:
        json.dump(row, f)
    return out


def run_index(runs: Iterable[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """What an aggregate keeps of ``runs``: for a run read from a file (its ``source``), that file
    (relative to ``folder``) and :data:`INDEX_KEYS`; a run without a file whole, less its curve."""
    out = []
    for r in runs:
        if r.get("source") and not Path(r["source"]).is_dir():
            out.append({"file": os.path.relpath(r["source"], folder),
                        **{k: r[k] for k in INDEX_KEYS if k in r}})
        else:
            out.append({k: v for k, v in r.items() if k not in ("curve", "source")})
    return out


def write_suite(out: Path, name: str, data: dict[str, Any], markdown: str,
                compress: bool = False) -> tuple[Path, Path]:
    """``out/<name>.json`` (``data``, which carries its stamp) and ``out/<name>.md``; with
    ``compress``, ``out/<name>.json.xz`` (data that holds every run's figures)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{name}.md"
    if compress:
        js = out / f"{name}.json.xz"
        with lzma.open(js, "wt", encoding="utf-8", preset=9) as f:
            json.dump(data, f, indent=1, default=str)
    else:
        js = out / f"{name}.json"
        js.write_text(json.dumps(data, indent=1, default=str) + "\n")
    md.write_text(markdown if markdown.endswith("\n") else markdown + "\n")
    return js, md


def write_tables(out: Path, name: str, runs: list[dict[str, Any]],
                 markdown: Callable[[dict[str, Any], list[dict[str, Any]], str], str], command: str,
                 argv: list[str] | None = None) -> str:
    """A learning suite's aggregate: ``out/<name>.json`` (the stamp and :func:`run_index` of
    ``runs``) and ``out/<name>.md`` (``markdown(stamp, runs, the command line)``); returns the
    Markdown."""
    st = stamp()
    text = markdown(st, runs, command_line(command, argv))
    write_suite(out, name, {"meta": st, "runs": run_index(runs, Path(out))}, text)
    return text
