"""rl_system.evaluate: the per-env episode quota that keeps short episodes from dominating."""

import torch

from rl_system.evaluate import _within_quota


def test_quota_keeps_each_envs_first_episodes_in_finishing_order():
    counts = torch.zeros(3, dtype=torch.int64)
    keep = _within_quota(torch.tensor([0, 1, 0, 0, 2, 1]), counts, per_env=2)
    assert keep.tolist() == [True, True, True, False, True, True] and counts.tolist() == [2, 2, 1]
    keep = _within_quota(torch.tensor([1, 2, 2, 0]), counts, per_env=2)  # the next rollout
    assert keep.tolist() == [False, True, False, False] and counts.tolist() == [2, 2, 2]
    assert _within_quota(torch.tensor([], dtype=torch.int64), counts, per_env=2).numel() == 0
