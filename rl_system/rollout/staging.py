"""Moving a finished rollout from a GPU worker to host memory in one go.

A worker whose env batch, policy and rollout buffer live on CUDA would otherwise pay one
synchronising device-to-host copy per column when the codec reads it. :class:`HostStaging` keeps
one pinned host buffer per column (allocated on first use, reused every round), queues every copy
``non_blocking`` on the current stream and synchronises once. Host columns pass through untouched,
so the CPU path costs nothing.
"""

from __future__ import annotations

import torch

from rl_system.rollout.contract import Columns


class HostStaging:
    """Pinned host copies of a rollout's device columns (buffers reused across rounds)."""

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def to_host(self, columns: Columns) -> Columns:
        """``columns`` with every CUDA tensor replaced by its host copy (pinned, reused: valid
        until the next call); host tensors are returned as they are."""
        on_device = [k for k, v in columns.items() if v.is_cuda]
        if not on_device:
            return columns
        out = dict(columns)
        for name in on_device:
            src = columns[name]
            buf = self._buffers.get(name)
            if buf is None or buf.dtype != src.dtype or buf.numel() < src.numel():
                # Flat and with headroom: columns whose row count varies (final_*: one row per
                # ended episode) reuse it instead of pinning new memory (slow) every round.
                buf = torch.empty(src.numel() + src.numel() // 2, dtype=src.dtype, pin_memory=True)
                self._buffers[name] = buf
            host = buf[:src.numel()].view(src.shape)
            host.copy_(src, non_blocking=True)
            out[name] = host
        torch.cuda.current_stream(columns[on_device[0]].device).synchronize()
        return out
