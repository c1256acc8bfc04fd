"""bench.greedy_cycles: a repeated observation is counted in a deterministic env, never in one whose
state moves on, and a bad run path is one line with exit 2."""

import pytest
import torch

from bench.greedy_cycles import greedy_cycles, main
from rl_system.api import make_env


def test_a_policy_that_stands_still_repeats_every_episode():
    env = make_env("magym:Foraging-8x8-2p-2f-coop-v3", 1, seed=0, reward="team")
    try:  # action 0 is LBF's NONE: the field never changes, so the second observation is the first
        out = greedy_cycles(lambda obs: torch.zeros(1, 2, dtype=torch.long), env, episodes=3, seed=0)
    finally:
        env.close()
    assert out["repeated"] == 3 and out["length_mean"] == 50 and out["return_mean"] == 0


def test_a_state_that_moves_on_never_repeats():
    env = make_env("CartPole", 1, seed=0)
    try:  # always pushing left: the pole falls through states that never recur exactly
        out = greedy_cycles(lambda obs: torch.zeros(1, dtype=torch.long), env, episodes=3, seed=0)
    finally:
        env.close()
    assert out["repeated"] == 0 and 0 < out["length_mean"] < 50


def test_a_missing_run_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "nosuchrun")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("greedy_cycles: ") and "\n" not in err
