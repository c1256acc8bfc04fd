"""``bench.bench_update --alternate``: variants of a config timed in turn on one batch, a row each
with the critic's share of its FLOPs; ``--set`` overrides every config."""

import pytest

from bench.bench_update import alternating, markdown

TINY = ["workers.num_workers=1", "workers.num_envs=4", "workers.rollout_len=8", "mappo.num_epochs=1",
        "mappo.num_minibatches=2", "mappo.hidden_sizes=[16, 16]"]


def test_variants_are_timed_in_turn_and_a_joint_critic_does_a_smaller_share_of_the_work():
    pytest.importorskip("vmas")
    rows = alternating("vmas_balance_mappo", 1, 2, [["mappo.central_value=per_agent"], ["mappo.central_value=joint"]],
                       TINY)
    per_agent, joint = rows
    assert [r["variant"] for r in rows] == ["mappo.central_value=per_agent", "mappo.central_value=joint"]
    assert per_agent["samples"] == joint["samples"] == 4 * 8 * 4  # envs x steps x agents, one batch
    assert len(per_agent["times"]) == len(joint["times"]) == 2
    assert 0 < joint["critic_flop_share"] < per_agent["critic_flop_share"] < 1
    assert joint["gflop"] < per_agent["gflop"]
    stamp = {"date_utc": "d", "commit": "c", "cpu": "cpu", "cores": 2, "torch": "t", "load_1m_before": 1.0}
    text = markdown({"stamp": stamp, "threads": 1, "matmul_peak_gflop_per_s": 10.0, "matmul_peak_size": 256,
                     "set": TINY[:1], "alternate": ["mappo.central_value=per_agent", "mappo.central_value=joint"],
                     "rows": rows})
    assert "--set workers.num_workers=1 --alternate mappo.central_value=per_agent mappo.central_value=joint" in text
    assert "| vmas_balance_mappo (mappo.central_value=joint) | mappo |" in text and "1.00× |" in text
