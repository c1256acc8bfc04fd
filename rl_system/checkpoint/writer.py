"""The checkpoint writer actor: takes a state already in the object store, writes it off the
learner's critical path.

Plain class; the driver wraps it::

    ckpt = ray.remote(Checkpointer).options(
        name="checkpointer", num_cpus=0, max_concurrency=4, max_restarts=0,
    ).remote(root, keep_last=3)

``max_concurrency >= 2`` is REQUIRED: it makes Ray run the methods in a thread pool, so ``stats``
and ``flush`` answer while a write is in progress and ``save`` never queues behind ``flush``
(with the default of 1, a ``flush`` call blocks every later ``save``/``stats`` call until it
returns). 4 leaves room for save + stats + flush + a spare. ``num_cpus=0`` because it mostly
waits on the disk (serialising, and LZ4 when it pays, do use a core while a write runs). The
same thread pool means calls may run out of order: before a ``flush`` that must include a save,
``ray.get`` that save's (instant) return first.

The learner hands over the state as ONE object ref wrapped in a list
(``ckpt.save.remote([ref], fields)``): Ray resolves top-level ref arguments before the call,
which would make the call wait for (and copy) the state; a ref nested in a list travels as a ref
and the actor becomes a borrower, so the object stays alive until the writer is done with it.
``ray.put(to_transport(state))`` puts tensors as NumPy arrays, several times faster than putting
torch tensors; the writer unpacks either form.

Pending work is bounded: one save in progress plus ONE "next" slot. A save that arrives while the
slot is taken replaces it (newest state wins; the replaced one counts as ``skipped``), so a slow
disk costs checkpoints, never memory or learner time. "Newest" means highest ``policy_version``:
Ray runs a threaded actor's calls in a thread pool, so two calls sent back to back can execute in
the other order; a save whose version is below one already accepted is skipped too (equal
versions replace, e.g. a final save of the same version with fresh metrics). After rewinding the
learner to an older checkpoint, start a new Checkpointer. Write errors (disk full, unwritable
directory, the learner that owns the object died) are caught and counted; the actor keeps going,
and earlier checkpoints are untouched because every write goes to a temporary name first.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import OrderedDict
from typing import Any

import ray
import torch

from rl_system.checkpoint.store import CheckpointStore
from rl_system.errors import one_line


class PackedTensor:
    """A tensor travelling as a NumPy array: Ray puts NumPy arrays into the object store with one
    memcpy (pickle-5 out-of-band buffers) and hands them out zero-copy, while torch tensors go
    through a slower pickling path (see ``bench/bench_checkpoint.py``). Dtypes NumPy lacks
    (bfloat16, float8...) travel as same-width integers and are viewed back."""

    __slots__ = ("array", "dtype")
    _VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

    def __init__(self, t: torch.Tensor):
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        self.dtype = str(t.dtype).removeprefix("torch.")
        try:
            self.array = t.numpy()
        except TypeError:  # no NumPy equivalent: ship the bits
            self.array = t.view(self._VIEW[t.element_size()]).numpy()

    def __reduce__(self):
        return (_unpack_tensor_args, (self.array, self.dtype))

    def to_tensor(self, copy: bool = False) -> torch.Tensor:
        """The tensor; on the object store's read-only memory unless ``copy`` (then its own)."""
        if copy:
            t = torch.from_numpy(self.array.copy())
        else:
            with warnings.catch_warnings():  # arrays from the object store are read-only; we only read
                warnings.simplefilter("ignore", UserWarning)
                t = torch.from_numpy(self.array)
        dtype = getattr(torch, self.dtype)
        return t if t.dtype == dtype else t.view(dtype)


def _unpack_tensor_args(array: Any, dtype: str) -> PackedTensor:
    p = PackedTensor.__new__(PackedTensor)
    p.array, p.dtype = array, dtype
    return p


def _map(obj: Any, fn: Any) -> Any:
    if isinstance(obj, dict):
        return (OrderedDict if isinstance(obj, OrderedDict) else dict)((k, fn(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return (tuple if isinstance(obj, tuple) else list)(fn(v) for v in obj)
    return obj


def to_transport(obj: Any) -> Any:
    """Every tensor in a nested dict/list/tuple -> :class:`PackedTensor` (no copy on CPU). Call
    ``ray.put(to_transport(state))``; the Checkpointer unpacks. Storage sharing between tensors is
    not kept (tied weights arrive as two equal tensors; ``load_state_dict`` does not mind)."""
    if isinstance(obj, torch.Tensor):
        return PackedTensor(obj)
    return _map(obj, to_transport)


def from_transport(obj: Any) -> Any:
    """Inverse of :func:`to_transport`; a state without packed tensors passes through unchanged."""
    if isinstance(obj, PackedTensor):
        return obj.to_tensor()
    return _map(obj, from_transport)


class Checkpointer:
    def __init__(self, root: str, keep_last: int = 3, compression: str = "auto"):
        self._store_args = (root, keep_last, compression)
        self.store: CheckpointStore | None = None
        self._open_error: str | None = None
        try:
            self._open_store()
        except Exception as e:  # noqa: BLE001 - an unwritable root must not kill the actor
            # Each save retries (the disk may come back); until then saves fail and are counted.
            self._open_error = one_line(e, with_type=True)
        self._cv = threading.Condition()
        self._next: tuple[list[Any], dict[str, Any]] | None = None
        self._in_progress = False
        self._closed = False
        self._high: int | None = None  # highest policy_version accepted so far
        self._stats: dict[str, Any] = {"saved": 0, "skipped": 0, "failed": 0, "last_error": None,
                                       "last_save_s": None, "last_path": None, "last_version": None,
                                       "bytes_written": 0}
        self._thread = threading.Thread(target=self._writer, name="checkpoint-writer", daemon=True)
        self._thread.start()

    # -- API ---------------------------------------------------------------------------------
    def save(self, state_ref_list: list[Any], manifest_fields: dict[str, Any]) -> None:
        """Queue a save and return at once. ``state_ref_list`` is ``[ObjectRef]`` (or ``[state]``
        when used in-process)."""
        if not isinstance(state_ref_list, (list, tuple)) or len(state_ref_list) != 1:
            raise TypeError("save expects [state_ref]: one ObjectRef wrapped in a list")
        version = manifest_fields.get("policy_version")
        with self._cv:
            if self._closed:
                raise RuntimeError("checkpointer is closed")
            if self._high is not None and version is not None and version < self._high:
                self._stats["skipped"] += 1  # arrived after a newer one (threaded actors reorder)
                return
            if self._next is not None:
                self._stats["skipped"] += 1  # the queued one was never started: newest wins
            self._next = (list(state_ref_list), dict(manifest_fields))
            if version is not None:
                self._high = version if self._high is None else max(self._high, version)
            self._cv.notify_all()

    def stats(self) -> dict[str, Any]:
        with self._cv:
            stats = {**self._stats, "pending": int(self._next is not None), "in_progress": self._in_progress,
                     "pid": os.getpid()}  # a new pid: Ray restarted this actor
        if stats["last_error"] is None and self._open_error and self.store is None:
            stats["last_error"] = f"cannot open checkpoint storage: {self._open_error}"
        return stats

    def flush(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Wait until nothing is pending or being written (or ``timeout_s`` passes); returns
        ``stats()``; after a timeout ``pending``/``in_progress`` show what is left."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cv:
            while self._next is not None or self._in_progress:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cv.wait(left)
        return self.stats()

    def close(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Flush, then stop the writer thread; later saves raise."""
        out = self.flush(timeout_s)
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        return out

    def ping(self) -> bool:
        return True

    def _open_store(self) -> CheckpointStore:
        if self.store is None:
            root, keep_last, compression = self._store_args
            self.store = CheckpointStore(root, keep_last=keep_last, compression=compression)
        return self.store

    # -- writer thread -----------------------------------------------------------------------
    def _writer(self) -> None:
        while True:
            with self._cv:
                while self._next is None and not self._closed:
                    self._cv.wait()
                if self._next is None:  # closed and drained
                    return
                job, self._next = self._next, None
                self._in_progress = True
            fields = job[1]
            t0 = time.perf_counter()
            try:
                path, err = self._write(*job), None
            except Exception as e:  # noqa: BLE001 - keep the actor alive whatever the write did
                path, err = None, one_line(e, with_type=True)  # not the exception: its traceback pins the state
            job = None  # drop our borrow of the object before waiting for the next one
            with self._cv:
                s = self._stats
                if err is None:
                    s["saved"] += 1
                    s["last_save_s"] = time.perf_counter() - t0
                    s["last_path"] = path
                    s["last_version"] = fields.get("policy_version")
                    s["bytes_written"] += self.store.last_bytes
                else:
                    s["failed"] += 1
                    s["last_error"] = f"v{fields.get('policy_version')}: {err}"
                self._in_progress = False
                self._cv.notify_all()

    def _write(self, refs: list[Any], fields: dict[str, Any]) -> str:
        """Fetch and write one state; its memory is released when this returns or raises."""
        item = refs[0]
        store = self._open_store()
        state = from_transport(ray.get(item) if isinstance(item, ray.ObjectRef) else item)
        return store.save(state, fields)
