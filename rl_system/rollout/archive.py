"""Rollout archive for offline analysis: one Arrow IPC file (Feather v2, LZ4 buffers) per round.

Table layout (:func:`rollouts_to_table`): one row per ``(worker, env, step)`` of a round, rows
ordered by worker id, then env index, then step -- so each env's trajectory is contiguous and
in time order.  Columns, in this order:

=================  ==========================  ===============================================
``round``          int64                       the training round (driver's round index)
``policy_version`` int64                       policy version that collected the rollout
``worker_id``      int32                       the worker that collected it
``env``            int32                       env index within its worker, ``0..N-1``
``step``           int32                       step ``t`` within the rollout, ``0..T-1``
every ``[T, N]``   its dtype (float32, int64,  e.g. ``logp``, ``value``, ``reward``,
column             bool, ...)                  ``terminated``, ``action`` (discrete)
every ``[T, N,     ``arrow.fixed_shape_tensor`` e.g. ``obs.obs`` ``[4]``, ``obs.lidar``
*s]`` column       of shape ``s``, same dtype  ``[1, 36, 4]``, a continuous ``action`` ``[A]``
=================  ==========================  ===============================================

Columns that are not ``[T, N, ...]`` (``last_*``, ``init_*``, ``final_*``; see
:mod:`rl_system.rollout.contract`) are left out.  bfloat16 columns are stored as float32 (Arrow has no
bfloat16).  The schema metadata holds ``rl_system.rollout.archive`` (format tag), ``rl_system.round``
and ``rl_system.rollouts`` (JSON list of the rollouts' headers, :meth:`RolloutMeta.header`, in row order).

Reading back: ``pyarrow.feather.read_table(path)`` / ``pandas.read_feather(path)`` /
:func:`read_archive`; ``table["obs.obs"].combine_chunks().to_numpy_ndarray()`` gives
``[rows, 4]``.  pyarrow's ``to_numpy_ndarray`` refuses bool tensors; :func:`column_to_numpy`
handles every column.  A human-readable report of a file (``rl-system rollouts inspect``) is
``archive_inspect.py``.
"""

from __future__ import annotations

import json
import math
import os
import struct
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
import torch

from rl_system.errors import one_line
from rl_system.filesystems import atomic_output, resolve
from rl_system.rollout import codec
from rl_system.rollout.contract import Layout, layout

__all__ = ["ArchiveError", "RolloutArchiver", "archive_compression", "column_to_numpy", "read_archive",
           "rollouts_to_table", "write_archive", "FORMAT", "ID_COLUMNS"]

FORMAT = "rollouts/1"
ID_COLUMNS = ("round", "policy_version", "worker_id", "env", "step")
_ARROW_MAGIC = b"ARROW1"


class ArchiveError(ValueError):
    """A rollout archive is missing, truncated, or not an Arrow IPC file (one line, names the file)."""


# ----------------------------------------------------------------------------------------- build

def _step_shape(cols: dict[str, torch.Tensor]) -> tuple[int, int]:
    """``(T, N)`` of a rollout: from ``reward``, else from the first column with >= 2 dims."""
    ref = cols.get("reward")
    if ref is None or ref.dim() < 2:
        ref = next((v for v in cols.values() if v.dim() >= 2), None)
    if ref is None:
        raise ValueError(f"rollout has no [T, N, ...] columns (columns: {', '.join(cols) or 'none'})")
    return int(ref.shape[0]), int(ref.shape[1])


def _step_array(t: torch.Tensor) -> pa.Array:
    """``[T, N, *s]`` tensor -> Arrow array of ``N*T`` rows in (env, step) order; one copy."""
    T, N, *s = t.shape
    if t.dtype == torch.bfloat16:
        t = t.float()
    # transpose + contiguous is the only copy; .numpy() and pa.array/from_numpy_ndarray are views
    # (bool scalars are bit-packed by Arrow, which costs one more pass).
    a = t.detach().cpu().transpose(0, 1).contiguous().numpy().reshape(N * T, *s)
    if not s:
        return pa.array(a)
    if a.dtype == np.bool_:  # from_numpy_ndarray refuses bool; build the extension array by hand
        storage = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), math.prod(s))
        return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.bool_(), s), storage)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(a)


def _rollout_batch(cols: dict[str, torch.Tensor], meta: dict, round_index: int) -> pa.RecordBatch:
    for key in ("version", "worker_id"):
        if key not in meta:
            raise ValueError(f"rollout meta lacks {key!r} (keys: {', '.join(map(str, meta))})")
    T, N = _step_shape(cols)
    rows = N * T
    arrays: dict[str, pa.Array] = {
        "round": pa.array(np.full(rows, round_index, dtype=np.int64)),
        "policy_version": pa.array(np.full(rows, int(meta["version"]), dtype=np.int64)),
        "worker_id": pa.array(np.full(rows, int(meta["worker_id"]), dtype=np.int32)),
        "env": pa.array(np.repeat(np.arange(N, dtype=np.int32), T)),
        "step": pa.array(np.tile(np.arange(T, dtype=np.int32), N)),
    }
    for name, t in cols.items():
        if layout(name) is not Layout.STEP:
            continue  # not one row per (env, step), whatever their shape happens to be
        if t.dim() >= 2 and tuple(t.shape[:2]) == (T, N):
            if name in arrays:
                raise ValueError(f"rollout column {name!r} clashes with an archive id column")
            arrays[name] = _step_array(t)
    return pa.RecordBatch.from_pydict(arrays)


def rollouts_to_table(rollouts: list[tuple[dict[str, torch.Tensor], dict]], round_index: int) -> pa.Table:
    """One row per (worker, env, step) across a round's decoded rollouts ``(columns, meta)``.

    Rows are ordered by ``worker_id`` (stable: rollouts of one worker keep their order), then env,
    then step; each rollout is one record batch of the table.  See the module docstring for the
    columns.  Raises ``ValueError`` when there are no rollouts or their columns/dtypes differ.
    """
    if not rollouts:
        raise ValueError("no rollouts to archive")
    order = sorted(range(len(rollouts)), key=lambda i: int(rollouts[i][1].get("worker_id", 0)))
    batches, metas = [], []
    for i in order:
        cols, meta = rollouts[i]
        batch = _rollout_batch(cols, meta, round_index)
        if batches and not batch.schema.equals(batches[0].schema):
            ref = batches[0].schema
            diff = [f"{f.name}: {f.type}" for f in batch.schema if ref.get_field_index(f.name) < 0
                    or not ref.field(f.name).type.equals(f.type)]
            missing = [n for n in ref.names if n not in batch.schema.names]
            raise ValueError(f"rollout of worker {meta['worker_id']} does not match the first rollout's "
                             f"columns (differs: {', '.join(diff) or '-'}; missing: {', '.join(missing) or '-'})")
        batches.append(batch)
        metas.append(meta)
    table = pa.Table.from_batches(batches)
    return table.replace_schema_metadata({
        "rl_system.rollout.archive": FORMAT,
        "rl_system.round": str(round_index),
        "rl_system.rollouts": json.dumps(metas, separators=(",", ":"), default=str),
    })


# ----------------------------------------------------------------------------------------- write

def write_archive(table: pa.Table, uri_or_path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> int:
    """Write ``table`` as an Arrow IPC file with LZ4-frame buffer compression; returns its size in bytes.

    Atomic: the file is written to ``<name>.tmp`` and moved over ``<name>`` only when complete
    (a reader never sees a partial archive; the ``.tmp`` is removed on failure).  Parent
    directories are created.
    """
    fs, path = resolve(uri_or_path, filesystem)
    parent = path.rstrip("/").rpartition("/")[0]
    if parent:
        fs.create_dir(parent, recursive=True)
    with atomic_output(fs, path) as out:
        with ipc.new_file(out, table.schema, options=ipc.IpcWriteOptions(compression="lz4")) as writer:
            writer.write_table(table)
        nbytes = out.tell()
    return nbytes


class RolloutArchiver:
    """Writes each round's rollouts to ``root/rollouts-r{round:06d}.arrow`` (wrap with ``ray.remote``).

    The driver calls ``archiver.write.remote(round, *payload_refs)`` and does not wait: Ray
    resolves the refs to the payload bytes inside this actor, so the learner never blocks on it.
    """

    def __init__(self, root_uri: str | os.PathLike, filesystem: pafs.FileSystem | None = None):
        self.root_uri = os.fspath(root_uri)
        self.fs, self.root = resolve(self.root_uri, filesystem)
        self.fs.create_dir(self.root, recursive=True)

    def path_for(self, round_index: int) -> str:
        """Where round ``round_index`` goes, in the form ``root_uri`` was given (URI or absolute path)."""
        name = f"rollouts-r{round_index:06d}.arrow"
        base = self.root_uri if "://" in self.root_uri else self.root  # as given: URI or absolute path
        return f"{base.rstrip('/')}/{name}"

    def write(self, round_index: int, *payloads: bytes) -> dict[str, Any]:
        """Decode ``payloads`` (codec bytes), archive them; returns ``{path, rows, bytes, seconds,
        pid}`` (``pid``: this process, which changes when Ray restarts the actor)."""
        t0 = time.perf_counter()
        table = rollouts_to_table([codec.decode(p) for p in payloads], round_index)
        name = f"rollouts-r{round_index:06d}.arrow"
        nbytes = write_archive(table, f"{self.root.rstrip('/')}/{name}", filesystem=self.fs)
        return {"path": self.path_for(round_index), "rows": table.num_rows, "bytes": nbytes,
                "seconds": time.perf_counter() - t0, "pid": os.getpid()}


# ------------------------------------------------------------------------------------------ read

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
