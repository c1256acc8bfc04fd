"""Where files go: local paths and ``pyarrow.fs`` URIs (``s3://``, ``gs://``, ``file://``), one
resolver for all of them, and atomic writes (a reader never sees half a file).

Used by the checkpoint store, the rollout archive, the run's JSON files, exported policies and videos.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs


def is_remote(uri_or_path: str) -> bool:
    """True for a filesystem URI other than ``file://`` (reachable from any node of a cluster)."""
    return "://" in uri_or_path and not uri_or_path.startswith("file://")


def resolve(uri_or_path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path)``: an explicit ``filesystem`` takes the path as is; ``scheme://`` goes
    through ``FileSystem.from_uri``; anything else is a local path (``~`` expanded, made absolute)."""
    p = os.fspath(uri_or_path)
    if filesystem is not None:
        return filesystem, p
    if "://" in p:
        return pafs.FileSystem.from_uri(p)
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(p))


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_output(fs: pafs.FileSystem, path: str) -> Iterator[Any]:
    """An output stream whose bytes appear at ``path`` only if the block completes.

    Writes ``<path>.tmp``, flushes, fsyncs (local disks), renames over ``path`` and fsyncs the
    directory so the rename itself is durable; on any error the ``.tmp`` is removed and the error
    propagates, leaving an earlier ``path`` untouched. On object stores ``move`` is a copy, which
    readers detect by checksum if it tears."""
    tmp = path + ".tmp"
    local = isinstance(fs, pafs.LocalFileSystem)
    try:
        with fs.open_output_stream(tmp, compression=None) as out:
            yield out
            out.flush()
        if local:
            _fsync(tmp)  # fsync is per inode: flushes what the stream wrote
        fs.move(tmp, path)
        if local:
            _fsync(os.path.dirname(path) or ".")
    except BaseException:
        try:
            fs.delete_file(tmp)
        except OSError:  # best effort; the original error matters
            pass
        raise


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """A temporary local file name beside ``path``, for a writer that wants a name rather than a
    stream (``torch.jit.save``, the ONNX exporter, an FFmpeg muxer); the file appears at ``path``
    only if the block completes, fsynced as :func:`atomic_output` does; on any error it is
    removed. Hidden (``.<name>.<random><suffix>``), with ``path``'s suffix, since some writers pick
    their format by it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, out)
        _fsync(str(out.parent))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str | os.PathLike, data: dict[str, Any], filesystem: pafs.FileSystem | None = None) -> None:
    """Write ``data`` as indented, key-sorted JSON at ``path`` (local path or URI), atomically."""
    fs, p = resolve(path, filesystem)
    with atomic_output(fs, p) as out:
        out.write(json.dumps(data, indent=2, sort_keys=True).encode())
