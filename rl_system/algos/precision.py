"""What runs in bfloat16 under ``learner.precision: bf16``.

The learner runs the update inside ``torch.autocast(dtype=bfloat16)``: matrix products and
convolutions of the encoders and recurrent cores take bf16 (2-3x the fp32 rate on CPUs with
AVX-512 BF16 or AMX, and on GPUs' tensor cores). The output layers do not. A bf16 logit or value
is rounded to 3 significant digits, and that rounding is the same for a sample in every epoch of
an update: a consistent error, which Adam follows wherever the true gradient is small (biases,
a well-fitted critic). Measured on a trained MinAtar policy, one 4-epoch update in bf16 moved the
weights 1.8x as far as fp32 and in a different direction (cosine 0.50; the critic's biases 5-20x
as far); with the heads in fp32 the cosine was 0.86, against 0.94 between two fp32 updates that
differ only in their thread count (docs/ppo.md, "Speed of the update").
"""

from __future__ import annotations

import torch
from torch import nn


class Float32Head(nn.Sequential):
    """An output MLP (logits, values, discriminator scores) that computes in float32 even inside
    an autocast region; outside one it is a plain ``nn.Sequential`` (same ``state_dict`` keys)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type):
            with torch.autocast(x.device.type, enabled=False):
                return super().forward(x.float())
        return super().forward(x)
