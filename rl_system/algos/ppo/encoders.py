"""Observation encoders, one per observation key, chosen from the key's spec and overridable
under ``model.encoders`` (:class:`~rl_system.config.EncoderConfig`).

=========  ===================================================================================
type       what it is
=========  ===================================================================================
``flat``   the entry flattened into the trunk's input (and normalised with ``normalize_obs``)
``onehot`` an integer entry with bounds ``[low, high]`` as one-hot vectors of ``high - low + 1``,
           flattened into the trunk's input (a Gymnasium ``Discrete`` observation: POPGym's cards)
``nature`` the DQN Nature CNN (Mnih et al. 2015): 32 8x8/4, 64 4x4/2, 64 3x3/1, linear 512;
           images of at least 36x36
``impala`` the IMPALA ResNet (Espeholt et al. 2018): stages of 16, 32, 32 channels, each a
           3x3 conv, a 3x3/2 max-pool and two residual blocks; linear 256
``conv``   a small conv stack with "same" padding (default one 16-channel 3x3 conv and a
           linear 128, like the MinAtar paper's network) for small images
``scan``   1-D convs with circular padding along the first spatial axis (the beams of a
           360-degree range scan such as Navigation's ``lidar [1, 36, 4]``), the channels and the
           second axis (elevations) folded into input channels: 16 5/1, 16 5/2, linear 128.
           Circular because beam 0 neighbours the last beam; 1-D because a 2-D conv over a
           36x4 scan costs ~7x more CPU time for the same receptive field
=========  ===================================================================================

``auto`` (the default for every key) picks ``nature`` for a uint8 or bool image ``[C, H, W]`` /
``[H, W, C]`` of at least 36x36, ``conv`` for a smaller one, ``onehot`` for an int64 entry with
bounds spanning at most 256 values, and ``flat`` for everything else (float scans too: name
``scan`` for them). Images stay uint8/bool on the wire and in the rollout
buffers; the encoder scales them on the policy's device (uint8 / 255; a float entry with bounds
``[0, high]`` / ``high``).

Layout: ``layout: auto`` reads a 3-D entry as channels-last when its last axis is shorter than
both others (MinAtar's ``[10, 10, 4]``, Atari's ``[84, 84, 4]``), else channels-first
(``[4, 84, 84]``, ``[1, 36, 4]``); a 2-D entry is one channel. Name ``chw`` or ``hwc`` where that
guess is wrong (a ``[10, 10, 10]`` entry).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rl_system.algos.ppo.config import EncoderConfig
from rl_system.config import ConfigError
from rl_system.envs.base import ACTION_MASK, TensorSpec

CONV_TYPES = ("nature", "impala", "conv", "scan")
_NATURE_MIN = 36  # 8x8/4 -> 4x4/2 -> 3x3/1 leaves at least one pixel
_ONEHOT_MAX = 256


def layout_of(shape: tuple[int, ...], layout: str) -> str:
    """``"chw"`` or ``"hwc"`` for a 2-D/3-D entry (see the module docstring)."""
    if layout != "auto" or len(shape) == 2:
        return "chw" if layout == "auto" else layout
    return "hwc" if shape[2] < shape[0] and shape[2] < shape[1] else "chw"


def chw(shape: tuple[int, ...], layout: str) -> tuple[int, int, int]:
    """``(C, H, W)`` of a 2-D/3-D entry read with ``layout``."""
    if len(shape) == 2:
        return (1, *shape)
    return tuple(shape) if layout_of(shape, layout) == "chw" else (shape[2], shape[0], shape[1])


def resolve(key: str, spec: TensorSpec, cfg: EncoderConfig | str | None) -> EncoderConfig:
    """The encoder of ``key``: ``cfg`` (from ``model.encoders``) or the spec's default; a
    :class:`ConfigError` line where a conv encoder does not fit the entry's shape."""
    cfg = EncoderConfig.model_validate(cfg or {})  # also the shorthand "scan"
    kind = cfg.type
    if kind == "auto":
        image = len(spec.shape) == 3 and spec.dtype in (torch.uint8, torch.bool)
        if not image:
            kind = "onehot" if onehot_width(spec) is not None else "flat"
        else:
            _, h, w = chw(spec.shape, cfg.layout)
            kind = "nature" if min(h, w) >= _NATURE_MIN else "conv"
        cfg = cfg.model_copy(update={"type": kind})
    if kind == "onehot" and onehot_width(spec) is None:
        raise ConfigError(f"model.encoders.{key}: 'onehot' needs an integer entry with bounds spanning at most "
                          f"{_ONEHOT_MAX} values; {key!r} is {spec.dtype} in [{spec.low}, {spec.high}]")
    if kind in CONV_TYPES:
        if len(spec.shape) not in (2, 3):
            raise ConfigError(f"model.encoders.{key}: a {kind!r} encoder needs an image- or scan-shaped entry "
                              f"([C, H, W], [H, W, C] or [H, W]); {key!r} has shape {list(spec.shape)}")
        _, h, w = chw(spec.shape, cfg.layout)
        if kind == "nature" and min(h, w) < _NATURE_MIN:
            raise ConfigError(f"model.encoders.{key}: the 'nature' CNN needs at least {_NATURE_MIN}x{_NATURE_MIN} "
                              f"pixels, {key!r} is {h}x{w}; use 'conv' or 'impala'")
    return cfg


def onehot_width(spec: TensorSpec) -> int | None:
    """Values an integer entry spans (``high - low + 1``), or None where it is not one-hot-able."""
    if spec.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8) \
            or spec.low is None or spec.high is None:
        return None
    width = int(spec.high) - int(spec.low) + 1
    return width if 1 <= width <= _ONEHOT_MAX else None


def plan(obs_spec: dict[str, TensorSpec], encoders: dict[str, EncoderConfig]) -> dict[str, EncoderConfig]:
    """Every observation key's resolved encoder (``action_mask`` is not an input)."""
    unknown = sorted(set(encoders) - set(obs_spec) - {ACTION_MASK})
    if unknown:
        raise ConfigError(f"model.encoders: no observation key {', '.join(map(repr, unknown))}; the env's keys "
                          f"are {', '.join(sorted(k for k in obs_spec if k != ACTION_MASK))}")
    return {k: resolve(k, s, encoders.get(k)) for k, s in sorted(obs_spec.items()) if k != ACTION_MASK}


def _init(module: nn.Module) -> nn.Module:
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(m.weight, math.sqrt(2))
            nn.init.zeros_(m.bias)
    return module


def _pair(v: int | list[int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


class _Residual(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv0 = nn.Conv2d(ch, ch, 3, padding=1)
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


def _impala_stage(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.MaxPool2d(3, 2, padding=1),
                         _Residual(c_out), _Residual(c_out))


class _CircularConv1d(nn.Module):
    """A 1-D conv along a circular axis (``[B, C, L]``): the ends wrap around."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int):
        super().__init__()
        self.pad = kernel // 2
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (self.pad, self.pad), mode="circular") if self.pad else x)


_DEFAULTS = {  # channels, kernels, strides, features
    "nature": ([32, 64, 64], [8, 4, 3], [4, 2, 1], 512),
    "impala": ([16, 32, 32], None, None, 256),
    "conv": ([16], [3], [1], 128),
    "scan": ([16, 16], [5, 5], [1, 2], 128),
}


class ConvEncoder(nn.Module):
    """One image/scan entry ``[B, *spec.shape]`` -> features ``[B, features]`` (ReLU)."""

    def __init__(self, spec: TensorSpec, cfg: EncoderConfig):
        super().__init__()
        kind = cfg.type
        channels, kernels, strides, features = _DEFAULTS[kind]
        channels = cfg.channels or channels
        self.layout = layout_of(spec.shape, cfg.layout)
        self.unsqueeze = len(spec.shape) == 2
        c, h, w = chw(spec.shape, cfg.layout)
        self.scale = _scale(spec)
        if kind == "impala":
            stages, c_in = [], c
            for ch in channels:
                stages.append(_impala_stage(c_in, ch))
                c_in = ch
            body = nn.Sequential(*stages, nn.ReLU())
        else:
            kernels, strides = cfg.kernels or kernels, cfg.strides or strides
            if not (len(kernels) == len(strides) == len(channels)):
                raise ConfigError(f"model.encoders: channels, kernels and strides must be as long as each other, got "
                                  f"{len(channels)}, {len(kernels)}, {len(strides)}")
            body = _conv_stack(kind, c * w if kind == "scan" else c, channels, kernels, strides)
        self.scan = kind == "scan"
        with torch.no_grad():
            flat = body(self._arrange(torch.zeros(1, c, h, w))).numel()
        self.net = _init(nn.Sequential(body, nn.Flatten(), nn.Linear(flat, cfg.features or features), nn.ReLU()))
        self.out_dim = cfg.features or features

    def _arrange(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W]`` -> what the conv stack takes (scans: ``[B, C * W, H]``)."""
        return x.permute(0, 1, 3, 2).flatten(1, 2) if self.scan else x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.scale != 1.0:
            x = x * self.scale
        if self.unsqueeze:
            x = x.unsqueeze(1)
        elif self.layout == "hwc":
            x = x.permute(0, 3, 1, 2)
        return self.net(self._arrange(x))


def _conv_stack(kind: str, c_in: int, channels: list[int], kernels: list, strides: list) -> nn.Sequential:
    layers: list[nn.Module] = []
    for ch, k, st in zip(channels, kernels, strides):
        if kind == "scan":
            if not (isinstance(k, int) and isinstance(st, int)):
                raise ConfigError(f"model.encoders: a 'scan' encoder's kernels and strides are ints (1-D convs), "
                                  f"got {k!r} / {st!r}")
            layers.append(_CircularConv1d(c_in, ch, k, st))
        elif kind == "nature":
            layers.append(nn.Conv2d(c_in, ch, _pair(k), _pair(st)))
        else:
            kh, kw = _pair(k)
            layers.append(nn.Conv2d(c_in, ch, (kh, kw), _pair(st), padding=(kh // 2, kw // 2)))  # "same"
        layers.append(nn.ReLU())
        c_in = ch
    return nn.Sequential(*layers)


def _scale(spec: TensorSpec) -> float:
    if spec.dtype == torch.uint8:
        return 1.0 / 255.0
    if spec.dtype.is_floating_point and spec.low == 0.0 and spec.high is not None and math.isfinite(spec.high) \
            and spec.high > 0:
        return 1.0 / spec.high
    return 1.0


class ObsEncoders(nn.Module):
    """Every conv-encoded key of an observation: ``obs`` -> ``[B, sum(features)]`` (sorted keys)."""

    def __init__(self, obs_spec: dict[str, TensorSpec], chosen: dict[str, EncoderConfig]):
        super().__init__()
        self.nets = nn.ModuleDict({k: ConvEncoder(obs_spec[k], e) for k, e in chosen.items() if e.type in CONV_TYPES})
        self.out_dim = sum(n.out_dim for n in self.nets.values())

    def forward(self, obs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return [net(obs[k]) for k, net in self.nets.items()]
