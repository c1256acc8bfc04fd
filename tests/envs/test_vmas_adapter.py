"""Tests for the VMAS adapter (``rl_system.envs.vmas_adapter``): specs and shapes, truncation and
auto-reset, the batched reset against VMAS's own resets, rewards, seeding and bad input."""

from __future__ import annotations

import math
import sys
import warnings

import pytest
import torch

pytest.importorskip("vmas")

from rl_system.envs import make_env
from rl_system.envs.base import (
    ACTION_MASK,
    AgentBox,
    AgentDiscrete,
    AgentMixed,
    AgentMultiDiscrete,
    validate_specs,
)
from rl_system.envs.vmas_adapter import BATCHED_RESET_SCENARIOS, VmasVecEnv, batch_tensors

N = 16
VERIFIED = ("balance", "transport", "wheel")


@pytest.fixture(autouse=True)
def _quiet_vmas():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="vmas")
        yield


def random_actions(env: VmasVecEnv, gen: torch.Generator) -> torch.Tensor:
    """Uniform actions for ``env``'s spec (each agent's own range where a mask narrows it)."""
    spec = env.action_spec
    if isinstance(spec, AgentBox):
        low, high = torch.tensor(spec.low), torch.tensor(spec.high)
        return low + (high - low) * torch.rand((env.num_envs, *spec.shape), generator=gen)
    if isinstance(spec, AgentMultiDiscrete):
        return torch.stack([torch.randint(0, k, (env.num_envs, env.num_agents), generator=gen) for k in spec.nvec], -1)
    counts = env._mask.sum(1).tolist() if env._mask is not None else [spec.n] * env.num_agents
    return torch.stack([torch.randint(0, c, (env.num_envs,), generator=gen) for c in counts], dim=1)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical, NaN matching NaN (lidar and distance caches may hold them)."""
    return torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.nan_to_num(7e30), b.nan_to_num(7e30)))


def stepped(scenario: str, steps: int = 5, seed: int = 3, **kwargs) -> tuple[VmasVecEnv, torch.Generator]:
    """An env of ``scenario`` (4 agents where the scenario has a choice) after ``steps`` random
    steps, and its action generator."""
    if scenario in VERIFIED:
        kwargs.setdefault("n_agents", 4)
    env = VmasVecEnv(scenario, N, seed=seed, **kwargs)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        env.step(random_actions(env, gen))
    return env, gen


def assert_valid_initial(scenario: str, env: VmasVecEnv, rows: torch.Tensor) -> None:
    """The envs ``rows`` (bool ``[N]``) hold a state the scenario's reset can produce: positions
    in its spawn ranges, everything at rest, step counters zero, shaping baselines consistent."""
    sc, world = env.env.scenario, env.env.scenario.world
    assert torch.all(env.env.steps[rows] == 0)
    for entity in world.entities:
        if entity.movable:
            assert torch.all(entity.state.vel[rows] == 0), entity.name
    if scenario == "balance":
        line, package, goal = sc.line.state.pos[rows], sc.package.state.pos[rows], sc.package.goal.state.pos[rows]
        half = sc.line_length / 2
        assert torch.all(line[:, 0].abs() <= 1 - half) and torch.allclose(line[:, 1], torch.tensor(-1 + 0.06))
        assert torch.all(goal[:, 0].abs() <= 1) and torch.all((goal[:, 1] >= 0) & (goal[:, 1] <= 1))
        rel = package - line
        assert torch.all(rel[:, 0].abs() <= half - 0.05 + 1e-6) and torch.allclose(rel[:, 1], torch.tensor(0.05))
        assert torch.all(sc.line.state.rot[rows] == 0) and torch.all(sc.line.state.ang_vel[rows] == 0)
        for i, agent in enumerate(world.agents):
            offset = torch.tensor([-(0.8 - 0.03) / 2 + i * (0.8 - 0.03) / (sc.n_agents - 1), -0.06])
            assert torch.allclose(agent.state.pos[rows], line + offset, atol=1e-6)
        assert torch.allclose(sc.global_shaping[rows], 100 * torch.linalg.vector_norm(package - goal, dim=1))
    elif scenario == "transport":
        agents = torch.stack([a.state.pos[rows] for a in world.agents], dim=1)
        assert torch.all(agents.abs() <= 1)
        assert torch.all(torch.cdist(agents, agents) + 10 * torch.eye(len(world.agents)) >= 0.06)
        for package in sc.packages:
            pkg, goal = package.state.pos[rows], package.goal.state.pos[rows]
            assert torch.all(pkg.abs() <= 1) and torch.all(goal.abs() <= 1)
            assert torch.allclose(package.global_shaping[rows], 100 * torch.linalg.vector_norm(pkg - goal, dim=1))
    elif scenario == "wheel":
        for agent in world.agents:
            assert torch.all(agent.state.pos[rows].abs() <= 1)
        assert torch.all(sc.line.state.rot[rows].abs() <= math.pi / 2) and torch.all(sc.line.state.ang_vel[rows] == 0)
        assert torch.all(sc.line.state.pos[rows] == 0)


# ---------------------------------------------------------------------------------------- specs and shapes

@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("scenario", ["balance", "transport"])
def test_shapes_dtypes_and_specs(scenario, continuous):
    env = VmasVecEnv(scenario, N, seed=0, continuous_actions=continuous, n_agents=4)
    n, width = 4, {"balance": 16, "transport": 11}[scenario]
    assert env.num_agents == n and env.agent_names == tuple(f"agent_{i}" for i in range(n))
    assert env.observation_spec["obs"].shape == (n, width) and env.observation_spec["state"].shape == (n * width,)
    if continuous:
        assert env.action_spec == AgentBox((2,), (-1.0, -1.0), (1.0, 1.0), n)
    else:
        assert env.action_spec == AgentDiscrete(9, n)
    validate_specs(env.observation_spec, env.action_spec)
    obs = env.reset()
    assert set(obs) == {"state", "obs"}
    assert obs["obs"].shape == (N, n, width) and obs["obs"].dtype == torch.float32
    assert obs["state"].shape == (N, n * width) and torch.equal(obs["state"], obs["obs"].reshape(N, -1))
    out = env.step(random_actions(env, torch.Generator().manual_seed(0)))
    assert out.reward.shape == (N, n) and out.reward.dtype == torch.float32
    for flags in (out.terminated, out.truncated):
        assert flags.shape == (N,) and flags.dtype == torch.bool
    assert out.final_obs["obs"].shape == (N, n, width)


def test_make_env_validates_specs():
    env = make_env("vmas:balance", 16, seed=0)
    assert isinstance(env, VmasVecEnv) and env.num_agents == 3  # the scenario's default
    validate_specs(env.observation_spec, env.action_spec)
    assert env.step(torch.zeros((16, 3), dtype=torch.int64)).obs["obs"].shape == (16, 3, 16)


def test_continuous_actions_are_clipped():
    env = VmasVecEnv("wheel", N, seed=0, continuous_actions=True)
    out = env.step(torch.full((N, 4, 2), 5.0))  # VMAS would assert on out-of-range actions without clamping
    assert torch.isfinite(out.reward).all()


def test_multidiscrete_actions():
    env = VmasVecEnv("balance", N, seed=0, multidiscrete_actions=True, n_agents=4)
    assert env.action_spec == AgentMultiDiscrete((3, 3), 4)
    validate_specs(env.observation_spec, env.action_spec)
    assert env.step(random_actions(env, torch.Generator().manual_seed(0))).reward.shape == (N, 4)


def test_agents_with_different_widths_are_padded_and_masked():
    env = make_env("vmas:simple_speaker_listener", N, seed=0)
    assert (env.action_spec.n, env.action_spec.num_agents) == (27, 2)
    assert [(a.name, a.obs_width, a.action) for a in env.action_spec.agents] == [
        ("speaker_0", 3, AgentDiscrete(27, 1)), ("listener_0", 11, AgentDiscrete(9, 1))]
    mask = env.reset()[ACTION_MASK]
    assert mask.shape == (N, 2, 27) and mask.dtype == torch.bool
    assert mask.sum(-1).tolist() == [[27, 9]] * N  # speaker: move x say; listener: move only
    obs = env.step(random_actions(env, torch.Generator().manual_seed(0))).obs
    assert obs["obs"].shape == (N, 2, 11) and obs["state"].shape == (N, 3 + 11)
    assert torch.all(obs["obs"][:, 0, 3:] == 0)  # the speaker's 3 values, zero-padded
    assert torch.equal(obs["state"][:, :3], obs["obs"][:, 0, :3])
    assert torch.equal(obs["state"][:, 3:], obs["obs"][:, 1])


def test_continuous_actions_of_different_sizes_are_agent_mixed_rows_and_a_grouped_policy_drives_them():
    from rl_system.algos import get_algorithm
    from rl_system.config import load_config

    env = make_env("vmas:kinematic_bicycle", N, seed=0, continuous_actions=True)
    spec = env.action_spec
    assert isinstance(spec, AgentMixed) and spec.shape == (2, 3)
    assert [a.action.agent_shape for a in spec.agents] == [(2,), (3,)]  # the bicycle's, the holonomic robot's
    policy = get_algorithm("mappo").make_policy(env.observation_spec, spec, load_config(
        None, ["algo=mappo", "env.name=vmas:kinematic_bicycle"]))
    assert len(policy.groups) == 2
    obs = env.reset()
    for _ in range(3):
        action, _, _ = policy.act(obs)
        assert (action[:, 0, 2] == 0).all()  # the bicycle's row holds its 2 values, then padding
        result = env.step(action)
        assert result.reward.shape == (N, 2) and torch.isfinite(result.obs["obs"]).all()
        obs = result.obs


# ---------------------------------------------------------------------------------------- episode ends, auto-reset

def test_truncation_at_max_steps_resets_with_final_obs():
    """Episodes end at different times (some envs reset mid-way): the ones at max_steps are
    truncated, not terminated; final_obs is what an env without a time limit sees, obs a new start."""
    env = VmasVecEnv("wheel", N, seed=5, max_steps=4)
    free = VmasVecEnv("wheel", N, seed=5, max_steps=None)
    gen, early = torch.Generator().manual_seed(0), torch.arange(N) % 2 == 0
    for t in range(4):
        if t == 2:
            env.reset_envs(early)
            free.reset_envs(early)
        action = random_actions(env, gen)
        out, ref = env.step(action), free.step(action)
    assert torch.equal(out.truncated, ~early) and not out.terminated.any()
    assert torch.equal(out.final_obs["obs"], ref.obs["obs"]) and torch.equal(out.reward, ref.reward)
    assert torch.equal(out.obs["obs"][early], out.final_obs["obs"][early])  # still running
    assert not torch.equal(out.obs["obs"][~early], out.final_obs["obs"][~early])
    assert_valid_initial("wheel", env, ~early)
    assert env.env.steps[early].eq(2).all()
    assert torch.equal(out.obs["obs"], env.reset_envs(torch.zeros(N, dtype=torch.bool))["obs"])  # obs = the state's


def test_scenario_done_is_terminated():
    env = VmasVecEnv("balance", N, seed=0, max_steps=None)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        out = env.step(random_actions(env, gen))
        if out.terminated.any():
            break
    assert out.terminated.any() and not out.truncated.any()
    ended = out.terminated
    assert env.env.steps[ended].eq(0).all() and env.env.steps[~ended].gt(0).all()
    assert not torch.equal(out.obs["obs"][ended], out.final_obs["obs"][ended])
    assert torch.equal(out.obs["obs"][~ended], out.final_obs["obs"][~ended])
    assert_valid_initial("balance", env, ended)


# ---------------------------------------------------------------------------------------- the batched reset

def check_batched_reset(scenario: str) -> None:
    """The reset envs get exactly the state VMAS's own vectorized reset gives from the same
    generator state; the running envs are bit-identical and go on exactly as envs never reset.
    For balance, transport and wheel the reset envs' states are also checked for validity."""
    env, gen = stepped(scenario, batched_reset=True)
    never, never_gen = stepped(scenario)
    vmas_reset, _ = stepped(scenario)
    assert vmas_reset._rng[0].equal(env._rng[0])  # same history, same generator state
    done = torch.arange(N) % 3 == 0
    obs = env.reset_envs(done)
    fresh = vmas_reset.reset()
    ours, theirs, kept = (batch_tensors(e.env.scenario, N) for e in (env, vmas_reset, never))
    assert set(ours) == set(theirs) == set(kept)
    for path, (_, _, t) in ours.items():
        assert same(t[done], theirs[path][2][done]), path
        assert same(t[~done], kept[path][2][~done]), path
    assert same(obs["obs"][done], fresh["obs"][done])
    assert env.env.steps[done].eq(0).all() and torch.equal(env.env.steps[~done], never.env.steps[~done])
    if scenario in VERIFIED:
        assert_valid_initial(scenario, env, done)
    for _ in range(10):
        action = random_actions(env, gen)
        random_actions(never, never_gen)
        out, ref = env.step(action), never.step(action)
        assert same(out.obs["obs"][~done], ref.obs["obs"][~done])
        assert same(out.reward[~done], ref.reward[~done])


@pytest.mark.parametrize("scenario", VERIFIED)
def test_batched_reset_is_vmas_reset_and_leaves_running_envs(scenario):
    check_batched_reset(scenario)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(BATCHED_RESET_SCENARIOS - set(VERIFIED)))
def test_batched_reset_of_every_listed_scenario(scenario):
    """What admits a scenario to BATCHED_RESET_SCENARIOS (minutes on 2 cores: pollock alone is slow)."""
    check_batched_reset(scenario)


@pytest.mark.parametrize("scenario", VERIFIED)
def test_reset_at_loop_gives_valid_initial_states(scenario):
    """VMAS's own reset_at (the loop) meets the same checks: they test the scenario, not the blend."""
    env, _ = stepped(scenario, batched_reset=False)
    done = torch.arange(N) % 3 == 1
    before = {path: t.clone() for path, (_, _, t) in batch_tensors(env.env.scenario, N).items()}
    env.reset_envs(done)
    assert_valid_initial(scenario, env, done)
    for path, (_, _, t) in batch_tensors(env.env.scenario, N).items():
        if path in before:
            assert torch.equal(t[~done], before[path][~done]), path


def test_unverified_scenario_uses_the_loop_with_one_warning():
    from rl_system.envs import vmas_adapter

    vmas_adapter._LOOP_WARNED.discard("het_mass")
    with pytest.warns(UserWarning, match="reset_at loop"):
        env = VmasVecEnv("het_mass", 4, seed=0)
    assert not env.batched_reset
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not VmasVecEnv("het_mass", 4, seed=0).batched_reset  # once per process
    assert VmasVecEnv("het_mass", 4, seed=0, batched_reset=True).batched_reset


def test_batched_reset_that_raises_falls_back_to_the_loop(monkeypatch):
    env, _ = stepped("balance")
    before = {path: t.clone() for path, (_, _, t) in batch_tensors(env.env.scenario, N).items()}
    real = env.env.scenario.env_reset_world_at

    def failing(env_index):
        if env_index is None:
            env.env.scenario.world.agents[0].state.pos = torch.zeros(N, 2)  # half done, then
            raise RuntimeError("boom")
        real(env_index)

    monkeypatch.setattr(env.env.scenario, "env_reset_world_at", failing)
    done = torch.arange(N) < 4
    with pytest.warns(UserWarning, match="batched reset failed .*boom"):
        env.reset_envs(done)
    assert not env.batched_reset
    assert_valid_initial("balance", env, done)
    for path, (_, _, t) in batch_tensors(env.env.scenario, N).items():
        assert torch.equal(t[~done], before[path][~done]), path


# ---------------------------------------------------------------------------------------- rewards, info, seeds

def test_reward_modes():
    agent, team = VmasVecEnv("balance", N, seed=2), VmasVecEnv("balance", N, seed=2, reward="team")
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        action = random_actions(agent, gen)
        a, t = agent.step(action), team.step(action)
        assert a.reward.shape == (N, 3) and t.reward.shape == (N,)
        assert torch.allclose(t.reward, a.reward.mean(dim=1))
        assert torch.equal(a.reward, a.reward[:, :1].expand(N, 3))  # balance shares one reward: team = it
    assert set(a.info) == {"pos_rew", "ground_rew"}
    assert all(v.shape == (N,) and v.dtype == torch.float32 for v in a.info.values())


def test_seeded_envs_are_deterministic_and_independent():
    """Equal seeds and actions give equal trajectories (through auto-resets), even with the two
    envs stepped in turn in one process; another seed gives other starts; reset(seed) reseeds."""
    first, second = VmasVecEnv("transport", N, seed=7, max_steps=6), VmasVecEnv("transport", N, seed=7, max_steps=6)
    other = VmasVecEnv("transport", N, seed=8, max_steps=6)
    obs1, obs2 = first.reset(), second.reset()
    assert torch.equal(obs1["obs"], obs2["obs"]) and not torch.equal(obs1["obs"], other.reset()["obs"])
    gen = torch.Generator().manual_seed(0)
    for _ in range(14):
        action = random_actions(first, gen)
        a, b = first.step(action), second.step(action)
        other.step(action)
        for key in ("obs", "state"):
            assert torch.equal(a.obs[key], b.obs[key]) and torch.equal(a.final_obs[key], b.final_obs[key])
        assert torch.equal(a.reward, b.reward) and torch.equal(a.truncated, b.truncated)
    assert torch.equal(first.reset(seed=11)["obs"], other.reset(seed=11)["obs"])


# ---------------------------------------------------------------------------------------- bad input

def test_unknown_scenario_is_one_line_with_close_names():
    with pytest.raises(ValueError, match=r"^unknown VMAS scenario 'balanc'; did you mean balance\?$"):
        make_env("vmas:balanc", 8)
    with pytest.raises(ValueError, match=r"^unknown VMAS scenario 'zzz'; known: .*\btransport\b") as err:
        VmasVecEnv("zzz", 8)
    assert "\n" not in str(err.value)


def test_missing_vmas_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "vmas", None)  # import vmas now raises ImportError
    with pytest.raises(ValueError, match=r"^vmas is not installed: pip install vmas, or pip install -e '\.\[vmas\]' "
                                         r"in a checkout$"):
        make_env("vmas:balance", 8)


@pytest.mark.parametrize("kwargs, match", [({"reward": "sum"}, "reward must be one of"),
                                           ({"max_steps": 0}, "max_steps must be >= 1 or None"),
                                           ({"num_envs": 0}, "num_envs must be >= 1")])
def test_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VmasVecEnv("balance", **{"num_envs": 4, **kwargs})
