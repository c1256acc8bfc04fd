"""Our torch envs through Gymnasium's registry (envs/gym_vector.py): gymnasium's own env checker
for the single env, and for the vector env the shapes, spaces, SAME_STEP autoreset (cross-checked
against gymnasium's own SyncVectorEnv), action masks in the observation and seeding."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import rl_system.envs.gym_vector as gv
from rl_system.envs.air_combat import N_DISCRETE_ACTIONS
from rl_system.envs.cartpole import THETA_THRESHOLD_RADIANS, X_THRESHOLD

IDS = sorted(gv.GYM_IDS.values())
# Small or fast variants keep the tests cheap (kwargs reach the env constructor).
FAST_KWARGS = {
    "rl_system/CartPole-v0": {},
    "rl_system/Navigation-v0": {"num_static": 6, "num_dynamic": 2, "max_steps": 50},
    "rl_system/AirCombat-v0": {"time_scale": 8.0, "max_time_s": 20.0},
}


def test_import_registers_ids_with_both_entry_points():
    for name, gym_id in gv.GYM_IDS.items():
        spec = gymnasium.spec(gym_id)
        assert spec.vector_entry_point == "rl_system.envs.gym_vector:TorchVectorEnv"
        assert spec.entry_point == "rl_system.envs.gym_vector:TorchEnv"
        assert spec.kwargs == {"env_name": name}
    assert gv.register_gym_env("CartPole") == "rl_system/CartPole-v0"  # again: a no-op


@pytest.mark.parametrize("gym_id", IDS)
def test_single_env_passes_gymnasium_env_checker(gym_id):
    env = gymnasium.make(gym_id, **FAST_KWARGS[gym_id])
    assert isinstance(env.unwrapped, gv.TorchEnv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # raises on any failed check
    # Only the unbounded-Box advisories (our obs specs leave most bounds open) may remain.
    assert all("infinity" in str(w.message) for w in caught), [str(w.message) for w in caught]
    env.close()


@pytest.mark.parametrize("gym_id", IDS)
def test_vector_env_shapes_and_spaces(gym_id):
    n = 8
    vec = gymnasium.make_vec(gym_id, num_envs=n, **FAST_KWARGS[gym_id])
    assert isinstance(vec, gv.TorchVectorEnv) and vec.num_envs == n
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    obs, info = vec.reset(seed=0)
    assert obs in vec.observation_space and info == {}
    vec.action_space.seed(0)
    for _ in range(30):
        obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())
        assert obs in vec.observation_space
        assert reward.shape == terminated.shape == truncated.shape == (n,)
        assert reward.dtype == np.float64 and terminated.dtype == truncated.dtype == np.bool_
    leaves = obs.values() if isinstance(obs, dict) else [obs]
    assert all(leaf.shape[0] == n for leaf in leaves)
    vec.close()


def test_observation_and_action_spaces():
    cart = gymnasium.make_vec("rl_system/CartPole-v0", num_envs=4)
    assert cart.single_observation_space == gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    assert cart.single_action_space == gymnasium.spaces.Discrete(2)
    assert cart.action_space == gymnasium.spaces.MultiDiscrete([2] * 4)
    nav = gymnasium.make_vec("rl_system/Navigation-v0", num_envs=4, num_dynamic=3)
    assert set(nav.single_observation_space.spaces) == {"state", "lidar", "direction", "dynamic_obstacle"}
    assert nav.single_observation_space["lidar"].shape == (1, 36, 4)
    assert nav.single_observation_space["dynamic_obstacle"].shape == (3, 10)  # kwargs reach the env
    assert nav.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    air = gymnasium.make_vec("rl_system/AirCombat-v0", num_envs=4)
    assert isinstance(air.single_observation_space["action_mask"], gymnasium.spaces.MultiBinary)
    assert air.single_action_space == gymnasium.spaces.Discrete(N_DISCRETE_ACTIONS)
    for env in (cart, nav, air):
        env.close()


def test_same_step_autoreset_puts_the_final_observation_in_infos():
    vec = gymnasium.make_vec("rl_system/CartPole-v0", num_envs=16)
    vec.reset(seed=1)
    for _ in range(200):  # always push right: every pole falls within a few dozen steps
        obs, reward, terminated, truncated, info = vec.step(np.ones(16, dtype=np.int64))
        done = terminated | truncated
        if done.any():
            break
    assert done.any()
    np.testing.assert_array_equal(info["_final_obs"], done)
    np.testing.assert_array_equal(info["_final_info"], done)
    for i in range(16):
        if done[i]:
            final = info["final_obs"][i]
            assert final in vec.single_observation_space
            # The final observation is past a limit; the returned one is already a fresh start.
            assert abs(final[0]) > X_THRESHOLD or abs(final[2]) > THETA_THRESHOLD_RADIANS
            assert np.all(np.abs(obs[i]) <= 0.05)
        else:
            assert info["final_obs"][i] is None
    vec.close()


def test_final_info_carries_the_env_outcome_where_done():
    vec = gymnasium.make_vec("rl_system/Navigation-v0", num_envs=8, **FAST_KWARGS["rl_system/Navigation-v0"])
    vec.reset(seed=2)
    vec.action_space.seed(2)
    for _ in range(60):  # max_steps=50: every env is done at least once
        *_, terminated, truncated, info = vec.step(vec.action_space.sample())
        if (terminated | truncated).any():
            break
    done = terminated | truncated
    final_info = info["final_info"]
    for key in ("success", "collision"):
        np.testing.assert_array_equal(final_info[f"_{key}"], done)
        assert final_info[key].dtype == np.bool_
    # A Navigation episode ends in success, collision or the time limit.
    assert np.all((final_info["success"] | final_info["collision"] | truncated)[done])
    vec.close()


@pytest.mark.parametrize("gym_id", ["rl_system/CartPole-v0", "rl_system/Navigation-v0"])
def test_matches_gymnasium_sync_vector_env_with_same_step_autoreset(gym_id):
    """One torch env as our VectorEnv vs. gymnasium's SyncVectorEnv around our single env, in
    SAME_STEP mode: the same observations, rewards, flags and final observations."""
    kwargs = FAST_KWARGS[gym_id]
    ours = gymnasium.make_vec(gym_id, num_envs=1, **kwargs)
    theirs = SyncVectorEnv([lambda: gymnasium.make(gym_id, **kwargs)], autoreset_mode=AutoresetMode.SAME_STEP)
    o1, _ = ours.reset(seed=7)
    o2, _ = theirs.reset(seed=7)
    assert gymnasium.utils.env_checker.data_equivalence(o1, o2, exact=True)
    ours.action_space.seed(7)
    episodes = 0
    for _ in range(400):
        action = ours.action_space.sample()
        s1, s2 = ours.step(action), theirs.step(action)
        assert gymnasium.utils.env_checker.data_equivalence(s1[:4], s2[:4], exact=True)
        done = bool(s1[2][0] or s1[3][0])
        assert ("final_obs" in s1[4]) == ("final_obs" in s2[4]) == done
        if done:
            episodes += 1
            assert gymnasium.utils.env_checker.data_equivalence(
                s1[4]["final_obs"][0], s2[4]["final_obs"][0], exact=True)
            if episodes == 3:
                break
    assert episodes == 3
    ours.close()
    theirs.close()


def test_next_step_sync_vectorization_works_too():
    """RLlib's path: gymnasium vectorises the single env itself (NEXT_STEP autoreset)."""
    vec = gymnasium.make_vec("rl_system/CartPole-v0", num_envs=3, vectorization_mode="sync")
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    vec.reset(seed=0)
    was_done = np.zeros(3, dtype=bool)
    for _ in range(200):
        obs, reward, terminated, truncated, _ = vec.step(np.ones(3, dtype=np.int64))
        assert obs in vec.observation_space
        # NEXT_STEP: the step after an episode end is the reset, with reward 0 and no flags.
        assert np.all(reward[was_done] == 0.0) and not np.any((terminated | truncated)[was_done])
        assert np.all(np.abs(obs[was_done]) <= 0.05)
        was_done = terminated | truncated
        if was_done.all():
            break
    vec.close()


def test_action_mask_travels_in_the_observation():
    n = 4
    vec = gymnasium.make_vec("rl_system/AirCombat-v0", num_envs=n)
    obs, _ = vec.reset(seed=3)
    assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].shape == (n, N_DISCRETE_ACTIONS)
    assert np.all(obs["action_mask"] == 1)  # at the start every action is legal
    fire = np.full(n, 9, dtype=np.int64)  # fire + straight + full throttle
    obs, *_ = vec.step(fire)
    # Just fired: the launch cooldown makes the fire actions illegal, the others stay legal.
    assert np.all(obs["action_mask"][:, 6:] == 0) and np.all(obs["action_mask"][:, :6] == 1)
    assert obs in vec.observation_space
    vec.close()


@pytest.mark.parametrize("gym_id", IDS)
def test_seeding_is_deterministic(gym_id):
    def run(seed):
        vec = gymnasium.make_vec(gym_id, num_envs=4, **FAST_KWARGS[gym_id])
        first, _ = vec.reset(seed=seed)
        again, _ = vec.reset(seed=seed)
        assert gymnasium.utils.env_checker.data_equivalence(first, again, exact=True)
        vec.action_space.seed(0)
        trace = [first]
        for _ in range(20):
            trace.append(vec.step(vec.action_space.sample())[:4])
        vec.close()
        return trace

    assert gymnasium.utils.env_checker.data_equivalence(run(5), run(5), exact=True)
    assert not gymnasium.utils.env_checker.data_equivalence(run(5)[0], run(6)[0])


def test_module_prefixed_id_and_bad_input():
    # "module:id" imports the module first: what a process that never imported it needs.
    vec = gymnasium.make_vec("rl_system.envs.gym_vector:rl_system/CartPole-v0", num_envs=2)
    with pytest.raises(ValueError, match="seed must be an int"):
        vec.reset(seed=[1, 2])
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        vec.step(np.zeros(3, dtype=np.int64))
    vec.close()
    env = gymnasium.make("rl_system/CartPole-v0")
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.unwrapped.step(0)
