"""HMASD (rl_system.algos.hmasd): coordinator masking, intrinsic rewards, GAE of both levels,
window/hidden resets in the sampler, version gating of HMASD payloads, checkpoint round trips,
flat MAPPO, and a short learning run through real Ray on the small Alice_and_Bob map."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch
from torch import nn

from rl_system.actors.learner import Learner, StaleRolloutError
from rl_system.actors.worker import RolloutWorker
from rl_system.algos import get_algorithm
from rl_system.algos.hmasd import columns as hcol
from rl_system.algos.hmasd.networks import HMASDPolicy, SkillCoordinator
from rl_system.algos.hmasd.returns import low_level_reward, window_gae
from rl_system.algos.hmasd.trust import TrustRegion
from rl_system.config import RunConfig, load_config
from rl_system.envs.alice_bob import AliceBobVecEnv
from rl_system.observe.metrics import read_scalars
from rl_system.rollout.contract import concat

_HMASD = get_algorithm("hmasd")  # the factories over a run config
make_policy, make_sampler, make_trainer = _HMASD.make_policy, _HMASD.make_sampler, _HMASD.make_trainer


def run_config(hierarchy: bool = True, num_envs: int = 3, rollout_len: int = 10, **hmasd) -> RunConfig:
    return RunConfig.model_validate({
        "algo": "hmasd", "seed": 3,
        "env": {"name": "AliceBob", "kwargs": {"size": "small", "max_episode_steps": 5}},
        "workers": {"num_envs": num_envs, "rollout_len": rollout_len},
        "hmasd": {"hierarchy": hierarchy, "skill_interval": 4, "hidden": 16, "coord_dim": 16,
                  "num_epochs": 2, **hmasd}})


def make_sampler_for(cfg: RunConfig, offsets=(0, 1, 3), seed: int = 0):
    """A sampler on the small map whose envs are ``offsets`` steps into their episodes (time
    limit 5), so they end at different steps."""
    torch.manual_seed(seed)
    env = AliceBobVecEnv(cfg.workers.num_envs, seed=seed, **cfg.env.kwargs)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed)
    sampler.obs = env.set_state(env.positions, steps=torch.tensor(offsets[: env.num_envs]))
    return env, policy, sampler


def record_final_obs(env) -> list[dict[str, torch.Tensor]]:
    """From now on, the observation each ``env.step`` ended on, one dict per step: s_{t+1}, the
    final one where the episode ended (before the reset)."""
    seen = []
    step = env.step

    def recorded(action):
        result = step(action)
        with torch.inference_mode(False):  # normal copies: the sampler steps in inference mode
            seen.append({k: v.clone() for k, v in result.final_obs.items()})
        return result

    env.step = recorded
    return seen


def training_batch(cols: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return concat([cols])


# -- skill coordinator ------------------------------------------------------------------------------

def test_coordinator_causal_order_and_teacher_forcing():
    torch.manual_seed(0)
    n, B = 3, 6
    coord = SkillCoordinator(state_dim=5, obs_dim=7, n_agents=n, n_Z=4, n_z=3, dim=32, heads=2, layers=2)
    state, obs = torch.randn(B, 5), torch.randn(B, n, 7)
    Z, z = torch.randint(0, 4, (B,)), torch.randint(0, 3, (B, n))
    rep, value = coord.encode(state, obs)
    assert rep.shape == (B, n + 1, 32) and value.shape == (B, n + 1)
    lZ, lz = coord.logits(rep, Z, z)
    assert lZ.shape == (B, 4) and lz.shape == (B, n, 3)

    # Changing z_2 leaves the logits of Z, z_1 and z_2 itself unchanged; only z_3's move.
    z2 = z.clone()
    z2[:, 1] = (z[:, 1] + 1) % 3
    lZ2, lz2 = coord.logits(rep, Z, z2)
    assert torch.equal(lZ, lZ2) and torch.equal(lz[:, :2], lz2[:, :2])
    assert not torch.allclose(lz[:, 2], lz2[:, 2])
    # The last agent's skill is never an input; Z conditions every individual skill.
    z3 = z.clone()
    z3[:, 2] = (z[:, 2] + 1) % 3
    assert all(torch.equal(a, b) for a, b in zip(coord.logits(rep, Z, z3), (lZ, lz)))
    lZ4, lz4 = coord.logits(rep, (Z + 1) % 4, z)
    assert torch.equal(lZ, lZ4) and not torch.allclose(lz[:, 0], lz4[:, 0])

    # One teacher-forced pass gives the log-probs and values of the autoregressive sampling.
    Zs, zs, logp, v = coord.act(state, obs)
    logp_tf, ent, v_tf = coord.evaluate(state, obs, Zs, zs)
    assert logp.shape == ent.shape == (B, n + 1)
    torch.testing.assert_close(logp_tf, logp, atol=1e-5, rtol=0)
    torch.testing.assert_close(v_tf, v)
    assert (ent > 0).all() and (logp < 0).all()
    # Deterministic: the argmax at every position, given the argmax choices before it.
    Zd, zd, _, _ = coord.act(state, obs, deterministic=True)
    lZd, lzd = coord.logits(rep, Zd, zd)
    assert torch.equal(lZd.argmax(-1), Zd) and torch.equal(lzd.argmax(-1), zd)


# -- sampler: windows, skills, hidden resets ---------------------------------------------------------

def expected_starts(done: torch.Tensor, k: int) -> torch.Tensor:
    """Reference window rule, one env at a time: first step of the rollout, the step after an
    episode end, and k steps after the previous start."""
    T, N = done.shape
    start = torch.zeros(T, N, dtype=torch.bool)
    for e in range(N):
        timer = 0
        for t in range(T):
            if t == 0 or done[t - 1, e] or timer >= k:
                start[t, e] = True
                timer = 0
            timer += 1
    return start


def test_sampler_windows_skills_and_hidden_reset_per_env():
    cfg = run_config(num_envs=3, rollout_len=12)
    env, policy, sampler = make_sampler_for(cfg)
    cols = sampler.collect()[0]
    T, N, n = 12, 3, 2
    done = cols["terminated"] | cols["truncated"]
    assert done[1, 2] and done[3, 1] and done[4, 0]  # the offsets make the envs end at different steps
    start = cols["h_start"]
    assert torch.equal(start, expected_starts(done, k=4))
    # The coordinator ran exactly where a window started; skills hold within a window.
    assert torch.equal(cols["h_logp"].ne(0).all(-1), start) and torch.equal(cols["h_value"].ne(0).any(-1), start)
    Z, z = cols["skill_team"], cols["skill_agent"]
    same = (Z[1:] == Z[:-1]) & (z[1:] == z[:-1]).all(-1)
    assert same[~start[1:]].all()
    # Shapes of the columns (time-major, env-major last_/init_, compact final_ rows).
    assert cols["obs.obs"].shape == (T, N, n, env.obs_dim) and cols["h_value"].shape == (T, N, n + 1)
    assert cols["init_h_actor"].shape == (N, n, 16) and cols["last_h_value"].shape == (N, n + 1)
    assert cols["final_obs.obs"].shape == (int(done.sum()), n, env.obs_dim)
    # GRU hiddens of envs whose episode ended on the last step start afresh; the others carry on.
    ended = done[-1]
    assert ended.any() and (~ended).any()
    assert (sampler.h_actor[ended] == 0).all() and (sampler.h_critic[ended] == 0).all()
    assert (sampler.h_actor[~ended].abs().sum((-1, -2)) > 0).all()
    h_end = sampler.h_actor.clone()
    nxt = sampler.collect()[0]
    assert torch.equal(nxt["init_h_actor"], h_end)
    assert nxt["h_start"][0].all()  # every rollout starts a window in every env


def test_sampler_state_dict_resumes_bit_exactly():
    cfg = run_config(num_envs=3, rollout_len=7)
    a = RolloutWorker(0, cfg)
    weights = {k: v.clone() for k, v in a.policy.state_dict().items()}
    a.sample(weights, 0)
    state = copy.deepcopy(a.get_state())
    for key in ("h_actor", "h_critic", "team_skill", "agent_skill", "skill_timer", "obs", "ep_return"):
        assert key in state
    b = RolloutWorker(1, cfg)  # (seeds the global torch RNG, which both workers share here)
    torch.set_rng_state(state["torch_rng"])
    _, pa = a.sample(weights, 0)
    b.set_state(state)  # env, torch RNG, sampler state
    _, pb = b.sample(weights, 0)
    from rl_system.rollout import codec
    ca, cb = codec.decode(pa)[0], codec.decode(pb)[0]
    assert ca.keys() == cb.keys() and all(torch.equal(ca[k], cb[k]) for k in ca)


def test_values_leave_the_worker_in_return_units_of_the_sampling_version():
    """With ``max_policy_lag > 0`` the learner's ValueNorm may have moved on since a rollout was
    sampled; the sampler therefore ships values denormalised with its own version's statistics."""
    cfg = run_config(num_envs=3, rollout_len=9)
    cols = {}
    for label, shift in (("fresh", None), ("moved", 7.0)):
        env, policy, sampler = make_sampler_for(cfg)
        if shift is not None:
            for norm in (policy.low_norm, policy.high_norm):
                for _ in range(3):
                    norm.update(torch.tensor([shift - 2.0, shift + 2.0]))
        norms = (policy.low_norm.mean_std(), policy.high_norm.mean_std())
        cols[label] = (sampler.collect()[0], norms)
    (a, ((lm_a, ls_a), (hm_a, hs_a))), (b, ((lm_b, ls_b), (hm_b, hs_b))) = cols["fresh"], cols["moved"]
    assert abs(float(lm_b) - 7.0) < 1e-3 and abs(float(ls_b) - 2.0) < 1e-3
    # Same weights and env: the critics' raw (normalised) outputs agree, so the shipped values
    # differ exactly by the two versions' statistics.
    for key, (ma, sa, mb, sb) in {"value": (lm_a, ls_a, lm_b, ls_b), "last_value": (lm_a, ls_a, lm_b, ls_b),
                                  "last_h_value": (hm_a, hs_a, hm_b, hs_b)}.items():
        torch.testing.assert_close(b[key], (a[key] - ma) / sa * sb + mb, rtol=1e-5, atol=1e-4)
    start = a["h_start"]
    torch.testing.assert_close(b["h_value"][start], (a["h_value"][start] - hm_a) / hs_a * hs_b + hm_b,
                               rtol=1e-5, atol=1e-4)
    assert (b["h_value"][~start] == 0).all()  # only window starts carry a coordinator value


# -- rewards and advantages -------------------------------------------------------------------------

@pytest.mark.parametrize("floor, novelty", [(False, 0.0), (True, 0.0), (False, 0.4)],
                         ids=["paper", "logq_floor", "novelty"])
def test_intrinsic_reward_matches_hand_computation(floor, novelty):
    cfg = run_config(num_envs=3, rollout_len=10, lambda_e=2.0, lambda_D=0.3, lambda_d=0.7, logq_floor=floor,
                     novelty_coef=novelty)
    env, policy, sampler = make_sampler_for(cfg)
    seen = record_final_obs(env)
    batch = training_batch(sampler.collect()[0])
    done = batch["terminated"] | batch["truncated"]
    assert done.any() and done[-1].any() and (~done[:-1]).any()
    batch["reward"] = torch.rand_like(batch["reward"])  # exercise lambda_e
    out = low_level_reward(policy, cfg.hmasd, batch)
    disc, clamped = policy.disc, 0
    chance_D, chance_d = -math.log(cfg.hmasd.n_team_skills), -math.log(cfg.hmasd.n_agent_skills)
    bonus = rnd_bonus_by_hand(policy, seen) if novelty else torch.zeros(10, 3, 2)
    for t in range(10):
        for e in range(3):
            Z = int(batch["skill_team"][t, e])
            log_qD = disc.team(seen[t]["state"][e]).log_softmax(-1)[Z]
            for i in range(2):
                zi = int(batch["skill_agent"][t, e, i])
                h = disc.agent_in(seen[t]["obs"][e, i]) + disc.agent_Z.weight[Z] + disc.agent_id.weight[i]
                log_qd = disc.agent_out(h).log_softmax(-1)[zi]
                if floor:  # below chance counts as chance
                    clamped += int(log_qD < chance_D) + int(log_qd < chance_d)
                    log_qD, log_qd = log_qD.clamp(min=chance_D), log_qd.clamp(min=chance_d)
                want = 2.0 * batch["reward"][t, e] + 0.3 * log_qD + 0.7 * log_qd + novelty * bonus[t, e, i]
                assert torch.allclose(out["reward"][t, e, i], want, atol=1e-5), (t, e, i)
    assert clamped > 0 or not floor  # the floor was exercised, not vacuous


def rnd_bonus_by_hand(policy, seen: list[dict]) -> torch.Tensor:
    """``[T, N, n]``: the squared error of the predictor against the target network on each
    observation an agent step ended on, over the mean of those errors."""
    with torch.no_grad():
        err = torch.stack([((policy.novelty.predictor(s["obs"]) - policy.novelty.target(s["obs"])) ** 2).mean(-1)
                           for s in seen])
    return err / err.mean()


def test_novelty_bonus_drives_flat_mappo_and_its_predictor_learns_the_views_reached():
    cfg = run_config(hierarchy=False, num_envs=3, rollout_len=10, novelty_coef=0.5, num_epochs=8)
    env, policy, sampler = make_sampler_for(cfg)
    seen = record_final_obs(env)
    batch = training_batch(sampler.collect()[0])
    assert "final_obs.obs" in batch and "last_obs.obs" in batch and not any(k.startswith("skill_") for k in batch)
    out = low_level_reward(policy, cfg.hmasd, batch)
    want = batch["reward"].unsqueeze(-1) + 0.5 * rnd_bonus_by_hand(policy, seen)
    assert torch.allclose(out["reward"], want, atol=1e-5)
    target = copy.deepcopy(policy.novelty.target.state_dict())
    unseen = torch.rand(64, 2, env.obs_dim)  # views no agent reaches: uniform noise
    before_seen, before_unseen = out["novelty_error"].mean(), policy.novelty.error(unseen).mean()
    trainer = make_trainer(policy, cfg)
    for _ in range(3):
        metrics = trainer.update(batch, 0.0)
    assert metrics["skipped_minibatches"] == 0 and metrics["novelty_error_mean"] > 0
    after_seen = low_level_reward(policy, cfg.hmasd, batch)["novelty_error"].mean()
    after_unseen = policy.novelty.error(unseen).mean()
    # The reached views became familiar; the others stay novel (their error falls far less).
    assert after_seen < 0.5 * before_seen and after_seen / before_seen < after_unseen / before_unseen
    assert all(torch.equal(v, policy.novelty.target.state_dict()[k]) for k, v in target.items())
    assert any(k.startswith("novelty.target.") for k in policy.state_dict())  # the checkpoint keeps it
    assert "novelty.initial_error" not in policy.state_dict()  # the "round" norm keeps no scale


def test_novelty_gate_success_scales_the_bonus_by_the_rounds_failure_share():
    cfg = run_config(hierarchy=False, num_envs=3, rollout_len=10, novelty_coef=0.5, novelty_gate="success")
    env, policy, sampler = make_sampler_for(cfg)
    batch = training_batch(sampler.collect()[0])
    ends = (batch["terminated"] | batch["truncated"]).nonzero().tolist()  # the real ends: final_obs rows
    assert len(ends) >= 3
    for key in ("terminated", "truncated", "reward"):
        batch[key] = torch.zeros_like(batch[key])
    # One episode terminates on a team reward (a success), one terminates without, the others are
    # cut by the time limit; a reward on a step that ends nothing does not count.
    (t0, e0), (t1, e1), rest = ends[0], ends[1], ends[2:]
    batch["terminated"][t0, e0] = batch["terminated"][t1, e1] = True
    for t, e in rest:
        batch["truncated"][t, e] = True
    t2, e2 = (~(batch["terminated"] | batch["truncated"])).nonzero()[0].tolist()
    batch["reward"][t0, e0] = batch["reward"][t2, e2] = 1.0
    share = 1 / len(ends)
    out = low_level_reward(policy, cfg.hmasd, batch)
    bonus = out["novelty_error"] / out["novelty_error"].mean()
    assert float(out["novelty_weight"]) == pytest.approx(0.5 * (1 - share))
    assert torch.allclose(out["reward"], batch["reward"].unsqueeze(-1) + 0.5 * (1 - share) * bonus, atol=1e-6)
    batch["terminated"] |= batch["truncated"]  # every ending episode terminates on a reward: bonus off
    batch["truncated"][:] = False
    batch["reward"][batch["terminated"]] = 0.3
    assert torch.allclose(low_level_reward(policy, cfg.hmasd, batch)["reward"], batch["reward"].unsqueeze(-1))
    assert make_trainer(policy, cfg).update(batch, 0.0)["novelty_weight"] == 0.0  # logged
    batch["terminated"][:] = False  # no episode ended in the round (none solved yet): the full bonus
    out = low_level_reward(policy, cfg.hmasd, dict(batch, **{"final_obs.obs": batch["final_obs.obs"][:0]}))
    assert float(out["novelty_weight"]) == pytest.approx(0.5)


@pytest.mark.parametrize("bonus", ["lambda_h", "lambda_l"])  # the coordinator's, the actor's
def test_an_entropy_gate_turns_its_bonus_off_as_the_task_is_solved(bonus):
    gated = run_config(num_envs=3, rollout_len=10, **{bonus: 0.5, f"{bonus}_gate": "success"})
    _, policy, sampler = make_sampler_for(gated)
    batch = training_batch(sampler.collect()[0])
    ends = (batch["terminated"] | batch["truncated"]).nonzero().tolist()
    assert len(ends) >= 2
    batch["reward"] = torch.zeros_like(batch["reward"])
    batch["terminated"] |= batch["truncated"]  # every episode ends on a team reward: solved
    batch["truncated"][:] = False
    batch["reward"][batch["terminated"]] = 1.0

    def updated(cfg: RunConfig, data: dict) -> tuple[dict, dict[str, torch.Tensor]]:
        pol = copy.deepcopy(policy)
        torch.manual_seed(0)  # the same minibatch permutations
        metrics = make_trainer(pol, cfg).update({k: v.clone() for k, v in data.items()}, 0.0)
        return metrics, pol.state_dict()

    metrics, weights = updated(gated, batch)
    _, without = updated(run_config(num_envs=3, rollout_len=10, **{bonus: 0.0}), batch)
    _, ungated = updated(run_config(num_envs=3, rollout_len=10, **{bonus: 0.5}), batch)
    assert metrics[bonus] == 0.0  # logged
    assert all(torch.equal(weights[k], without[k]) for k in weights)  # the same step as a bonus of 0
    assert not all(torch.equal(ungated[k], without[k]) for k in weights)  # which the bonus would change
    floored = run_config(num_envs=3, rollout_len=10, **{bonus: 0.5, f"{bonus}_gate": "success", "gate_floor": 0.2})
    assert updated(floored, batch)[0][bonus] == pytest.approx(0.1)  # a solved round keeps the floor's share
    batch["reward"][(batch["terminated"]).nonzero()[0].tolist()] = 0.0  # one episode fails: 1/len(ends) of it
    assert updated(gated, batch)[0][bonus] == pytest.approx(0.5 / len(ends))
    assert updated(floored, batch)[0][bonus] == pytest.approx(0.5 * max(1 / len(ends), 0.2))


@pytest.mark.parametrize("tightness", [4, 1000])  # whole steps kept, then shrunk; every step shrunk
def test_high_target_kl_shrinks_the_coordinators_steps_into_the_region_and_leaves_the_rest_alone(tightness):
    base = {"num_envs": 3, "rollout_len": 12, "lr": 0.003, "num_epochs": 6}  # the coordinator drifts over the epochs
    _, policy, sampler = make_sampler_for(run_config(**base))
    batch = training_batch(sampler.collect()[0])

    def updated(cfg: RunConfig) -> tuple[dict, HMASDPolicy, float]:
        pol = copy.deepcopy(policy)
        torch.manual_seed(0)  # the same minibatch permutations
        trainer = make_trainer(pol, cfg)
        metrics = trainer.update({k: v.clone() for k, v in batch.items()}, 0.0)
        high = trainer.prepare({k: v.clone() for k, v in batch.items()}).high
        return metrics, pol, trainer._high_kl(high)

    _, free, free_kl = updated(run_config(**base))
    target = free_kl / tightness
    metrics, bound, kl = updated(run_config(**base, high_target_kl=target))
    assert kl <= target < free_kl, (kl, target, free_kl)  # the round ends inside the region
    assert metrics["high_step_halvings"] > 0
    coord = [k for k in policy.state_dict() if k.startswith("coordinator.")]
    others = [k for k in policy.state_dict() if k.startswith(("low.", "disc."))]
    # Even where one whole step leaves the region (1/1000 of six epochs' KL) the coordinator moves:
    # the step is shrunk into the region, not undone (undoing froze a run's plan for good).
    assert metrics["high_steps_kept"] > 0
    assert any(not torch.equal(bound.state_dict()[k], policy.state_dict()[k]) for k in coord)
    # The low level and the discriminators took all their steps: exactly those of the free run.
    assert all(torch.equal(bound.state_dict()[k], free.state_dict()[k]) for k in others)
    assert not any(torch.equal(bound.state_dict()[k], policy.state_dict()[k]) for k in others)
    # A bound the round never reaches changes nothing.
    loose, loose_pol, _ = updated(run_config(**base, high_target_kl=1e9))
    assert loose["high_kl_reverted"] == 0.0 and loose["high_steps_kept"] == base["num_epochs"]
    assert loose["high_step_halvings"] == 0.0
    assert all(torch.equal(loose_pol.state_dict()[k], v) for k, v in free.state_dict().items())


def test_trust_region_shrinks_a_step_that_leaves_it_and_undoes_one_no_shrink_brings_back():
    p, q = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2, 2))
    region = TrustRegion([p, q], target_kl=0.1)
    storage = p.data_ptr(), q.data_ptr()

    def kl() -> float:  # quadratic in the distance from the sampling weights (all zeros)
        return float((p ** 2).mean() + (q ** 2).mean()) / 2

    def step(size: float) -> None:  # one optimiser step: +size on every weight
        region.before_step()
        with torch.no_grad():
            p.add_(size)
            q.add_(size)
        region.after_step(kl)

    def at(value: float) -> bool:
        return torch.allclose(p, torch.full_like(p, value)) and torch.allclose(q, torch.full_like(q, value))

    region.start()
    step(0.2)                          # KL 0.04: kept whole
    assert at(0.2) and region.steps_kept == 1 and region.halvings == 0
    step(0.4)                          # to 0.6 (KL 0.36): halved once to 0.4 (KL 0.16), again to 0.3 (0.09)
    assert at(0.3) and region.steps_kept == 2 and region.halvings == 2 and region.active
    assert region.metrics("high_") == {"high_kl_reverted": 0.0, "high_steps_kept": 2.0, "high_step_halvings": 2.0}
    region.start()
    with torch.no_grad():              # a round that starts outside the region (a stale rollout)
        p.fill_(1.0)
        q.fill_(1.0)
    step(0.5)                          # no shrink is inside: undone, and the network sits out
    assert at(1.0) and region.steps_kept == 0 and region.reverted and not region.active
    assert region.halvings == 6
    assert (p.data_ptr(), q.data_ptr()) == storage  # restored in place, not as views of a snapshot


def test_novelty_norm_initial_keeps_the_first_rounds_scale_so_the_bonus_fades():
    cfg = run_config(num_envs=3, rollout_len=10, novelty_coef=1.0, novelty_norm="initial", lambda_D=0.0,
                     lambda_d=0.0, lambda_e=0.0, num_epochs=8)  # the reward is the bonus alone
    env, policy, sampler = make_sampler_for(cfg)
    batch = training_batch(sampler.collect()[0])
    first = low_level_reward(policy, cfg.hmasd, batch)
    scale = float(policy.novelty.initial_error)
    assert scale == pytest.approx(float(first["novelty_error"].mean()))
    assert float(first["reward"].mean()) == pytest.approx(1.0, rel=1e-5)
    trainer = make_trainer(policy, cfg)
    for _ in range(3):
        trainer.update(batch, 0.0)
    again = low_level_reward(policy, cfg.hmasd, batch)
    assert float(policy.novelty.initial_error) == scale  # recorded once, not per round
    assert torch.allclose(again["reward"], again["novelty_error"] / scale)
    assert float(again["reward"].mean()) < 0.5  # familiar views pay less than at the start
    assert "novelty.initial_error" in policy.state_dict()  # resumes with the same scale


def reference_window_gae(reward, value, start, term, trunc, tv, lv, gamma, lam):
    """Plain loops over envs and windows."""
    T, N, _ = value.shape
    adv = torch.zeros_like(value)
    for e in range(N):
        windows = []
        for s in (t for t in range(T) if start[t, e]):
            end = s
            while end < T - 1 and not (term[end, e] or trunc[end, e]) and not start[end + 1, e]:
                end += 1
            R = float(reward[s:end + 1, e].sum())
            if term[end, e]:
                boot, cont = torch.zeros_like(lv[e]), False
            elif trunc[end, e]:
                boot, cont = tv[end, e], False
            elif end == T - 1:
                boot, cont = lv[e], False
            else:
                boot, cont = value[end + 1, e], True
            windows.append((s, R, boot, cont))
        a_next = torch.zeros_like(lv[e])
        for s, R, boot, cont in reversed(windows):
            a = R + gamma * boot - value[s, e] + (gamma * lam * a_next if cont else 0.0)
            adv[s, e] = a
            a_next = a
    return adv, torch.where(start.unsqueeze(-1), adv + value, 0.0)


def test_window_gae_matches_reference_including_cut_windows():
    g = torch.Generator().manual_seed(0)
    T, N, K = 40, 16, 3
    term = torch.rand(T, N, generator=g) < 0.05
    trunc = (torch.rand(T, N, generator=g) < 0.05) & ~term
    done = term | trunc
    start = torch.rand(T, N, generator=g) < 0.2  # timer starts
    start[0] = True
    start[1:] |= done[:-1]
    reward = (torch.rand(T, N, generator=g) < 0.1).float()
    value, tv, lv = torch.randn(T, N, K, generator=g), torch.randn(T, N, K, generator=g), torch.randn(N, K, generator=g)
    adv, ret = window_gae(reward, value, start, term, trunc, tv, lv, 0.97, 0.9)
    ref_adv, ref_ret = reference_window_gae(reward, value, start, term, trunc, tv, lv, 0.97, 0.9)
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(ret, ref_ret)
    assert (adv[~start] == 0).all()


def test_low_and_high_level_gae_on_a_sampled_batch():
    cfg = run_config(num_envs=3, rollout_len=12, value_norm=False, norm_adv=False)
    env, policy, sampler = make_sampler_for(cfg)
    batch = training_batch(sampler.collect()[0])
    batch["reward"][2, 1] = 1.0  # some team reward inside a window
    trainer = make_trainer(policy, cfg)
    prep = trainer.prepare(batch)
    h = cfg.hmasd
    r = low_level_reward(policy, h, batch)["reward"]
    term, trunc = batch["terminated"], batch["truncated"]
    done = term | trunc
    v, tv, lv = batch["value"], batch["trunc_value"], batch["last_value"]
    T, N, n = v.shape
    for e in range(N):
        for i in range(n):
            a = 0.0
            for t in reversed(range(T)):
                nv = lv[e, i] if t == T - 1 else v[t + 1, e, i]
                rt = r[t, e, i] + (h.gamma * tv[t, e, i] if trunc[t, e] and not term[t, e] else 0.0)
                nd = 0.0 if done[t, e] else 1.0
                a = rt + h.gamma * nv * nd - v[t, e, i] + h.gamma * h.gae_lambda * nd * a
                assert torch.allclose(prep.low[hcol.ADVANTAGE][t, e, i], torch.as_tensor(a), atol=1e-5)
                assert torch.allclose(prep.low[hcol.RETURN][t, e, i], a + v[t, e, i], atol=1e-5)
    start = batch["h_start"]
    ref_adv, ref_ret = reference_window_gae(batch["reward"], batch["h_value"], start, term, trunc,
                                            batch["h_trunc_value"], batch["last_h_value"],
                                            h.high_gamma, h.high_gae_lambda)
    torch.testing.assert_close(prep.high[hcol.ADVANTAGE], ref_adv[start])
    torch.testing.assert_close(prep.high[hcol.RETURN], ref_ret[start])
    assert prep.high["Z"].shape[0] == int(start.sum())


# -- learner integration: gate, concat, checkpoint ---------------------------------------------------

def _assert_diagnosis_signals(train: dict, cfg) -> None:
    """The signals a collapse is diagnosed with (docs/hmasd.md, "Metrics") are logged
    and mean what they say."""
    h = cfg.hmasd
    terms = {k: train[f"reward_term_{k}"] for k in ("env", "team", "agent")}
    # the low-level reward is the sum of its terms (no novelty bonus in this config)
    assert train["low_reward_mean"] == pytest.approx(sum(terms.values()), rel=1e-4, abs=1e-6)
    assert terms["team"] <= 0.0 and terms["agent"] <= 0.0                  # lambda * log q, q <= 1
    if h.logq_floor:                                                          # clamped at chance
        assert terms["team"] >= -h.lambda_D * math.log(h.n_team_skills) - 1e-6
        assert terms["agent"] >= -h.lambda_d * math.log(h.n_agent_skills) - 1e-6
    shares = [train[f"plan_team_skill_{k}_share"] for k in range(h.n_team_skills)]
    assert sum(shares) == pytest.approx(1.0) and all(0.0 <= x <= 1.0 for x in shares)
    for key in ("plan_team_skill_entropy", "plan_agent_skill_entropy"):
        assert 0.0 <= train[key] <= 1.0 + 1e-9
    for level in ("low", "high"):
        assert train[f"{level}_value_norm_std"] > 0 and math.isfinite(train[f"{level}_value_norm_mean"])
    assert train["lambda_h"] == h.lambda_h  # the coordinator's entropy bonus that round (no gate)


def test_skill_usage_reads_the_plan():
    from rl_system.algos.hmasd.metrics import skill_usage

    Z = torch.tensor([0, 0, 0, 0])
    z = torch.tensor([[0, 1], [1, 0], [0, 1], [1, 0]])
    out = skill_usage(Z, z, n_Z=3, n_z=2)
    assert out["plan_team_skill_0_share"] == 1.0 and out["plan_team_skill_2_share"] == 0.0
    assert out["plan_team_skill_entropy"] == pytest.approx(0.0, abs=1e-9)   # one team skill only
    assert out["plan_agent_skill_entropy"] == pytest.approx(1.0)            # both agent skills equally
    assert skill_usage(torch.zeros(0, dtype=torch.long), torch.zeros(0, 2, dtype=torch.long), 3, 2) == {}


def test_learner_drops_stale_hmasd_rollouts_and_raises_when_all_stale():
    cfg = run_config(num_envs=3, rollout_len=10)
    w0, w1 = RolloutWorker(0, cfg), RolloutWorker(1, cfg)
    learner = Learner(cfg, *w0.specs())
    weights = learner.get_weights()
    _, old = w0.sample(weights, 0)
    metrics, weights = learner.update(old)
    train, system = metrics.train, metrics.system
    assert metrics.version == 1 and system["learner_dropped"] == 0
    assert system["learner_env_steps"] == 30 and "disc_team_acc" in train and train["skipped_minibatches"] == 0
    _assert_diagnosis_signals(train, cfg)
    (_, f0), (_, f1) = w0.sample(weights, 1), w1.sample(weights, 1)
    metrics, weights = learner.update(f0, old, f1)  # two fresh (concatenated, final_* rows too), one stale
    assert metrics.system["learner_dropped"] == 1 and metrics.version == 2
    assert metrics.system["learner_env_steps"] == 30 + 60
    with pytest.raises(StaleRolloutError):
        learner.update(old, f0)
    assert learner.version == 2


def test_learner_checkpoint_round_trip_resumes_exactly():
    cfg = run_config(num_envs=3, rollout_len=10)
    worker = RolloutWorker(0, cfg)
    a = Learner(cfg, *worker.specs())
    _, p = worker.sample(a.get_weights(), 0)
    _, weights = a.update(p)
    _, p2 = worker.sample(weights, 1)
    buf = io.BytesIO()
    torch.save(a.state(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    b = Learner(cfg, *worker.specs())
    b.load_state(state)
    assert b.version == 1 and all(torch.equal(x, y) for x, y in zip(a.get_weights().values(), b.get_weights().values()))
    wa, wb = a.update(p2)[1], b.update(p2)[1]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any(k.startswith("high_norm") for k in wa) and float(wa["low_norm.debiasing_term"]) > 0


def test_disc_ignore_hides_those_features_from_q_d_only():
    cfg = run_config(num_envs=3, rollout_len=10, disc_ignore=[[0, 25], [150, 152]])
    env, policy, sampler = make_sampler_for(cfg)
    obs, Z = torch.rand(4, 2, env.observation_spec["obs"].shape[-1]), torch.randint(0, 3, (4,))
    changed = obs.clone()
    changed[..., 0:25], changed[..., 150:152] = torch.rand(4, 2, 25), torch.rand(4, 2, 2)
    assert torch.equal(policy.disc.log_q_agent(obs, Z), policy.disc.log_q_agent(changed, Z))
    changed[..., 30] += 1.0  # a feature q_d does see
    assert not torch.allclose(policy.disc.log_q_agent(obs, Z), policy.disc.log_q_agent(changed, Z))
    metrics = make_trainer(policy, cfg).update(training_batch(sampler.collect()[0]), 0.0)
    assert metrics["skipped_minibatches"] == 0 and 0.0 <= metrics["disc_agent_acc"] <= 1.0


@pytest.mark.parametrize("ranges, message", [([[0, 999]], "past the observation"),
                                             ([[0, 156]], "hides every observation feature")])
def test_disc_ignore_out_of_range_is_refused(ranges, message):
    cfg = run_config(disc_ignore=ranges)
    with pytest.raises(ValueError, match=message):
        make_sampler_for(cfg)


def test_flat_mappo_uses_the_same_code_without_skills():
    cfg = run_config(hierarchy=False, num_envs=3, rollout_len=10)
    env, policy, sampler = make_sampler_for(cfg)
    assert not hasattr(policy, "coordinator") and not hasattr(policy, "disc")
    cols = sampler.collect()[0]
    assert not any(k.startswith(("h_", "skill_", "final_", "last_obs")) for k in cols)
    metrics = make_trainer(policy, cfg).update(training_batch(cols), 0.0)
    assert metrics["skipped_minibatches"] == 0 and not any(k.startswith(("high_", "disc_")) for k in metrics)
    assert all(torch.isfinite(torch.tensor(v)) for k, v in metrics.items() if k.startswith("low_"))


def test_evaluate_deterministic_takes_argmax_at_both_levels():
    cfg = run_config(num_envs=3, rollout_len=10)
    env, policy, sampler = make_sampler_for(cfg)
    a = sampler.collect(deterministic=True)[0]
    env2, _, sampler2 = make_sampler_for(cfg, seed=0)
    sampler2.policy.load_state_dict(policy.state_dict())
    torch.manual_seed(123)  # a different RNG stream changes nothing when deterministic
    b = sampler2.collect(deterministic=True)[0]
    assert torch.equal(a["action"], b["action"]) and torch.equal(a["skill_agent"], b["skill_agent"])


def test_greedy_level_takes_the_argmax_at_one_level_only():
    from rl_system.algos.hmasd.sampler import greedy_levels

    assert greedy_levels(True) == (True, True) and greedy_levels(False) == (False, False)
    assert greedy_levels("high") == (True, False) and greedy_levels("low") == (False, True)
    with pytest.raises(ValueError, match="greedy level"):
        greedy_levels("both")
    cfg = run_config(num_envs=16, rollout_len=10)
    offsets = (0,) * 16

    def first_window(level: str, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        _, policy, sampler = make_sampler_for(cfg, offsets, seed=0)  # same weights and env each time
        torch.manual_seed(rng_seed)
        cols = sampler.collect(deterministic=level)[0]
        return cols["skill_agent"][0], cols["action"][0]  # the skills chosen at t=0 and the first actions

    (zh1, ah1), (zh2, ah2) = first_window("high", 1), first_window("high", 2)
    assert torch.equal(zh1, zh2) and not torch.equal(ah1, ah2)  # greedy skills, sampled actions
    (zl1, _), (zl2, _) = first_window("low", 1), first_window("low", 2)
    assert not torch.equal(zl1, zl2)  # sampled skills (16 envs x 2 agents: equal by chance ~3^-32)


@pytest.mark.parametrize("algo", ["ppo", "flat"])
def test_greedy_level_is_refused_without_a_hierarchy(algo):
    from rl_system.policy.evaluation import evaluate

    if algo == "ppo":  # an algorithm without levels
        cfg, says = (RunConfig.model_validate({"algo": "ppo", "env": {"name": "CartPole"}}),
                     r"^a greedy level \('high'\): needs greedy evaluation at one level of the hierarchy, which algo "
                     r"'ppo' lacks; algo hmasd has it$")
    else:  # HMASD trained flat
        cfg, says = run_config(hierarchy=False), r"^a greedy level \('high'\) needs a policy with levels; this hmasd policy is flat$"
    with pytest.raises(ValueError, match=says):
        evaluate({"config": cfg.model_dump()}, deterministic="high")


# -- learning through real Ray ----------------------------------------------------------------------

@pytest.mark.slow
def test_hmasd_learns_small_alice_bob(ray_session, tmp_path):
    from bench.bench_hmasd import SMALL_MAP_SKILLS
    from rl_system.run.loop import train

    # The small map's 30-step episodes fit 3 skill windows of k=10. Untrained, 3-5% of the episodes
    # succeed by chance (measured in docs/hmasd.md); trained, nearly all do, in 5 steps. The skill
    # settings are the small map's (3 skills; the preset's 8 are for exploring the default map).
    cfg = load_config("launch/configs/alice_bob_hmasd.yaml", [
        "env.kwargs.size=small", *SMALL_MAP_SKILLS, "workers.num_envs=16", "workers.rollout_len=30", "hmasd.skill_interval=10",
        "hmasd.lr=0.001", "max_env_steps=100000", "max_wall_s=75", "target_return=0.8", "return_window=100",
        "tensorboard=true", "log_every_s=30", "checkpoint.every_rounds=0", "learner.torch_threads=1"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary.final_rates["success"] >= 0.5, summary
    assert summary.dropped_rollouts == 0 and summary.policy_version == summary.rounds
    # The training-success curve that bench_hmasd's stability columns read, one point a round.
    curve = read_scalars(tmp_path / "tb", "rollout/success_rate")["rollout/success_rate"]
    assert len(curve) == summary.rounds and curve[-1] == (summary.env_steps, pytest.approx(
        summary.final_rates["success"]))


def test_stability_finds_the_first_solve_and_the_lowest_success_after_it():
    from bench.bench_hmasd import stability

    curve = [(100, 0.2), (200, 0.85), (300, 0.93), (400, 0.4), (500, 0.97)]
    assert stability(curve) == (300, 0.4)  # solved at 300, then fell to 0.4: a collapse
    assert stability(curve[:3]) == (300, 0.93)
    assert stability(curve[:2]) == (None, None)  # never solved
    assert stability([]) == (None, None)


def test_stored_bench_outputs_read_back_into_one_table_and_summary(tmp_path):
    """Seeds of the 20-seed proof run in separate invocations; their printed rows are the record,
    and ``--from-outputs`` must rebuild the same rows and count collapses from them."""
    from bench.bench_hmasd import ROW_HEADER, format_row, parse_rows, summary_lines

    def row(seed, lowest, test, stt=742_400, reseeds=()):
        return {"method": "hmasd", "seed": seed, "reseeds": list(reseeds), "steps_to_target": stt,
                "time_to_target_s": 341.0 if stt else None, "env_steps": 3_008_000, "wall_s": 1555.0,
                "steps_per_s": 1934.0, "train_success": 1.0, "solved_at": 755_200 if lowest is not None else None,
                "lowest_after_solved": lowest, "test_success": test, "test_success_argmax": 1.0, "test_length": 38.2,
                "best_steps": 3_008_000, "best_test_success": 1.0}

    runs = [row(100, 0.87, 1.0), row(101, 0.3, 0.62, reseeds=[1_203_200]), row(102, None, 0.0, stt=None)]
    text = "\n".join(["overrides ...", ROW_HEADER, "---|" * 15 + "---", *map(format_row, runs), "",
                      *summary_lines(runs), "", "agent | z | steps", "Alice | 0 | 12"])
    assert parse_rows(text) == runs
    summary = summary_lines(parse_rows(text))[-1].split(" | ")
    assert summary[1] == "2/3" and summary[-2] == "1/3" and summary[-1] == "1"  # one collapse: seed 101


# -- the bench's plan table -------------------------------------------------------------------------

def test_plan_table_window_counts_agree_with_the_env_episode_info():
    """``hmasd_tables.window_stats`` (per skill window of each env's first episode: who reached it,
    which diamond was collected in it) against the env's own per-episode ``red/blue_collected``."""
    from bench.bench_hmasd import SMALL_MAP_SKILLS
    from bench.hmasd_tables import plan_table, window_stats
    from rl_system.envs import make_env
    from rl_system.policy.evaluation import policy_sampler

    cfg = load_config("launch/configs/alice_bob_hmasd.yaml", [
        "env.kwargs.size=small", *SMALL_MAP_SKILLS, "workers.rollout_len=30", "hmasd.skill_interval=10"])
    env = make_env("AliceBob", 4, "cpu", **cfg.env.kwargs)
    torch.manual_seed(0)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)  # untrained: 3-5% succeed by chance
    state = {"config": cfg.model_dump(), "learner": {"model": policy.state_dict()}}
    env, sampler = policy_sampler(state, 256, seed=777)  # as _sampled does, keeping the episodes
    cols, ended = sampler.collect(deterministic=False)
    env.close()
    stats = window_stats(cols)
    assert [w["episodes"] for w in stats][0] == 256 and len(stats) == 3  # 30-step episodes, k = 10
    assert all(a["episodes"] >= b["episodes"] for a, b in zip(stats, stats[1:]))
    envs = ended.env.tolist()
    first = [envs.index(e) for e in range(256)]  # episodes are listed in time order
    for colour in ("red", "blue"):
        expected = int(ended.outcomes[f"{colour}_collected"][first].sum())
        assert expected > 0  # the check below must be able to fail
        assert sum(w[colour] for w in stats) == expected
    lines = plan_table(state, n_envs=256)
    assert len(lines) == 2 + 3 and lines[2].startswith("1 | 256 | (")


def test_checkpoint_tables_of_the_actors_and_of_q_d_cover_the_map():
    """``hmasd_tables.actor_table`` (action shares, entropy, cells reached), ``discriminator_map``
    (log q_d with Alice on every free cell) and ``discriminator_cells`` (the skill q_d credits on
    each cell, per agent) on an untrained policy."""
    from bench.bench_hmasd import SMALL_MAP_SKILLS
    from bench.hmasd_tables import actor_table, discriminator_cells, discriminator_map
    from rl_system.envs import make_env

    cfg = load_config("launch/configs/alice_bob_hmasd.yaml", ["env.kwargs.size=small", *SMALL_MAP_SKILLS])
    env = make_env("AliceBob", 1, "cpu", **cfg.env.kwargs)
    torch.manual_seed(0)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    state = {"config": cfg.model_dump(), "learner": {"model": policy.state_dict()}}
    rows = [line.split(" | ") for line in actor_table(state, rollouts=1)[2:]]
    assert [r[0] for r in rows] == ["Alice", "Bob"]
    for r in rows:
        assert sum(float(x.rstrip("%")) for x in r[1:6]) == pytest.approx(100, abs=3)  # rounded shares
        assert 1.4 < float(r[6]) <= math.log(5) + 0.05  # an untrained actor is near uniform
        assert sum(int(x) for x in r[7:]) > 3  # a random walk reaches several cells
    lines = discriminator_map(state)[2:]
    assert len(lines) == cfg.hmasd.n_team_skills * 3
    free = int((~env._wall).sum())
    for Z in range(cfg.hmasd.n_team_skills):
        parts = [line.split(" | ") for line in lines[3 * Z: 3 * Z + 3]]
        assert sum(int(p[2]) for p in parts) == free  # every free cell, once
        assert all(float(p[3]) >= float(p[4]) for p in parts if int(p[2]))  # best >= worst
    grids = "\n".join(discriminator_cells(state)).split("\n\n")
    assert [g.splitlines()[0].split()[0] for g in grids] == ["Alice", "Bob"]
    for g in grids:
        rows = [row.split() for row in g.splitlines()[1:]]
        assert len(rows) == env.height and all(len(row) == env.width for row in rows)
        owned = [c for row in rows for c in row if c != "#"]
        assert len(owned) == free  # every free cell, walls as '#'
        for c in owned:
            z, logq = c.split(":")
            assert 0 <= int(z) < cfg.hmasd.n_agent_skills and float(logq) <= 0  # a log-probability
