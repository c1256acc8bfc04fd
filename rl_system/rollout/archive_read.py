"""Reading rollout archives (:mod:`.archive` writes them): the table, a column as one NumPy array,
and the file's buffer compression. Arrow and NumPy only, so ``rl-system rollouts inspect`` and an
analysis notebook start without torch."""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc

from rl_system.errors import one_line
from rl_system.filesystems import resolve

FORMAT = "rollouts/1"
ID_COLUMNS = ("round", "policy_version", "worker_id", "env", "step")
_ARROW_MAGIC = b"ARROW1"


class ArchiveError(ValueError):
    """A rollout archive is missing, truncated, or not an Arrow IPC file (one line, names the file)."""


def _open_input(uri_or_path, filesystem) -> tuple[pafs.FileSystem, str, Any, int]:
    shown = os.fspath(uri_or_path)
    try:
        fs, path = resolve(uri_or_path, filesystem)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise ArchiveError(f"{shown}: no such file")
        if info.type == pafs.FileType.Directory:
            raise ArchiveError(f"{shown}: is a directory, not an archive file")
        return fs, path, fs.open_input_file(path), info.size
    except (pa.ArrowException, OSError) as e:
        raise ArchiveError(f"{shown}: cannot open: {one_line(e)}") from None


def _load(uri_or_path, filesystem) -> tuple[pa.Table, int, str]:
    """``(table, file_bytes, compression)``; every failure is one :class:`ArchiveError` line."""
    shown = os.fspath(uri_or_path)
    _, _, f, size = _open_input(uri_or_path, filesystem)
    with f:
        head = f.read(len(_ARROW_MAGIC))
        f.seek(0)
        try:
            table = ipc.open_file(f).read_all()
            comp = _file_compression(f)
        except (pa.ArrowException, OSError) as e:
            what = ("truncated or corrupt Arrow IPC file" if head == _ARROW_MAGIC
                    else "not an Arrow IPC (Feather v2) file")
            raise ArchiveError(f"{shown}: {what} ({size} bytes): {one_line(e)}") from None
    return table, size, comp


def read_archive(uri_or_path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> pa.Table:
    """Read a whole archive (path or URI); raises :class:`ArchiveError` for a missing/bad file."""
    return _load(uri_or_path, filesystem)[0]


def column_to_numpy(table: pa.Table, name: str) -> np.ndarray:
    """A column as one numpy array: ``[rows]`` for scalars, ``[rows, *shape]`` for tensors (bool too)."""
    col = table.column(name)
    if isinstance(col.type, pa.FixedShapeTensorType):
        flat = _values(col).to_numpy()
        return flat.reshape(len(col), *col.type.shape)
    return col.to_numpy()


# --- which buffer compression does the file use?  pyarrow does not expose it, so read the
# ``BodyCompression`` of the first record batch from its flatbuffer Message (Arrow format spec:
# Message{version, header_type, header, ...}; RecordBatch{length, nodes, buffers, compression};
# BodyCompression{codec: LZ4_FRAME=0 | ZSTD=1 (default 0), method}).

def _fb_field(buf: bytes, table: int, index: int) -> int | None:
    """Absolute position of field ``index`` of the flatbuffer table at ``table``, or None if absent."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    vsize = struct.unpack_from("<H", buf, vtable)[0]
    slot = 4 + 2 * index
    if slot + 2 > vsize:
        return None
    off = struct.unpack_from("<H", buf, vtable + slot)[0]
    return table + off if off else None


def _fb_deref(buf: bytes, pos: int) -> int:
    return pos + struct.unpack_from("<I", buf, pos)[0]


def _batch_compression(meta: bytes) -> str | None:
    """'lz4_frame' / 'zstd' / 'none' for a RecordBatch message's flatbuffer, None for other messages."""
    msg = _fb_deref(meta, 0)
    htype = _fb_field(meta, msg, 1)
    if htype is None or meta[htype] != 3:  # MessageHeader.RecordBatch
        return None
    batch = _fb_deref(meta, _fb_field(meta, msg, 2))
    comp = _fb_field(meta, batch, 3)
    if comp is None:
        return "none"
    codec_pos = _fb_field(meta, _fb_deref(meta, comp), 0)
    code = 0 if codec_pos is None else meta[codec_pos]
    return {0: "lz4_frame", 1: "zstd"}.get(code, f"codec#{code}")


def _file_compression(f) -> str:
    f.seek(8)  # "ARROW1" + 2 bytes padding, then the stream-format messages
    reader = ipc.MessageReader.open_stream(f)
    while True:
        try:
            msg = reader.read_next_message()
        except StopIteration:
            return "n/a (no record batches)"
        if msg is None:
            return "n/a (no record batches)"
        try:
            found = _batch_compression(msg.metadata.to_pybytes())
        except (struct.error, IndexError, TypeError):
            return "unknown"
        if found is not None:
            return found


def archive_compression(uri_or_path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> str:
    """Buffer compression of the archive's first record batch: 'lz4_frame', 'zstd' or 'none'."""
    return _load(uri_or_path, filesystem)[2]


def _values(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Tensor column -> all its elements (flattened storage); other columns unchanged."""
    if isinstance(col.type, pa.FixedShapeTensorType):
        return pa.chunked_array([c.storage.flatten() for c in col.chunks], type=col.type.value_type)
    return col
