"""Choosing the torch device of an actor from its config and the resources Ray gave it."""

from __future__ import annotations

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
