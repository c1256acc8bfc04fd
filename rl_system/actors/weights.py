"""A policy's weights on their way from the learner to the workers: :class:`PolicyWeights`."""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from typing import Any

import torch

from rl_system.checkpoint.writer import PackedTensor

INBAND_MAX_BYTES = 64 * 1024
"""Weights up to this size pickle their buffers in-band, as ``bytes``; larger ones as NumPy arrays.
Ray ships a task's small arguments and results inside the call itself (up to 100 KiB by
default); an object that pickles out-of-band buffers takes the shared-memory object store, where
one memcpy in and a zero-copy read out beat pickling large weights into the call."""


class PolicyWeights(MutableMapping):
    """A state dict (``{name: CPU tensor}``) made for the trip from the learner to the workers,
    which every round takes on its critical path.

    * It pickles as one buffer per dtype, and the names, shapes and offsets in it: ``bytes`` for
      small weights, a NumPy array (:class:`~rl_system.checkpoint.writer.PackedTensor`) for large
      ones (:data:`INBAND_MAX_BYTES`). PyTorch pickles a tensor through its storage, ~45 µs a
      tensor each way (CartPole's 12 tensors: 0.54 ms to pickle, 0.86 ms to unpickle on a 2-core
      EPYC VM); twelve NumPy arrays took Ray's object store.
    * Unpickling makes no tensors: they are made on first use (a lookup, ``len``, iteration),
      in the receiving call's own code, where torch calls ran ~3× faster than while Ray
      unpickles a call's arguments. A worker that already holds the version never makes them.

    Together these took a CartPole round's Ray traffic (the learner returning the weights, two
    workers taking them, 87 KB rollouts, no compute) from 9.1–10.0 to 7.9–8.7 ms on a 2-core Xeon
    VM; the same traffic without weights took 6.7–7.2 ms (a scratch replica of the round).

    Once made, every tensor is its own writable copy, in the order the learner wrote them, so
    whoever holds the weights, in the learner's process or after the trip, holds plain tensors by
    name. ``torch.nn.Module.load_state_dict`` takes it as it takes a dict."""

    __slots__ = ("_tensors", "_packed")

    def __init__(self, tensors: dict[str, Any] | None = None):
        self._tensors: dict[str, Any] | None = dict(tensors) if tensors is not None else {}
        self._packed: tuple | None = None

    @classmethod
    def _from_packed(cls, buffers: dict[str, bytes | PackedTensor], layout: list) -> PolicyWeights:
        weights = cls.__new__(cls)
        weights._tensors, weights._packed = None, (buffers, layout)
        return weights

    def _items(self) -> dict[str, Any]:
        if self._tensors is None:
            self._tensors, self._packed = _unpack(*self._packed), None
        return self._tensors

    def __getitem__(self, name: str) -> Any:
        return self._items()[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._items()[name] = value

    def __delitem__(self, name: str) -> None:
        del self._items()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        if self._tensors is None:
            return f"PolicyWeights(<{len(self._packed[1])} entries, packed>)"
        return f"PolicyWeights({list(self._tensors)})"

    def __reduce__(self) -> tuple[Any, ...]:
        packed = self._packed if self._tensors is None else _pack(self._tensors)  # passed on unopened
        return (_packed_weights, packed)


def _pack(tensors: dict[str, Any]) -> tuple[dict[str, bytes | PackedTensor], list[tuple[str, bool, Any]]]:
    """``(buffers, layout)``: one flat buffer per dtype, and per entry ``(name, True, (dtype, offset,
    shape))`` for a tensor or ``(name, False, value)`` for anything else."""
    parts: dict[torch.dtype, list[torch.Tensor]] = {}
    sizes: dict[torch.dtype, int] = {}
    layout: list[tuple[str, bool, Any]] = []
    for name, value in tensors.items():
        if not isinstance(value, torch.Tensor):
            layout.append((name, False, value))
            continue
        value = value.detach()
        offset = sizes.get(value.dtype, 0)
        parts.setdefault(value.dtype, []).append(value.reshape(-1))
        sizes[value.dtype] = offset + value.numel()
        layout.append((name, True, (_dtype_name(value.dtype), offset, tuple(value.shape))))
    flat = {dtype: torch.cat(group).cpu() for dtype, group in parts.items()}
    inband = sum(t.numel() * t.element_size() for t in flat.values()) <= INBAND_MAX_BYTES
    buffers = {_dtype_name(dtype): t.view(torch.uint8).numpy().tobytes() if inband else PackedTensor(t)
               for dtype, t in flat.items()}
    return buffers, layout


def _packed_weights(buffers: dict[str, bytes | PackedTensor], layout: list) -> PolicyWeights:
    return PolicyWeights._from_packed(buffers, layout)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _flat(buffer: bytes | PackedTensor, dtype: str) -> torch.Tensor:
    """A dtype's flat buffer as a tensor (read-only memory where it came from the object store)."""
    if isinstance(buffer, PackedTensor):
        return buffer.to_tensor()
    if not buffer:  # frombuffer refuses an empty buffer
        return torch.empty(0, dtype=getattr(torch, dtype))
    return torch.frombuffer(bytearray(buffer), dtype=torch.uint8).view(getattr(torch, dtype))


def _unpack(buffers: dict[str, bytes | PackedTensor], layout: list[tuple[str, bool, Any]]) -> dict[str, Any]:
    flat = {dtype: _flat(buffer, dtype) for dtype, buffer in buffers.items()}
    tensors: dict[str, Any] = {}
    for name, is_tensor, slot in layout:
        if is_tensor:
            dtype, offset, shape = slot
            tensors[name] = flat[dtype][offset:offset + math.prod(shape)].view(shape).clone()
        else:
            tensors[name] = slot
    return tensors
