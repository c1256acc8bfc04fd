"""The learner group (``learner.num_learners``) on real Ray actors and a real gloo process group:
N learners given one global batch take the same steps as one learner given all of it; any
checkpoint resumes on any number of learners; a dead learner is rebuilt inside the run."""

import pytest
import ray
import torch
from killing import train_killing

from rl_system.actors.learner import UpdateResult
from rl_system.actors.learner_group import LearnerGroup, backend_of, merged_metrics, shares
from rl_system.actors.placement import PlacementError, check_placement
from rl_system.actors.worker import RolloutWorker
from rl_system.checkpoint import find_resume
from rl_system.config import ConfigError, load_config

COMMON = ["workers.num_workers=3", "learner.num_cpus=0", "tensorboard=false"]
PPO = "launch/configs/cartpole_ppo.yaml", COMMON + [
    "workers.num_envs=16", "workers.rollout_len=16", "model.hidden_sizes=[32, 32]", "ppo.num_minibatches=4",
    "ppo.num_epochs=2"]
VARIANTS = {
    # Observation and reward normalisers: their statistics must be the group's, not a shard's.
    "feedforward": (PPO[0], PPO[1] + ["model.normalize_obs=true", "ppo.normalize_reward=true"]),
    # PPO's closed-form gradients (rl_system.algos.ppo.analytic) written into their flat buffer,
    # then all-reduced back into it.
    "closed_form": (PPO[0], PPO[1] + ["model.normalize_obs=true", "learner.gradients=closed_form"]),
    # Minibatches of whole env sequences, replayed from their initial state; burn-in steps.
    "recurrent": (PPO[0], PPO[1] + ["model.recurrent=gru", "model.recurrent_size=16", "ppo.burn_in=4"]),
    # Chunks and skill windows drawn over the group, value normalisers, the novelty bonus's scale
    # and the success gate, both levels' advantage statistics; the coordinator's KL bound (0.003:
    # steps shrunk in both rounds), measured over the group's windows. In float32 (the preset's
    # `auto` is bf16 on CPUs that have it): the shards' sums must agree to float32's digits.
    "hmasd": ("launch/configs/alice_bob_hmasd.yaml", COMMON + [
        "learner.precision=fp32", "workers.num_envs=8", "workers.rollout_len=50", "hmasd.num_minibatches=3", "hmasd.num_epochs=2",
        "hmasd.high_norm_adv=true", "hmasd.novelty_coef=0.1", "hmasd.novelty_gate=success",
        "hmasd.high_target_kl=0.003"]),
    # Multi-agent PPO: advantage statistics and each minibatch's count of active agent steps (an
    # agent leaves early) over the group.
    "mappo": ("examples/cue_match/config.yaml", COMMON + [
        "workers.num_envs=8", "mappo.num_minibatches=3", "mappo.num_epochs=2", "env.kwargs={early: true}"]),
    # Recurrent MAPPO: minibatches of whole env sequences with all their agents, replayed from
    # their initial states; active agent steps counted over the group.
    "mappo_recurrent": ("examples/cue_match/config_memory.yaml", COMMON + [
        "workers.num_envs=8", "mappo.num_minibatches=3", "mappo.num_epochs=2", "mappo.recurrent_size=16",
        "env.kwargs={num_agents: 3, k: 4, horizon: 8, memory: true, early: true}"]),
    # A joint central critic (one network, an output per agent) with its one core state per env
    # copied into every agent's row.
    "mappo_joint": ("examples/cue_match/config_memory.yaml", COMMON + [
        "workers.num_envs=8", "mappo.num_minibatches=3", "mappo.num_epochs=2", "mappo.recurrent_size=16",
        "mappo.central_value=joint", "env.kwargs={num_agents: 3, k: 4, horizon: 8, memory: true, early: true}"]),
    # A2C: one step on the whole round, its sums over the group's rows, normalised advantages over the group.
    "a2c": ("launch/configs/cartpole_a2c.yaml", COMMON + ["workers.num_envs=8", "a2c.normalize_advantage=true",
                                                         "a2c.ent_coef=0.01"]),
}


def _group(cfg, specs, name: str, size: int) -> LearnerGroup:
    cfg = cfg.model_copy(update={"learner": cfg.learner.model_copy(update={"num_learners": size})})
    group = LearnerGroup(cfg, specs, name)
    ray.get(list(group.start_refs()))
    group.form()
    return group


def _update(group: LearnerGroup, refs) -> tuple[UpdateResult, dict]:
    result_refs, weights_ref = group.update(refs)
    return merged_metrics(group.wait(result_refs)), ray.get(weights_ref)


def test_a_group_result_is_rank_0_s_with_dropped_rollouts_and_cpu_summed_and_the_slowest_times():
    ranks = [UpdateResult(3, {"loss": 1.0}, {"learner_dropped": 1, "cpu_s": 2.0, "decode_s": 0.1, "update_s": 0.5}),
             UpdateResult(3, {"loss": 9.0}, {"learner_dropped": 2, "cpu_s": 3.0, "decode_s": 0.3, "update_s": 0.2})]
    merged = merged_metrics(ranks)
    assert merged.version == 3 and merged.train == {"loss": 1.0}
    assert merged.system == {"learner_dropped": 3, "cpu_s": 5.0, "decode_s": 0.3, "update_s": 0.5,
                             "checkpoint_blocked_s": 0.0}
    assert ranks[0].system["cpu_s"] == 2.0  # rank 0's own result is left as it was
    assert merged_metrics(ranks[:1]) is ranks[0]


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k].double(), b[k].double(), rtol=1e-4, atol=1e-5), (k, (a[k] - b[k]).abs().max())


# The feedforward variant proves the mechanism in the default set; the closed-form gradients',
# HMASD's, MAPPO's and the recurrent cores' go with the slow set.
@pytest.mark.parametrize("variant", [v if v == "feedforward" else pytest.param(v, marks=pytest.mark.slow)
                                     for v in VARIANTS])
def test_two_learners_hold_the_weights_of_one_and_checkpoints_resume_on_any_number(ray_session, variant):
    cfg = load_config(*VARIANTS[variant])
    workers = [RolloutWorker(i, cfg) for i in range(3)]  # 3 rollouts split 2 + 1: unequal shares
    specs = workers[0].specs()
    groups = []

    def rounds(pairs: list[LearnerGroup], weights: dict, version: int, k: int) -> tuple[dict, int]:
        for _ in range(k):
            refs = [ray.put(w.sample(weights, version)[1]) for w in workers]
            out = [_update(g, refs) for g in pairs]
            (m0, w0), rest = out[0], out[1:]
            for m, w in rest:
                _same(w0, w)
                assert m.version == m0.version == version + 1
                assert m.system["learner_env_steps"] == m0.system["learner_env_steps"]
                assert m.train.keys() == m0.train.keys()
                for key, value in m0.train.items():  # losses, KL, normaliser and reward statistics
                    assert m.train[key] == pytest.approx(value, rel=1e-3, abs=1e-5, nan_ok=True), key
            if variant == "hmasd":
                assert m0.train["high_step_halvings"] > 0  # the bound acts in every round
            weights, version = w0, version + 1
        return weights, version

    try:
        one, two = _group(cfg, specs, f"lg1-{variant}", 1), _group(cfg, specs, f"lg2-{variant}", 2)
        groups += [one, two]
        weights = ray.get(one.lead.get_weights.remote())
        _same(weights, ray.get(two.lead.get_weights.remote()))  # one seed: the same initial weights
        weights, version = rounds([one, two], weights, 0, 3 if variant == "feedforward" else 2)
        if variant != "feedforward":
            return  # resuming is the same for every algorithm: a state dict on every learner
        assert any("obs_norm" in k for k in weights)  # the normaliser's buffers travel and agree

        # The two learners' checkpoint resumed on one learner, and the one learner's resumed on
        # two, go on exactly like the one learner itself (whose own resume is bit-exact:
        # tests/run/test_resilience.py).
        state_one, state_two = ray.get([one.lead.state.remote(), two.lead.state.remote()])
        two.kill()
        resumed = [_group(cfg, specs, f"lg-resume{size}-{variant}", size) for size in (1, 2)]
        groups += resumed
        for group, state in zip(resumed, (state_two, state_one)):
            group.wait(group.on_all("load_state", state))
        rounds([one, *resumed], weights, version, 2)
    finally:
        for group in groups:
            group.kill()


def test_auto_backend_is_nccl_only_with_a_whole_gpu_per_learner():
    def backend(*overrides):
        return backend_of(load_config("launch/configs/cartpole_ppo.yaml", list(overrides)))
    assert backend() == "gloo" and backend("learner.num_gpus=0.5") == "gloo"
    assert backend("learner.num_gpus=1") == "nccl" and backend("learner.num_gpus=1", "learner.device=cpu") == "gloo"


def test_shares_are_contiguous_and_cover_every_rollout():
    assert shares(3, 2) == [range(0, 2), range(2, 3)]
    assert shares(4, 4) == [range(i, i + 1) for i in range(4)]
    assert [len(s) for s in shares(10, 3)] == [4, 3, 3]


@pytest.mark.slow
def test_a_killed_learner_fails_the_group_over_and_the_run_reaches_its_target(ray_session, tmp_path):
    """A learner group of two (a single learner takes the same path: a group of one)."""
    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "tensorboard=false", "log_every_s=30", "learner.num_learners=2", "learner.num_cpus=0.5",
        "target_return=195", "return_window=50", "max_env_steps=1500000", "checkpoint.every_rounds=2"])
    summary = train_killing(cfg, tmp_path, tmp_path / "checkpoints" / "latest.json", "learner-1")
    assert summary.status == "completed" and summary.reached_target, summary
    assert summary.learner_restarts == 1 and summary.num_learners == 2
    assert len(summary.placement.learners) == 2
    log = (tmp_path / "console.log").read_text()
    assert "the learner died" in log and "learner rebuilt from its checkpoint of round" in log
    # Versions only went up: the final checkpoint is the run's newest policy.
    assert find_resume(str(tmp_path), cfg, None).state["learner"]["version"] == summary.policy_version


@pytest.mark.parametrize("overrides, needle", [
    (["learner.num_learners=3"], r"learner.num_learners \(3\) exceeds workers.num_workers \(2\)"),
    (["learner.backend=nccl"], "learner.backend=nccl needs a whole GPU per learner"),
    (["learner.backend=nccl", "learner.num_gpus=0.5"], "learner.backend=nccl needs a whole GPU per learner"),
])
def test_bad_learner_group_settings_are_one_line_config_errors(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config("launch/configs/cartpole_ppo.yaml", overrides)


def test_more_learners_than_the_cluster_can_place_is_one_line_naming_the_shortfall(ray_session):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "workers.num_workers=4", "workers.num_cpus=0.5", "learner.num_learners=4", "learner.num_cpus=1"])
    with pytest.raises(PlacementError, match=r"needs 6 CPU \(4 workers × 0.5 \+ 4 learners × 1\) but the cluster "
                                             r"has 4 CPU .*or learner.num_learners"):
        check_placement(cfg)
