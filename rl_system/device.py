"""Choosing the torch device of an actor from its config and the resources Ray gave it."""

from __future__ import annotations

import os

import torch


def resolve_device(requested: str) -> torch.device:
    """``auto`` -> ``cuda`` when this process can see a GPU (Ray sets CUDA_VISIBLE_DEVICES for
    actors given ``num_gpus``), else ``cpu``; anything else is taken as a torch device string."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {requested!r} requested but CUDA is not available on this node")
    return device


def resolve_threads(requested: int | str, num_cpus: float) -> int:
    """Torch intra-op threads of an actor: ``auto`` -> the CPUs it reserves from Ray (``num_cpus``,
    rounded down, at least 1), capped at the cores this process may run on. Threads then match
    Ray's accounting: an actor computes on the cores Ray counts as its own, and actors placed
    beside it do not fight it for them."""
    if requested != "auto":
        return int(requested)
    return max(1, min(int(num_cpus), usable_cores()))


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def bf16_fast(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 faster than float32: a CUDA GPU with bf16 support, or
    a CPU whose oneDNN has bf16 kernels (AVX-512 BF16 or AMX: Zen 4 and later, Sapphire Rapids and
    later). Elsewhere bf16 is emulated and slower than float32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` where :func:`bf16_fast`, else ``fp32``; anything else as given."""
    if requested != "auto":
        return requested
    return "bf16" if bf16_fast(device) else "fp32"
