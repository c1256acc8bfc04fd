"""A directory of training checkpoints: atomic writes, pruning, ``latest.json`` / ``best.json``
pointers, and finding the newest valid one on resume. The file format is :mod:`.format`.

Storage goes through ``pyarrow.fs`` (``file:///abs``, a plain local path, ``s3://bucket/prefix``,
...). Writes are atomic on local disks (``<name>.tmp`` + flush + fsync + rename + fsync of the
directory); on object stores ``move`` is a copy, which is still safe to read because a half
copied object fails its checksum. One writer per directory: opening a store deletes ``*.tmp``
files left by a crashed writer.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from rl_system.checkpoint.format import (
    COMPRESSIONS,
    CheckpointError,
    _read_all,
    _read_manifest,
    checkpoint_name,
    decode,
    encode,
)
from rl_system.errors import one_line
from rl_system.filesystems import atomic_output, resolve

__all__ = ["CheckpointStore", "CheckpointInfo", "LATEST", "BEST"]

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^ckpt-v(\d{8,})\.rlck$")
LATEST, BEST = "latest.json", "best.json"


@dataclass
class CheckpointInfo:
    name: str
    path: str
    policy_version: int
    manifest: dict[str, Any] | None  # None when the header could not be read
    error: str | None = None


def _score(manifest: dict[str, Any] | None) -> float | None:
    """What ranks a checkpoint as best: its finite ``mean_return``, else ``None`` (no score)."""
    r = None if manifest is None else manifest.get("mean_return")
    return r if isinstance(r, (int, float)) and math.isfinite(r) else None


class CheckpointStore:
    """A directory of ``ckpt-v{policy_version:08d}.rlck`` files plus ``latest.json`` / ``best.json``.

    ``save`` keeps the ``keep_last`` newest checkpoints (by policy version) plus the one with the
    best finite ``mean_return``. Single writer per directory (opening deletes stale ``*.tmp``).
    """

    def __init__(self, root: str, keep_last: int = 3, compression: str = "auto", clean: bool = True):
        """``clean``: delete ``*.tmp`` files a crashed writer left (the store's single writer does);
        a reader beside a live writer passes False so it never deletes a write in progress."""
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        self.uri, self.keep_last, self.compression = root, keep_last, compression
        self.fs, self.root = resolve(root)
        self.root = self.root.rstrip("/") or "/"
        self._local = isinstance(self.fs, pafs.LocalFileSystem)
        try:
            self.fs.create_dir(self.root, recursive=True)
            if self.fs.get_file_info(self.root).type != pafs.FileType.Directory:
                raise NotADirectoryError(f"{self.root} is not a directory")
        except OSError as err:
            raise CheckpointError(f"cannot open checkpoint directory {root}: {one_line(err)}") from None
        self._manifests: dict[str, dict[str, Any]] = {}  # name -> manifest, for pruning
        self.skipped: list[tuple[str, str]] = []  # (path, reason) from the last load_latest_valid
        self.last_bytes = 0  # size of the last checkpoint file written
        self.removed_tmp = self._remove_stale_tmp() if clean else []

    # -- paths -------------------------------------------------------------------------------
    def path(self, name: str) -> str:
        return name if name.startswith(self.root + "/") else f"{self.root}/{name}"

    def _display(self, path: str) -> str:
        return path if self._local else f"{self.fs.type_name}://{path}"

    def _names(self) -> list[tuple[int, str]]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        out = []
        for info in infos:
            m = _NAME_RE.match(info.base_name)
            if m and info.type == pafs.FileType.File:
                out.append((int(m.group(1)), info.base_name))
        return sorted(out)

    def _remove_stale_tmp(self) -> list[str]:
        removed = []
        for info in self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True)):
            if info.base_name.endswith(".tmp") and info.type == pafs.FileType.File:
                try:
                    self.fs.delete_file(info.path)
                    removed.append(info.path)
                except OSError as err:  # pragma: no cover - best effort
                    log.warning("could not remove stale %s: %s", info.path, one_line(err))
        if removed:
            log.warning("removed %d stale temporary file(s) from a crashed writer: %s", len(removed),
                        ", ".join(os.path.basename(p) for p in removed))
        return removed

    # -- writing -----------------------------------------------------------------------------
    def _write_atomic(self, path: str, chunks: list[Any]) -> None:
        try:
            with atomic_output(self.fs, path) as out:
                for chunk in chunks:
                    out.write(chunk)
        except OSError as err:
            raise CheckpointError(f"cannot write {self._display(path)}: {one_line(err)}") from None

    def _write_json(self, name: str, data: dict[str, Any]) -> None:
        self._write_atomic(self.path(name), [json.dumps(data, indent=2, sort_keys=True).encode()])

    def save(self, state: dict[str, Any], manifest_fields: dict[str, Any]) -> str:
        """Write ``state`` as ``ckpt-v{policy_version:08d}.rlck`` (replacing one of the same version),
        prune, update the pointers; returns the path. Raises ``CheckpointError`` on I/O failure
        (no partial file is left and existing checkpoints are untouched) and ``ValueError`` for a
        state or manifest that cannot be stored."""
        header, payload, manifest = encode(state, manifest_fields, self.compression)
        name = checkpoint_name(manifest["policy_version"])
        path = self.path(name)
        self._write_atomic(path, [header, payload])
        self.last_bytes = len(header) + len(payload)
        self._manifests[name] = manifest
        best = self._prune()
        pointer = {"name": name, "path": self._display(path), "manifest": manifest}
        self._write_json(LATEST, pointer)
        if best is not None:
            self._write_json(BEST, {"name": best, "path": self._display(self.path(best)),
                                    "manifest": self._manifests[best]})
        return self._display(path)

    def _manifest_or_none(self, name: str) -> dict[str, Any] | None:
        if name not in self._manifests:
            try:
                self._manifests[name] = _read_manifest(self.fs, self.path(name), self._display(self.path(name)))
            except CheckpointError:
                return None
        return self._manifests[name]

    def _best_first(self, names: list[str]) -> list[str]:
        """Those of ``names`` whose manifest has a score (:func:`_score`), best first; on a tie the
        newer name first (names are zero-padded versions, so they sort as versions do)."""
        scored = [(r, n) for n in names if (r := _score(self._manifest_or_none(n))) is not None]
        return [n for _, n in sorted(scored, reverse=True)]

    def _prune(self) -> str | None:
        """Delete all but the newest ``keep_last`` and the best; returns the best's name."""
        names = [n for _, n in self._names()]
        ranked = self._best_first(names)
        best = ranked[0] if ranked else None
        keep = set(names[-self.keep_last:]) | ({best} if best else set())
        for n in names:
            if n not in keep:
                try:
                    self.fs.delete_file(self.path(n))
                except OSError as err:
                    log.warning("could not prune %s: %s", n, one_line(err))
                self._manifests.pop(n, None)
        return best

    # -- reading -----------------------------------------------------------------------------
    def list(self) -> list[CheckpointInfo]:
        out = []
        for version, name in self._names():
            path = self.path(name)
            try:
                m, err = _read_manifest(self.fs, path, self._display(path)), None
            except CheckpointError as e:
                m, err = None, str(e)
            out.append(CheckpointInfo(name, self._display(path), version, m, err))
        return out

    def _locate(self, path_or_name: str) -> tuple[pafs.FileSystem, str]:
        if "://" in path_or_name:
            return resolve(path_or_name)
        if "/" not in path_or_name:
            return self.fs, self.path(path_or_name)
        return self.fs, (os.path.abspath(path_or_name) if self._local else path_or_name)

    def read_manifest(self, path_or_name: str) -> dict[str, Any]:
        fs, path = self._locate(path_or_name)
        return _read_manifest(fs, path, path_or_name if "/" in path_or_name else self._display(path))

    def load(self, path_or_name: str, map_location: Any = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
        fs, path = self._locate(path_or_name)
        name = path_or_name if "/" in path_or_name else self._display(path)
        return decode(_read_all(fs, path, name), name, map_location)

    def load_latest_valid(self, map_location: Any = "cpu", quarantine: bool = False
                          ) -> tuple[dict[str, Any], dict[str, Any], str]:
        """Newest checkpoint that loads; corrupt newer ones are skipped, logged and listed in
        ``self.skipped``. With ``quarantine=True`` files whose *content* is bad are renamed to
        ``<name>.corrupt`` (out of the listing, kept for inspection) so a resumed run does not keep
        a dead file among its newest. Raises ``CheckpointError`` if none is valid."""
        return self._first_valid([n for _, n in reversed(self._names())], "valid checkpoint", map_location,
                                 quarantine)

    def load_best(self, map_location: Any = "cpu") -> tuple[dict[str, Any], dict[str, Any], str]:
        """The checkpoint with the highest finite ``mean_return`` in its manifest (ties: the newer),
        as ``save`` keeps and ``best.json`` names it. Ranked from the manifests themselves, not the
        pointer file, so a stale or torn ``best.json`` cannot mislead; a best that no longer loads
        is skipped (``self.skipped``) for the next best. Raises ``CheckpointError`` if none scores."""
        return self._first_valid(self._best_first([n for _, n in self._names()]), "checkpoint with a mean return",
                                 map_location, quarantine=False)

    def best_path(self) -> str | None:
        """The checkpoint :meth:`load_best` would try first (the one ``best.json`` names), ranked from
        the manifests without loading it; None if no checkpoint has a score."""
        ranked = self._best_first([n for _, n in self._names()])
        return self._display(self.path(ranked[0])) if ranked else None

    def _first_valid(self, names: list[str], what: str, map_location: Any, quarantine: bool
                     ) -> tuple[dict[str, Any], dict[str, Any], str]:
        self.skipped = []
        for name in names:
            path = self.path(name)
            try:
                state, manifest = decode(_read_all(self.fs, path, self._display(path)), self._display(path),
                                         map_location)
            except CheckpointError as err:
                self.skipped.append((self._display(path), str(err)))
                log.warning("skipping checkpoint: %s", err)
                if quarantine and "cannot read" not in str(err) and "no such" not in str(err):
                    try:
                        self.fs.move(path, path + ".corrupt")
                    except OSError:
                        pass
                continue
            return state, manifest, self._display(path)
        detail = f"; skipped {len(self.skipped)} corrupt: " + ", ".join(
            os.path.basename(p) for p, _ in self.skipped) if self.skipped else ""
        raise CheckpointError(f"no {what} in {self._display(self.root)}{detail}")
