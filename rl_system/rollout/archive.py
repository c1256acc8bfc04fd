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
handles every column.  This module builds and writes archives (torch tensors in);
:mod:`.archive_read` reads them (Arrow and NumPy only, so reading needs no torch) and
``archive_inspect.py`` reports on one file (``rl-system rollouts inspect``).
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
import torch

from rl_system.filesystems import atomic_output, resolve
from rl_system.rollout import codec
from rl_system.rollout.archive_read import (
    FORMAT,
    ID_COLUMNS,
    ArchiveError,
    archive_compression,
    column_to_numpy,
    read_archive,
)
from rl_system.rollout.contract import Layout, layout

__all__ = ["ArchiveError", "RolloutArchiver", "archive_compression", "column_to_numpy", "read_archive",
           "rollouts_to_table", "write_archive", "FORMAT", "ID_COLUMNS"]

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
