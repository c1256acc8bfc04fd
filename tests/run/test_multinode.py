"""Multi-node behaviour on a real ``ray.cluster_utils.Cluster`` (head + 2 worker nodes, one machine).

Custom resources pin placement: the learner on the head, one rollout worker on each worker node.
"""

import os
import threading
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from rl_system.config import load_config
from rl_system.run.loop import train
from rl_system.run.startup import init_ray

pytestmark = pytest.mark.slow  # a Ray head / cluster of its own: the slow set

@pytest.fixture(scope="module")
def three_nodes():
    if ray.is_initialized():
        ray.shutdown()  # the shared local session; the `ray_session` fixture restarts it later
    # The nodes start from this environment: without the wait policy in it, as a cluster started
    # elsewhere, so that only the job can hand it to the actors.
    os.environ.pop("OMP_WAIT_POLICY", None)
    os.environ.pop("GOMP_SPINCOUNT", None)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"learner_node": 1}})
    # Each rollout node could host both workers, so a lost node's worker has somewhere to go.
    nodes = [cluster.add_node(num_cpus=1, resources={"rollout_node": 2}) for _ in range(2)]
    cluster.wait_for_nodes()
    init_ray(load_config("launch/configs/cartpole_ppo.yaml"), cluster.address)
    yield cluster, nodes
    ray.shutdown()
    cluster.shutdown()


def test_workers_on_other_nodes_ship_compressed_rollouts_and_learn(three_nodes, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "tensorboard=false", "log_every_s=30", "target_return=150", "return_window=20", "max_env_steps=1000000",
        "workers.resources={rollout_node: 1}", "learner.resources={learner_node: 1}",
        "learner.num_cpus=0", "workers.num_cpus=0.5", "checkpoint.every_rounds=0"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary.reached_target, summary
    assert summary.compression == ["lz4"]  # `auto`: every worker is on another node than the learner
    assert summary.compression_ratio > 1.0
    workers, learner = summary.placement.workers, summary.placement.learner
    assert len(set(workers)) == 2 and learner not in workers  # one worker per rollout node
    on_a_rollout_node = ray.remote(num_cpus=0, resources={"rollout_node": 0.01})(lambda: os.environ.get("OMP_WAIT_POLICY"))
    assert ray.get(on_a_rollout_node.remote()) == "PASSIVE"  # the job's runtime environment reached it


def test_a_learner_group_spread_over_two_nodes_trains_to_target(three_nodes, tmp_path):
    # Learners and workers share the rollout nodes; `spread` puts one learner on each.
    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "tensorboard=false", "log_every_s=30", "target_return=150", "return_window=20", "max_env_steps=1000000",
        "workers.resources={rollout_node: 1}", "learner.resources={rollout_node: 1}", "learner.num_learners=2",
        "learner.placement=spread", "learner.num_cpus=0", "workers.num_cpus=0.5", "checkpoint.every_rounds=0"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary.reached_target, summary
    learners = summary.placement.learners
    assert len(set(learners)) == 2  # the all-reduce crossed nodes


def test_losing_a_worker_node_mid_run(three_nodes, tmp_path):
    # Last in the module: the cluster keeps one rollout node from here on.
    cluster, nodes = three_nodes
    # 200 rounds (several seconds): the run must outlast the node's removal, which takes Ray a
    # second or two after the first checkpoint; 30 rounds could end before it (seen on a fast VM).
    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "tensorboard=false", "log_every_s=30", "target_return=null", "max_env_steps=409600",
        "workers.resources={rollout_node: 1}", "learner.resources={learner_node: 1}", "workers.max_restarts=5",
        "learner.num_cpus=0", "workers.num_cpus=0.5", "checkpoint.every_rounds=3"])
    started = tmp_path / "checkpoints" / "latest.json"

    def remove_node():
        # The node of rollout-worker-0: SPREAD is a preference, so both workers may share one node,
        # and removing the other one would kill nothing. (The worker reports its node; with the
        # learner's own node, as the run told it, nothing else changes.)
        while not started.exists():
            time.sleep(0.1)
        found = next(a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"] == "rollout-worker-0")
        worker = ray.get_actor(found["name"], namespace=found["namespace"])
        node_id = ray.get(worker.set_learner_node.remote(cluster.head_node.node_id))["node_id"]
        cluster.remove_node(next(n for n in nodes if n.node_id == node_id))

    killer = threading.Thread(target=remove_node, daemon=True)
    killer.start()
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    killer.join()
    assert summary.status == "completed" and summary.env_steps >= 409600
    assert summary.worker_restarts >= 1  # the lost node's worker came back on the other node
    assert summary.dropped_rollouts == 0 and summary.policy_version == summary.rounds
