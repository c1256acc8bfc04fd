"""Reseed on stall (``ReseedConfig``): a stalled attempt is replaced by a fresh one from the next
attempt seed, inside the same step budget."""

import pytest
import torch

from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.config import ConfigError, attempt_seed, load_config
from rl_system.rollout import codec
from rl_system.run.loop import train

HMASD_SMALL = ["workers.num_envs=8", "workers.rollout_len=25", "tensorboard=false"]


def _columns(payload: bytes) -> dict[str, torch.Tensor]:
    return codec.decode(payload)[0]


def test_restarted_learner_and_worker_are_fresh_ones_from_the_attempt_seed():
    """After training and sampling, ``reseed(seed)`` leaves exactly what a new run with ``seed``
    starts from: the same initial weights, and (HMASD, exploring starts on) the same rollout."""
    cfg = load_config("launch/configs/alice_bob_hmasd.yaml", HMASD_SMALL)
    seed = attempt_seed(cfg.seed, 1)
    fresh_cfg = cfg.model_copy(update={"seed": seed})
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    for _ in range(2):  # move everything away from its initial state
        _, payload = worker.sample(learner.get_weights(), learner.version)
        learner.update(payload)

    version, weights = learner.reseed(seed)
    worker.reseed(seed)
    rng_reseeded = torch.get_rng_state()  # in-process, both workers share torch's global RNG
    fresh_worker = RolloutWorker(0, fresh_cfg)
    rng_fresh = torch.get_rng_state()
    fresh = Learner(fresh_cfg, *fresh_worker.specs()).get_weights()
    assert version == 3  # two updates, then the reseed: still newer than anything sampled
    assert weights.keys() == fresh.keys()
    assert all(torch.equal(weights[k], fresh[k]) for k in fresh)
    assert torch.equal(rng_reseeded, rng_fresh)

    torch.set_rng_state(rng_reseeded)
    _, reseeded = worker.sample(weights, version)
    torch.set_rng_state(rng_fresh)
    _, new = fresh_worker.sample(fresh, 0)
    a, b = _columns(reseeded), _columns(new)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in b), [k for k in b if not torch.equal(a[k], b[k])]

def test_attempt_seeds_do_not_collide_with_neighbouring_run_seeds():
    seeds = {attempt_seed(s, a) for s in range(100) for a in range(3)}
    assert len(seeds) == 300 and attempt_seed(7, 0) == 7


@pytest.mark.parametrize("override, needle", [
    ("reseed.at_env_steps=[5000, 4000]", "must be positive and strictly increasing"),
    ("reseed.at_env_steps=[0]", "must be positive and strictly increasing"),
])
def test_bad_restart_settings_are_one_line_errors(override, needle):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.slow
def test_a_stalled_run_restarts_once_per_check_and_keeps_its_budget(ray_session, tmp_path, capsys):
    """End to end on Ray, with rollouts in flight (lag 1) at the reseed: an unreachable threshold
    reseeds at each check but the one in the last round (no run ends on fresh weights); the
    counter and budget go on, versions only go up."""
    base = ["workers.num_envs=16", "max_env_steps=6144", "target_return=null", "tensorboard=false",
            "max_policy_lag=1", "reseed.at_env_steps=[1024, 3000, 6000]", "return_window=20"]
    cfg = load_config("launch/configs/cartpole_ppo.yaml", [*base, "reseed.below_return=1e9"])
    summary = train(cfg, run_dir=tmp_path / "stalled")
    reseeds = summary.reseeds
    assert [r["seed"] for r in reseeds] == [attempt_seed(cfg.seed, 1), attempt_seed(cfg.seed, 2)]
    assert 1024 <= reseeds[0]["env_steps"] < 3000 <= reseeds[1]["env_steps"] < 6144
    assert summary.env_steps >= 6144 and summary.status == "completed"
    assert summary.policy_version == summary.rounds + 2  # each reseed is one more version
    assert capsys.readouterr().out.count("reseed on stall: best mean return") == 2

    cfg = load_config("launch/configs/cartpole_ppo.yaml", [*base, "reseed.below_return=-1e9"])
    summary = train(cfg, run_dir=tmp_path / "learning", quiet=True)
    assert summary.reseeds == [] and summary.policy_version == summary.rounds


@pytest.mark.slow  # three runs compared bit for bit (resume equivalence itself: tests/run/test_resilience.py)
def test_resume_before_or_after_the_restart_matches_the_uninterrupted_run(ray_session, tmp_path):
    """One worker, 7 rounds of 512 steps, a reseed after round 2: resuming from the checkpoint of
    round 1 reseeds at the same point; resuming from round 3 keeps the reseed and does not repeat
    it. Both end on the uninterrupted run's weights."""
    from rl_system.checkpoint.resume import find_resume
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.run.loop import RunLoop

    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "workers.num_workers=1", "workers.num_envs=32", "workers.rollout_len=16", "target_return=null",
        "max_env_steps=3584",
        "checkpoint.every_rounds=1", "checkpoint.keep_last=10", "tensorboard=false",
        "reseed.at_env_steps=[1024]", "reseed.below_return=1e9"])
    full = train(cfg, run_dir=tmp_path / "a", quiet=True)
    assert [r["round"] for r in full.reseeds] == [2]

    def final_model(run_dir):
        return CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()[0]["learner"]["model"]

    expected = final_model(tmp_path / "a")
    # Round 1 (before the reseed) and the first kept one after it (v4, round 3: the reseed is one more
    # version). A save still queued when a newer one comes is skipped (newest wins: the learner never
    # waits on disk), which on a loaded machine can drop v4; the run's end (v8) is never skipped.
    kept = {int(f.stem.removeprefix("ckpt-v")) for f in (tmp_path / "a" / "checkpoints").glob("ckpt-v*.rlck")}
    after = min(v for v in kept if v >= 4)
    assert 1 in kept and after < 8, (kept, full.checkpoints)
    for version in (1, after):
        found = find_resume(str(tmp_path / "a" / "checkpoints" / f"ckpt-v{version:08d}.rlck"), cfg, None)
        summary = RunLoop(cfg, tmp_path / f"from-v{version}", log_level="warning", resume_state=found.state).run()
        assert summary.reseeds == full.reseeds, version
        resumed = final_model(tmp_path / f"from-v{version}")
        assert all(torch.equal(expected[k], resumed[k]) for k in expected), version


def test_configs_that_call_the_section_restart_still_load():
    """Checkpoints and configs written before the section was named ``reseed`` called it ``restart``."""
    cfg = load_config(None, ["restart.at_env_steps=[1000]", "restart.below_return=0.5"])
    assert cfg.reseed.at_env_steps == [1000] and cfg.reseed.below_return == 0.5
