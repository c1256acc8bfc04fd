"""Tests for the torch CartPole (``rl_system.envs.cartpole``) and the Gymnasium adapter (``rl_system.envs.gym_adapter``)."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rl_system.envs import EntryPointError, make_env
from rl_system.envs.base import Box, Discrete, VecEnv
from rl_system.envs.cartpole import THETA_THRESHOLD_RADIANS, X_THRESHOLD, CartPoleVecEnv
from rl_system.envs.gym_adapter import GymnasiumVecEnv

# ---------------------------------------------------------------------------------------------- helpers


def random_actions(env: VecEnv, gen: torch.Generator) -> torch.Tensor:
    spec = env.action_spec
    if isinstance(spec, Discrete):
        return torch.randint(0, spec.n, (env.num_envs,), generator=gen)
    low = torch.tensor(spec.low).reshape(spec.shape)
    high = torch.tensor(spec.high).reshape(spec.shape)
    u = torch.rand((env.num_envs, *spec.shape), generator=gen)
    return low + u * (high - low)


def controller(obs: np.ndarray) -> int:
    """A linear policy that balances CartPole for the full 500 steps."""
    return int(np.dot((0.1, 0.5, 3.0, 1.0), obs) > 0)


def make_gym_cartpoles(states: np.ndarray) -> list[gymnasium.Env]:
    envs = []
    for i, state in enumerate(states):
        env = gymnasium.make("CartPole-v1")
        env.reset(seed=i)
        env.unwrapped.state = np.array(state, dtype=np.float64)
        envs.append(env)
    return envs


def assert_obs_matches_spec(env: VecEnv, obs: dict[str, torch.Tensor]) -> None:
    assert set(obs) == set(env.observation_spec)
    for key, spec in env.observation_spec.items():
        t = obs[key]
        assert tuple(t.shape) == (env.num_envs, *spec.shape), key
        assert t.dtype == spec.dtype, key
        assert t.device == env.device, key


# ---------------------------------------------------------------------------------------------- torch CartPole vs Gymnasium


def compare_with_gymnasium(dtype: torch.dtype, states: np.ndarray, horizon: int, policy: str, atol: float,
                           state_atol: float | None) -> int:
    """Step our env and Gymnasium CartPoles from the same ``states`` with the same actions; returns the
    number of compared (env, step) pairs. Each env is compared until its first episode ends."""
    k = len(states)
    ours = CartPoleVecEnv(k, dtype=dtype)
    ours.set_state(torch.as_tensor(states))
    gyms = make_gym_cartpoles(states)
    gym_obs = [np.asarray(s, dtype=np.float32) for s in states]
    rng = np.random.default_rng(0)
    alive = np.ones(k, dtype=bool)
    compared = 0
    for _ in range(horizon):
        if policy == "random":
            actions = rng.integers(0, 2, size=k)
        else:
            actions = np.array([controller(o) for o in gym_obs])
        res = ours.step(torch.as_tensor(actions))
        our_state = ours.state.numpy()
        for i in np.flatnonzero(alive):
            obs, reward, term, trunc, _ = gyms[i].step(int(actions[i]))
            gym_obs[i] = obs
            done = bool(term or trunc)
            ours_obs = (res.final_obs if done else res.obs)["obs"][i].numpy()
            np.testing.assert_allclose(ours_obs, obs, rtol=0, atol=atol)
            np.testing.assert_allclose(res.final_obs["obs"][i].numpy(), obs, rtol=0, atol=atol)
            assert res.reward[i].item() == reward == 1.0
            assert bool(res.terminated[i]) == term
            assert bool(res.truncated[i]) == trunc
            if state_atol is not None and not done:
                np.testing.assert_allclose(our_state[i], gyms[i].unwrapped.state, rtol=0, atol=state_atol)
            compared += 1
            if done:
                alive[i] = False
        if not alive.any():
            break
    return compared


def test_cartpole_float64_matches_gymnasium_random_actions():
    rng = np.random.default_rng(1)
    states = np.concatenate([rng.uniform(-0.05, 0.05, (6, 4)), rng.uniform(-0.15, 0.15, (6, 4))])
    n = compare_with_gymnasium(torch.float64, states, horizon=500, policy="random", atol=1e-6, state_atol=1e-9)
    assert n > 12 * 5


def test_cartpole_float64_matches_gymnasium_until_truncation():
    # A balancing controller keeps the pole up: all 500 steps match and both sides truncate together.
    states = np.random.default_rng(2).uniform(-0.05, 0.05, (3, 4))
    n = compare_with_gymnasium(torch.float64, states, horizon=500, policy="controller", atol=1e-6, state_atol=1e-9)
    assert n == 3 * 500


def test_cartpole_float32_close_to_gymnasium_short_horizon():
    states = np.random.default_rng(3).uniform(-0.05, 0.05, (8, 4))
    n = compare_with_gymnasium(torch.float32, states, horizon=25, policy="controller", atol=1e-4, state_atol=None)
    assert n == 8 * 25


# ---------------------------------------------------------------------------------------------- auto-reset, truncation


def force_sync_free_reset(env: CartPoleVecEnv, on: bool) -> CartPoleVecEnv:
    """Use the accelerator-style (``torch.where``, no host sync) auto-reset on CPU too."""
    env._sync_free_reset = on
    return env


@pytest.mark.parametrize("sync_free", [False, True])
def test_auto_reset_only_touches_finished_envs(sync_free):
    n = 6
    calm = torch.zeros(n, 4, dtype=torch.float64)
    calm[:, 2] = torch.linspace(-0.01, 0.01, n, dtype=torch.float64)
    falling = calm.clone()
    falling[1] = torch.tensor([0.0, 0.0, 0.2, 2.0])  # pole past 12 degrees after one step
    falling[4] = torch.tensor([2.39, 1.0, 0.0, 0.0])  # cart past 2.4 after one step
    a = force_sync_free_reset(CartPoleVecEnv(n, dtype=torch.float64, seed=0), sync_free)
    b = force_sync_free_reset(CartPoleVecEnv(n, dtype=torch.float64, seed=0), sync_free)
    a.set_state(falling)
    b.set_state(calm)
    action = torch.tensor([0, 1, 0, 1, 1, 0])
    ra, rb = a.step(action), b.step(action)

    done = torch.tensor([False, True, False, False, True, False])
    assert torch.equal(ra.terminated, done)
    assert not ra.truncated.any()
    assert torch.equal(ra.reward, torch.ones(n))
    # Finished envs: reset obs inside the start box, counters back to 0.
    assert (ra.obs["obs"][done].abs() <= 0.05).all()
    assert torch.equal(a.episode_steps, torch.tensor([1, 0, 1, 1, 0, 1]))
    assert torch.equal(a.state[done].to(torch.float32), ra.obs["obs"][done])
    # final_obs of finished envs is the observation the episode ended on (checked against Gymnasium).
    gyms = make_gym_cartpoles(falling.numpy())
    for i in (1, 4):
        obs, _, term, _, _ = gyms[i].step(int(action[i]))
        assert term
        np.testing.assert_allclose(ra.final_obs["obs"][i].numpy(), obs, atol=1e-6)
    assert abs(ra.final_obs["obs"][1, 2]) > THETA_THRESHOLD_RADIANS
    assert abs(ra.final_obs["obs"][4, 0]) > X_THRESHOLD
    # Other envs are untouched by the resets: identical to the same envs stepped without any reset.
    assert torch.equal(ra.obs["obs"][~done], rb.obs["obs"][~done])
    assert torch.equal(ra.final_obs["obs"][~done], ra.obs["obs"][~done])
    assert torch.equal(a.state[~done], b.state[~done])


@pytest.mark.parametrize("sync_free", [False, True])
def test_truncation_at_max_episode_steps_with_staggered_counters(sync_free):
    n, limit = 3, 5
    start = torch.zeros(n, 4, dtype=torch.float64)
    start[0] = torch.tensor([0.0, 0.0, 0.2, 2.0])  # env 0 terminates on step 1, then restarts
    env = force_sync_free_reset(CartPoleVecEnv(n, dtype=torch.float64, seed=0, max_episode_steps=limit), sync_free)
    ref = CartPoleVecEnv(n, dtype=torch.float64, seed=0, max_episode_steps=None)  # same physics, never truncates
    env.set_state(start)
    ref.set_state(start)
    flags = []
    for t in range(1, 2 * limit + 2):
        action = torch.full((n,), t % 2)
        r, rr = env.step(action), ref.step(action)
        flags.append((r.terminated.tolist(), r.truncated.tolist()))
        if t == 1:
            ref.set_state(torch.cat([env.state[:1], ref.state[1:]]))  # follow env 0 into its new episode
        if t == limit:
            # envs 1 and 2 hit the limit; final_obs is the pre-reset obs (= the never-truncating twin's obs).
            assert r.truncated.tolist() == [False, True, True]
            assert not r.terminated.any()
            assert torch.equal(r.final_obs["obs"][1:], rr.obs["obs"][1:])
            assert (r.obs["obs"][1:].abs() <= 0.05).all()
            assert env.episode_steps.tolist() == [limit - 1, 0, 0]
            ref.set_state(env.state)
    assert flags[0] == ([True, False, False], [False, False, False])
    assert flags[limit] == ([False, False, False], [True, False, False])  # env 0: 5 steps after its reset
    assert flags[2 * limit - 1] == ([False, False, False], [False, True, True])
    assert flags[2 * limit] == ([False, False, False], [True, False, False])
    assert sum(sum(tr) for _, tr in flags) == 6
    assert sum(sum(te) for te, _ in flags) == 1


def test_step_before_reset_and_bad_actions_raise():
    env = CartPoleVecEnv(4)
    with pytest.raises(RuntimeError):
        env.step(torch.zeros(4, dtype=torch.int64))
    env.reset()
    with pytest.raises(ValueError):
        env.step(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(TypeError):
        env.step(torch.zeros(4))
    with pytest.raises(IndexError):
        env.step(torch.full((4,), 2))


# ---------------------------------------------------------------------------------------------- seeding


def rollout(env: VecEnv, steps: int, seed: int | None = None) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(123)
    out = [env.reset(seed=seed)["obs"]]
    for _ in range(steps):
        r = env.step(random_actions(env, gen))
        out += [r.obs["obs"], r.final_obs["obs"], r.reward, r.terminated, r.truncated]
    return out


@pytest.mark.parametrize("sync_free", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cartpole_seeding_is_deterministic(dtype, sync_free):
    def make(seed):
        return force_sync_free_reset(CartPoleVecEnv(16, seed=seed, dtype=dtype, max_episode_steps=40), sync_free)

    a, b, c = rollout(make(7), 120), rollout(make(7), 120), rollout(make(8), 120)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    # reset(seed) reseeds an existing env.
    env = make(0)
    rollout(env, 10)
    d = rollout(env, 120, seed=7)
    assert all(torch.equal(x, y) for x, y in zip(a, d))


def test_adapter_seeding_is_deterministic():
    a = rollout(GymnasiumVecEnv("CartPole-v1", 3, seed=5), 40)
    b = rollout(GymnasiumVecEnv("CartPole-v1", 3, seed=5), 40)
    c = rollout(GymnasiumVecEnv("CartPole-v1", 3, seed=6), 40)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


# ---------------------------------------------------------------------------------------------- spec conformance


class DictObsEnv(gymnasium.Env):
    """Tiny deterministic env with a Dict observation; episodes end after 3 steps."""

    def __init__(self):
        self.observation_space = spaces.Dict({
            "pos": spaces.Box(-10.0, 10.0, (2,), np.float64),
            "phase": spaces.Discrete(3),
            "bits": spaces.MultiBinary(4),
        })
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self):
        return {"pos": np.array([self.t, 2.0 * self.t]), "phase": self.t % 3,
                "bits": np.array([self.t & 1, 0, 1, 0], dtype=np.int8)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t == 3, False, {}


class TupleObsEnv(DictObsEnv):
    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))


class EchoActionEnv(gymnasium.Env):
    """Observes the action it was given (as received, unclipped); never ends."""

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 2.0]), dtype=np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2), {}

    def step(self, action):
        assert action.dtype == np.float64
        return np.array(action, dtype=np.float64), 0.0, False, False, {}


for _id, _entry in (("RLSystemTestDict-v0", DictObsEnv), ("RLSystemTestTuple-v0", TupleObsEnv),
                    ("RLSystemTestEcho-v0", EchoActionEnv)):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_entry, disable_env_checker=True)


ENV_FACTORIES = {
    "torch-cartpole-f32": lambda: CartPoleVecEnv(8, seed=0, max_episode_steps=20),
    "torch-cartpole-f64": lambda: make_env("CartPole", 8, seed=0, dtype=torch.float64, max_episode_steps=20),
    "gym-cartpole": lambda: make_env("gym:CartPole-v1", 4, seed=0),
    "gym-acrobot": lambda: make_env("gym:Acrobot-v1", 4, seed=0),
    "gym-pendulum": lambda: make_env("gym:Pendulum-v1", 4, seed=0),
    "gym-dict": lambda: make_env("gym:RLSystemTestDict-v0", 3, seed=0),
}


@pytest.mark.parametrize("name", sorted(ENV_FACTORIES))
def test_spec_conformance(name):
    env = ENV_FACTORIES[name]()
    try:
        gen = torch.Generator().manual_seed(0)
        assert_obs_matches_spec(env, env.reset())
        for _ in range(25):
            r = env.step(random_actions(env, gen))
            assert_obs_matches_spec(env, r.obs)
            assert_obs_matches_spec(env, r.final_obs)
            assert r.reward.shape == (env.num_envs,) and r.reward.dtype == torch.float32
            assert r.terminated.shape == (env.num_envs,) and r.terminated.dtype == torch.bool
            assert r.truncated.shape == (env.num_envs,) and r.truncated.dtype == torch.bool
            assert isinstance(r.info, dict)
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------- adapter


def test_adapter_spaces():
    cp = GymnasiumVecEnv("CartPole-v1", 2)
    assert cp.observation_spec["obs"].shape == (4,) and cp.action_spec == Discrete(2)
    ac = GymnasiumVecEnv("Acrobot-v1", 2)
    assert ac.observation_spec["obs"].shape == (6,) and ac.action_spec == Discrete(3)
    pe = GymnasiumVecEnv("Pendulum-v1", 2)
    assert pe.observation_spec["obs"].shape == (3,)
    assert pe.action_spec == Box((1,), (-2.0,), (2.0,))
    d = GymnasiumVecEnv("RLSystemTestDict-v0", 2)
    assert {k: (s.shape, s.dtype) for k, s in d.observation_spec.items()} == {
        "pos": ((2,), torch.float32), "phase": ((), torch.int64), "bits": ((4,), torch.int64)}
    for env in (cp, ac, pe, d):
        env.close()


def test_adapter_pendulum_truncates_at_200_with_final_obs():
    seed, n = 11, 2
    env = GymnasiumVecEnv("Pendulum-v1", n, seed=seed)
    env.reset()
    action = torch.full((n, 1), 0.5)
    for _ in range(199):
        r = env.step(action)
        assert not (r.terminated | r.truncated).any()
    r = env.step(action)
    assert r.truncated.all() and not r.terminated.any()
    assert not torch.allclose(r.final_obs["obs"], r.obs["obs"])
    # final_obs is what a plain Gymnasium Pendulum (seeded like copy i) shows after 200 steps.
    for i in range(n):
        ref = gymnasium.make("Pendulum-v1")
        ref.reset(seed=seed + i)
        for _ in range(200):
            obs, *_ = ref.step(np.array([0.5], dtype=np.float32))
        np.testing.assert_allclose(r.final_obs["obs"][i].numpy(), obs, atol=1e-6)
    env.close()


def test_adapter_clips_box_actions():
    env = GymnasiumVecEnv("RLSystemTestEcho-v0", 3)
    assert env.action_spec == Box((2,), (-1.0, 0.0), (1.0, 2.0))
    env.reset()
    r = env.step(torch.tensor([[5.0, -5.0], [-5.0, 5.0], [0.25, 1.5]]))
    assert r.obs["obs"].tolist() == [[1.0, 0.0], [-1.0, 2.0], [0.25, 1.5]]
    with pytest.raises(ValueError):
        env.step(torch.zeros(3, 3))
    env.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_adapter_cartpole_termination_final_obs(mode):
    env = GymnasiumVecEnv("CartPole-v1", 4, seed=0, vectorization_mode=mode)
    try:
        env.reset()
        gen = torch.Generator().manual_seed(0)
        seen = 0
        for _ in range(200):
            r = env.step(random_actions(env, gen))
            done = r.terminated | r.truncated
            assert torch.equal(r.final_obs["obs"][~done], r.obs["obs"][~done])
            if done.any():
                seen += int(done.sum())
                assert r.terminated[done].all()
                ended = r.final_obs["obs"][done]
                assert ((ended[:, 0].abs() > X_THRESHOLD) | (ended[:, 2].abs() > THETA_THRESHOLD_RADIANS)).all()
                assert (r.obs["obs"][done].abs() <= 0.05).all()
            if seen >= 6:
                break
        assert seen >= 6
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_adapter_returned_obs_are_not_overwritten_later(mode):
    # Gymnasium reuses its observation buffers (we ask for copy=False); returned tensors must not alias them.
    env = GymnasiumVecEnv("CartPole-v1", 2, seed=0, vectorization_mode=mode)
    try:
        first = env.reset()["obs"]
        kept = first.clone()
        second = env.step(torch.tensor([0, 1])).obs["obs"]
        kept2 = second.clone()
        env.step(torch.tensor([1, 0]))
        assert torch.equal(first, kept) and torch.equal(second, kept2)
    finally:
        env.close()


def test_adapter_dict_obs_final_obs():
    env = make_env("gym:RLSystemTestDict-v0", 2, seed=0)
    obs = env.reset()
    assert obs["pos"].tolist() == [[0.0, 0.0]] * 2
    for _ in range(2):
        r = env.step(torch.tensor([1, 0]))
        assert not r.terminated.any()
    r = env.step(torch.tensor([1, 0]))
    assert r.terminated.all()
    assert r.reward.tolist() == [1.0, 0.0]
    assert r.final_obs["pos"].tolist() == [[3.0, 6.0]] * 2 and r.final_obs["phase"].tolist() == [0, 0]
    assert r.final_obs["bits"].tolist() == [[1, 0, 1, 0]] * 2
    assert r.obs["pos"].tolist() == [[0.0, 0.0]] * 2 and r.obs["bits"].tolist() == [[0, 0, 1, 0]] * 2
    env.close()


def test_make_env_gym_prefix():
    env = make_env("gym:Acrobot-v1", 3, device="cpu", seed=0)
    assert isinstance(env, GymnasiumVecEnv) and env.num_envs == 3
    obs = env.reset()
    assert obs["obs"].shape == (3, 6)
    r = env.step(torch.zeros(3, dtype=torch.int64))
    assert r.obs["obs"].shape == (3, 6) and r.reward.tolist() == [-1.0] * 3
    env.close()


def test_adapter_errors():
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        make_env("gym:NoSuchEnv-v0", 2)
    with pytest.raises(ValueError, match="vector_entry_point"):
        GymnasiumVecEnv("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    with pytest.raises(TypeError, match="Tuple"):
        GymnasiumVecEnv("RLSystemTestTuple-v0", 2)
    with pytest.raises(EntryPointError, match="unknown env 'NoSuchEnv'"):
        make_env("NoSuchEnv", 2)


def test_cartpole_reward_and_constants_match_gymnasium():
    ref = gymnasium.make("CartPole-v1").unwrapped
    assert math.isclose(ref.theta_threshold_radians, THETA_THRESHOLD_RADIANS)
    assert ref.x_threshold == X_THRESHOLD
    assert gymnasium.spec("CartPole-v1").max_episode_steps == CartPoleVecEnv(1).max_episode_steps
