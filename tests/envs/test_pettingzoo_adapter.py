"""The PettingZoo adapter (rl_system.envs.pettingzoo_adapter): specs, padding and masks, auto-reset,
parity with the raw ParallelEnvs, agents that finish early, and the error lines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

pettingzoo = pytest.importorskip("pettingzoo")
from gymnasium import spaces

from rl_system.envs import EntryPointError, make_env
from rl_system.envs.base import AgentBox, AgentDiscrete, AgentMixed, AgentMultiDiscrete, validate_specs
from rl_system.envs.pettingzoo_adapter import NOT_INSTALLED, PettingZooVecEnv

needs_mpe = pytest.mark.skipif(importlib.util.find_spec("mpe2") is None, reason="mpe2 is not installed")
SPREAD = "mpe2.simple_spread_v3:parallel_env"
SPEAKER = "mpe2.simple_speaker_listener_v4:parallel_env"
SPREAD_KW = {"N": 3, "max_cycles": 25, "continuous_actions": False}


class Relay(pettingzoo.ParallelEnv):
    """Two agents that leave at different times: ``a`` (obs width 2, 2 actions) after ``a_end``
    steps, ``b`` (obs width 3, 3 actions) after ``b_end``. ``a_exit``/``b_exit`` say how:
    ``"terminated"``, ``"truncated"`` or (``a`` only) ``"absent"`` (dropped without a flag).
    ``leaky``: after ``a`` left, the env still puts it in the obs and reward dicts (the adapter must
    not pass them on). ``masks``: Dict observations whose ``action_mask`` forbids action 0 on odd
    steps. ``stagger``: a seeded reset moves ``b``'s end ``seed`` steps later (copies end apart).
    Rewards: ``a`` 1 + its action, ``b`` 10 + its action. No state_space."""

    metadata: ClassVar[dict] = {"name": "relay_v0"}

    def __init__(self, a_end: int = 3, b_end: int = 6, a_exit: str = "terminated", b_exit: str = "terminated",
                 leaky: bool = False, masks: bool = False, box_actions: bool = False, stagger: bool = False) -> None:
        self.possible_agents = ["a", "b"]
        self.b_end, self.stagger = b_end, stagger
        self.ends, self.exits = {"a": a_end, "b": b_end}, {"a": a_exit, "b": b_exit}
        self.leaky, self.masks = leaky, masks
        self.widths, self.counts = {"a": 2, "b": 3}, {"a": 2, "b": 3}
        box = {a: spaces.Box(-10, 10, (self.widths[a],), np.float32) for a in self.possible_agents}
        self.observation_spaces = {a: spaces.Dict({"observation": box[a], "action_mask": spaces.MultiBinary(
            self.counts[a])}) if masks else box[a] for a in self.possible_agents}
        self.action_spaces = {a: spaces.Box(-1, 1, (self.counts[a],)) if box_actions
                              else spaces.Discrete(self.counts[a]) for a in self.possible_agents}
        self.agents: list[str] = []

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def _obs(self, agent: str, last: int) -> object:
        x = np.array([self.t, 1.0] if agent == "a" else [self.t, 2.0, last], dtype=np.float32)
        if not self.masks:
            return x
        mask = np.ones(self.counts[agent], dtype=np.int8)
        mask[0] = self.t % 2 == 0
        return {"observation": x, "action_mask": mask}

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        if self.stagger and seed is not None:
            self.ends["b"] = self.b_end + seed
        return {a: self._obs(a, -1) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), f"actions for {sorted(actions)}, agents {self.agents}"
        self.t += 1
        obs, rew, term, trunc = {}, {}, {}, {}
        for agent in self.possible_agents:
            if agent in self.agents:
                act = int(actions[agent])
                obs[agent] = self._obs(agent, act)
                rew[agent] = (1.0 if agent == "a" else 10.0) + act
                ending = self.t == self.ends[agent]
                exit_ = self.exits[agent]
                if exit_ != "absent":
                    term[agent] = ending and exit_ == "terminated"
                    trunc[agent] = ending and exit_ == "truncated"
            elif self.leaky:
                obs[agent], rew[agent], term[agent], trunc[agent] = self._obs(agent, 0), 99.0, True, False
        self.agents = [a for a in self.agents if self.t < self.ends[a]]
        return obs, rew, term, trunc, {a: {} for a in obs}


RELAY = f"{__name__}:Relay"


class Kinds(pettingzoo.ParallelEnv):
    """Three agents of three action kinds, each rewarded with what it was sent: ``talker``
    (``Discrete(3, start=1)``, obs width 1) its word, ``mover`` (``Box(2)`` in ``[-1, 1]``, obs
    width 2) the sum of its move, ``picker`` (``MultiDiscrete((2, 3))``, obs width 3) ``10 a0 + a1``.
    Observations: the step count / 4. Episodes of 4 steps."""

    metadata: ClassVar[dict] = {"name": "kinds_v0"}
    possible_agents = ["talker", "mover", "picker"]

    def __init__(self, newcomer: bool = False) -> None:
        self.newcomer = newcomer  # a fourth agent, not in possible_agents, joins on step 2
        self.spaces = {"talker": spaces.Discrete(3, start=1), "mover": spaces.Box(-1, 1, (2,), np.float32),
                       "picker": spaces.MultiDiscrete([2, 3])}
        self.agents: list[str] = []

    def observation_space(self, agent):
        return spaces.Box(-1, 1, ({"talker": 1, "mover": 2, "picker": 3}[agent],), np.float32)

    def action_space(self, agent):
        return self.spaces[agent]

    def _obs(self):
        return {a: np.full(self.observation_space(a).shape, self.t / 4, np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        assert self.action_space("mover").contains(actions["mover"]) and self.spaces["picker"].contains(actions["picker"])
        self.t += 1
        picked = actions["picker"]
        rew = {"talker": float(actions["talker"]), "mover": float(actions["mover"].sum()),
               "picker": float(10 * picked[0] + picked[1])}
        done = {a: self.t >= 4 for a in self.agents}
        obs = self._obs()
        if self.newcomer and self.t == 2:
            obs["guest"] = np.zeros(1, np.float32)
        if self.t >= 4:
            self.agents = []
        return obs, rew, done, {a: False for a in done}, {a: {} for a in done}


def relay(num_envs: int = 1, **kwargs) -> PettingZooVecEnv:
    return PettingZooVecEnv(RELAY, num_envs=num_envs, seed=0, **kwargs)


# ---------------------------------------------------------------------------------------------- specs


@needs_mpe
def test_simple_spread_specs_and_shapes():
    env = PettingZooVecEnv(SPREAD, num_envs=4, seed=0, **SPREAD_KW)
    assert env.action_spec == AgentDiscrete(5, 3) and env.num_agents == 3
    assert env.agent_names == ("agent_0", "agent_1", "agent_2")
    spec = env.observation_spec
    assert set(spec) == {"state", "obs", "agent_active"}  # no mask: every agent has all 5 actions
    assert spec["obs"].shape == (3, 18) and spec["state"].shape == (54,) and spec["agent_active"].shape == (3,)
    validate_specs(spec, env.action_spec)
    obs = env.reset()
    assert obs["obs"].shape == (4, 3, 18) and obs["state"].shape == (4, 54) and obs["agent_active"].all()
    # simple_spread's state is its agents' observations side by side
    torch.testing.assert_close(obs["state"], obs["obs"].reshape(4, 54))
    res = env.step(torch.randint(0, 5, (4, 3)))
    assert res.reward.shape == (4, 3) and res.reward.dtype == torch.float32
    assert res.terminated.shape == res.truncated.shape == (4,)
    env.close()


@needs_mpe
def test_make_env_builds_simple_spread_with_valid_specs():
    env = make_env("pettingzoo:mpe2.simple_spread_v3:parallel_env", 4, seed=0, N=3, max_cycles=25)
    assert isinstance(env, PettingZooVecEnv) and env.num_envs == 4
    validate_specs(env.observation_spec, env.action_spec)
    env.close()


@needs_mpe
def test_speaker_listener_pads_observations_and_masks_the_speakers_missing_actions():
    env = PettingZooVecEnv(SPEAKER, num_envs=3, seed=1, continuous_actions=False)
    assert env.agent_names == ("speaker_0", "listener_0")
    assert (env.action_spec.n, env.action_spec.num_agents) == (5, 2)
    # the agents differ: each one's own spaces travel with the spec (agent groups are made from them)
    assert [(a.name, a.obs_width, a.action) for a in env.action_spec.agents] == [
        ("speaker_0", 3, AgentDiscrete(3, 1)), ("listener_0", 11, AgentDiscrete(5, 1))]
    assert env.observation_spec["obs"].shape == (2, 11) and env.observation_spec["state"].shape == (14,)
    assert env.observation_spec["action_mask"].shape == (2, 5)
    obs = env.reset()
    assert (obs["obs"][:, 0, 3:] == 0).all() and (obs["obs"][:, 0, :3] != 0).any()
    expected = torch.tensor([[True, True, True, False, False], [True] * 5])
    assert (obs["action_mask"] == expected).all()
    by_obs = PettingZooVecEnv(SPEAKER, num_envs=3, seed=1, continuous_actions=False, state="obs")
    assert by_obs.reset()["state"].equal(obs["state"])  # MPE's state(): the unpadded observations side by side
    for _ in range(30):
        action = torch.stack([torch.randint(0, 3, (3,)), torch.randint(0, 5, (3,))], dim=1)
        res, res_obs = env.step(action), by_obs.step(action)
        assert (res.obs["action_mask"] == expected).all() and (res.obs["obs"][:, 0, 3:] == 0).all()
        assert res_obs.obs["state"].equal(res.obs["state"]) and res_obs.final_obs["state"].equal(res.final_obs["state"])
    env.close()


@needs_mpe
def test_continuous_simple_spread_is_agent_box():
    env = PettingZooVecEnv(SPREAD, num_envs=2, seed=0, N=3, max_cycles=25, continuous_actions=True)
    assert env.action_spec == AgentBox((5,), (0.0,) * 5, (1.0,) * 5, 3)
    env.reset()
    assert env.step(torch.full((2, 3, 5), 2.0)).reward.shape == (2, 3)  # out of bounds: clipped, not refused
    env.close()


@needs_mpe
def test_team_reward_is_the_mean_over_agents():
    agent, team = (PettingZooVecEnv(SPREAD, num_envs=3, seed=5, reward=mode, **SPREAD_KW) for mode in ("agent", "team"))
    agent.reset(), team.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        a = torch.randint(0, 5, (3, 3), generator=gen)
        ra, rt = agent.step(a).reward, team.step(a).reward
        assert rt.shape == (3,)
        torch.testing.assert_close(rt, ra.mean(dim=1))


# ---------------------------------------------------------------------------------------------- episodes


@needs_mpe
def test_auto_reset_after_max_cycles():
    raw = __import__("mpe2.simple_spread_v3", fromlist=["x"]).parallel_env(N=3, max_cycles=5)
    raw_obs, _ = raw.reset(seed=3)
    env = PettingZooVecEnv(SPREAD, num_envs=1, seed=3, N=3, max_cycles=5)
    env.reset()
    for t in range(5):
        a = torch.randint(0, 5, (1, 3))
        res = env.step(a)
        raw_obs, *_ = raw.step({f"agent_{j}": int(a[0, j]) for j in range(3)})
        assert bool(res.truncated[0]) == (t == 4) and not res.terminated.any()
    final = np.stack([raw_obs[f"agent_{j}"] for j in range(3)])
    np.testing.assert_array_equal(res.final_obs["obs"][0].numpy(), final)
    assert res.final_obs["agent_active"].all() and res.obs["agent_active"].all()
    fresh, _ = raw.reset()
    np.testing.assert_array_equal(res.obs["obs"][0].numpy(), np.stack([fresh[f"agent_{j}"] for j in range(3)]))
    assert not res.final_obs["obs"].equal(res.obs["obs"])
    env.close()


def _raw_rows(obs: dict, agents: list[str], width: int) -> np.ndarray:
    rows = np.zeros((len(agents), width), np.float32)
    for j, a in enumerate(agents):
        rows[j, :obs[a].size] = obs[a].reshape(-1)
    return rows


@needs_mpe
@pytest.mark.parametrize("target,kwargs,steps", [
    (SPREAD, SPREAD_KW, 300),
    (SPREAD, {**SPREAD_KW, "continuous_actions": True}, 60),
    (SPEAKER, {"continuous_actions": False, "max_cycles": 10}, 60),
], ids=["spread", "spread-continuous", "speaker-listener"])
def test_batch_equals_the_raw_envs_stepped_by_hand(target, kwargs, steps):
    n_envs, seed = 3, 11
    env = PettingZooVecEnv(target, num_envs=n_envs, seed=seed, **kwargs)
    module = importlib.import_module(target.split(":")[0])
    raws = [module.parallel_env(**kwargs) for _ in range(n_envs)]
    agents, width = list(raws[0].possible_agents), env.observation_spec["obs"].shape[1]
    raw_obs = [raw.reset(seed=seed + i)[0] for i, raw in enumerate(raws)]
    obs = env.reset()
    gen = torch.Generator().manual_seed(1)
    spec, ends = env.action_spec, 0
    for _ in range(steps):
        for i, raw in enumerate(raws):
            np.testing.assert_array_equal(obs["obs"][i].numpy(), _raw_rows(raw_obs[i], agents, width))
            np.testing.assert_array_equal(obs["state"][i].numpy(), raw.state())
        if isinstance(spec, AgentBox):
            action = torch.rand((n_envs, *spec.shape), generator=gen)
        else:
            counts = [raws[0].action_space(a).n for a in agents]
            action = torch.stack([torch.randint(0, c, (n_envs,), generator=gen) for c in counts], dim=1)
        res = env.step(action)
        for i, raw in enumerate(raws):
            acts = {a: action[i, j].numpy() for j, a in enumerate(agents)}
            raw_obs[i], rew, _, trunc, _ = raw.step(acts)
            np.testing.assert_array_equal(res.reward[i].numpy(), np.float32([rew[a] for a in agents]))
            if not raw.agents:
                ends += 1
                assert bool(res.truncated[i]) == all(trunc.values()) and not res.terminated[i]
                np.testing.assert_array_equal(res.final_obs["obs"][i].numpy(), _raw_rows(raw_obs[i], agents, width))
                raw_obs[i], _ = raw.reset()
            else:
                assert not (res.terminated[i] or res.truncated[i])
        obs = res.obs
    assert ends >= n_envs * (steps // kwargs["max_cycles"])
    env.close()


@needs_mpe
def test_a_seed_makes_the_batch_reproducible():
    def run(env, seed=None):
        first = env.reset(seed=seed)["obs"].clone()
        gen = torch.Generator().manual_seed(0)
        rewards = torch.stack([env.step(torch.randint(0, 5, (2, 3), generator=gen)).reward for _ in range(40)])
        return first, rewards

    a, b, c = (PettingZooVecEnv(SPREAD, num_envs=2, seed=s, **SPREAD_KW) for s in (4, 4, 5))
    (oa, ra), (ob, rb), (oc, _) = run(a), run(b), run(c)
    assert oa.equal(ob) and ra.equal(rb) and not oa.equal(oc)
    assert not oa[0].equal(oa[1])  # copy i is seeded with seed + i
    oa2, ra2 = run(a, seed=4)
    assert oa2.equal(oa) and ra2.equal(ra)


# ---------------------------------------------------------------------------------------------- early finishers


@pytest.mark.parametrize("a_exit", ["terminated", "truncated", "absent"])
@pytest.mark.parametrize("b_exit", ["terminated", "truncated"])
def test_an_agent_that_finishes_early_is_masked_until_the_episode_ends(a_exit, b_exit):
    env = relay(2, a_exit=a_exit, b_exit=b_exit, leaky=True)
    assert env.observation_spec["obs"].shape == (2, 3) and env.observation_spec["state"].shape == (5,)
    assert env.observation_spec["action_mask"].shape == (2, 3)  # a has 2 actions, b 3
    obs = env.reset()
    assert obs["agent_active"].all()
    action = torch.tensor([[1, 2], [0, 1]])
    for t in range(1, 7):
        res = env.step(action)
        a_in = t <= 3  # a acted on this step
        expected_reward = torch.stack([(1.0 + action[:, 0]) * a_in, 10.0 + action[:, 1]], dim=1)
        assert res.reward.equal(expected_reward.float()), t
        if t < 6:
            assert not (res.terminated.any() or res.truncated.any()), t
            active = res.obs["agent_active"]
            assert active[:, 0].tolist() == [t < 3] * 2 and active[:, 1].all(), t
            if t >= 3:
                assert (res.obs["obs"][:, 0] == 0).all(), t
                assert (res.obs["state"][:, :2] == 0).all(), t
            assert res.obs["obs"][:, 1].tolist() == [[t, 2.0, 2.0], [t, 2.0, 1.0]], t
            assert (res.obs["state"][:, 2:] == res.obs["obs"][:, 1]).all(), t
    cut = "truncated" in (a_exit, b_exit)
    assert res.truncated.tolist() == [cut] * 2 and res.terminated.tolist() == [not cut] * 2
    final = res.final_obs
    assert final["agent_active"].tolist() == [[False, True]] * 2
    assert final["obs"][:, 0].eq(0).all() and final["obs"][:, 1].tolist() == [[6, 2.0, 2.0], [6, 2.0, 1.0]]
    assert res.obs["agent_active"].all() and res.obs["obs"][:, 0].tolist() == [[0.0, 1.0, 0.0]] * 2
    # the next episode runs again with both agents
    res = env.step(action)
    assert res.reward[:, 0].tolist() == [2.0, 1.0] and res.obs["agent_active"].all()
    env.close()


def test_team_reward_counts_inactive_agents_as_zero():
    env = relay(1, reward="team")
    env.reset()
    returns = sum(float(env.step(torch.tensor([[1, 2]])).reward[0]) for _ in range(6))
    assert returns == pytest.approx((3 * 2.0 + 6 * 12.0) / 2)  # the mean of the agents' episode returns


def test_copies_end_and_restart_on_their_own():
    env = relay(2, stagger=True)  # copy 0 ends after 6 steps, copy 1 after 7
    env.reset()
    zeros = torch.zeros(2, 2, dtype=torch.long)
    ended = [env.step(zeros).terminated.tolist() for _ in range(8)]
    assert ended[5] == [True, False] and ended[6] == [False, True] and not any(map(any, ended[:5]))
    res = env.step(zeros)  # copy 0 at t = 3 of its second episode, copy 1 at t = 2
    assert res.obs["agent_active"].tolist() == [[False, True], [True, True]]
    assert res.obs["obs"][:, 1, 0].tolist() == [3.0, 2.0]


def test_env_action_masks_are_combined_with_each_agents_own_actions():
    env = relay(1, masks=True)
    assert env.observation_spec["action_mask"].shape == (2, 3)
    obs = env.reset()
    assert obs["action_mask"][0].tolist() == [[True, True, False], [True, True, True]]
    res = env.step(torch.tensor([[1, 1]]))  # t = 1: action 0 is illegal
    assert res.obs["action_mask"][0].tolist() == [[False, True, False], [False, True, True]]
    assert res.obs["obs"][0].tolist() == [[1.0, 1.0, 0.0], [1.0, 2.0, 1.0]]
    res = env.step(torch.tensor([[1, 1]]))
    res = env.step(torch.tensor([[1, 1]]))  # t = 3: a leaves; its row is its own actions again
    assert res.obs["action_mask"][0].tolist() == [[True, True, False], [False, True, True]]
    env.close()


def test_results_of_one_step_outlive_the_next():
    env = relay(1)
    first = env.reset()
    kept = first["obs"].clone()
    res = env.step(torch.tensor([[1, 1]]))
    assert first["obs"].equal(kept) and not res.obs["obs"].equal(kept)
    with pytest.raises(RuntimeError, match="reset"):
        relay(1).step(torch.tensor([[0, 0]]))


# ---------------------------------------------------------------------------------------------- errors


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("name,says", [
    ("pettingzoo:mpe2.no_such_env:parallel_env", "module 'mpe2.no_such_env' does not import"),
    ("pettingzoo:no_such_pkg.envs:parallel_env", "module 'no_such_pkg.envs' does not import"),
    ("pettingzoo:mpe2.simple_spread_v3:no_such_fn", "module 'mpe2.simple_spread_v3' has no attribute 'no_such_fn'"),
    ("pettingzoo:mpe2.simple_spread_v3", "expected 'pettingzoo:<module>:<env_fn>'"),
])
def test_a_name_that_does_not_resolve_is_one_line(name, says):
    with pytest.raises(EntryPointError) as err:
        make_env(name, 2)
    line = _one_line(err)
    assert line.startswith(f"env {name!r}: ") and says in line and "expected 'pettingzoo:<module>:<env_fn>'" in line


@needs_mpe
def test_an_aec_env_is_refused_with_the_parallel_api_named():
    with pytest.raises(EntryPointError) as err:
        make_env("pettingzoo:mpe2.simple_spread_v3:env", 2)
    assert "parallel API" in _one_line(err) and "'pettingzoo:mpe2.simple_spread_v3:parallel_env'" in str(err.value)


def test_missing_packages_are_named_with_their_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpe2", None)
    monkeypatch.setitem(sys.modules, "mpe2.simple_spread_v3", None)
    with pytest.raises(EntryPointError) as err:
        make_env("pettingzoo:mpe2.simple_spread_v3:parallel_env", 2)
    assert _one_line(err) == NOT_INSTALLED["mpe2"] and "'.[mpe]'" in str(err.value)
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    with pytest.raises(EntryPointError) as err:
        make_env("pettingzoo:mpe2.simple_spread_v3:parallel_env", 2)
    assert str(err.value) == ("pettingzoo is not installed: pip install pettingzoo, or pip install -e "
                              "'.[pettingzoo]' in a checkout")


def test_the_old_pettingzoo_mpe_name_points_to_mpe2():
    with pytest.raises(EntryPointError) as err:
        make_env("pettingzoo:pettingzoo.mpe.simple_spread_v3:parallel_env", 2)
    assert "'pettingzoo:mpe2.<env>:parallel_env'" in _one_line(err)


def test_an_agent_that_joins_mid_episode_is_one_line_from_the_env_and_from_train(tmp_path):
    env = make_env(f"pettingzoo:{__name__}:Kinds", 2, seed=0, newcomer=True)
    env.reset()
    env.step(torch.zeros(2, 3, 2))
    with pytest.raises(ValueError) as err:
        env.step(torch.zeros(2, 3, 2))
    says = (f"env 'pettingzoo:{__name__}:Kinds': agent 'guest' appeared, which is not one of possible_agents "
            "(talker, mover, picker); the adapter takes a fixed set of agents, of which some may leave before the "
            "episode ends")
    assert _one_line(err) == says
    # A run ends on the first one, exit 2 (no retries: stepping the env again meets the same agent).
    # The env's module sits in the run's working directory, where the workers import it from.
    import inspect
    import subprocess
    import sys

    from child_env import own_ray_env

    (tmp_path / "kinds_env.py").write_text("from typing import ClassVar\n\nimport numpy as np\nimport pettingzoo\n"
                                           "from gymnasium import spaces\n\n\n" + inspect.getsource(Kinds))
    config = Path(__file__).resolve().parents[2] / "examples" / "cue_match" / "config.yaml"
    run = subprocess.run([sys.executable, "-m", "rl_system", "train", str(config), "--quiet", "--run-dir", "run",
                          *[a for kv in ("env.name=pettingzoo:kinds_env:Kinds", "env.kwargs={newcomer: true}",
                                         "workers.num_workers=1", "workers.num_envs=2", "target_return=null")
                            for a in ("--set", kv)]],
                         cwd=tmp_path, env=own_ray_env(), capture_output=True, text=True, timeout=240)
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("rl-system")]
    assert run.returncode == 2 and lines == [f"rl-system: {says.replace(__name__, 'kinds_env')}"], run.stderr[-2000:]


def test_unsupported_settings_are_one_line():
    with pytest.raises(ValueError, match="reward must be one of"):
        relay(1, reward="sum")
    with pytest.raises(ValueError, match="no state_space"):
        relay(1, state="env")


def test_agents_of_different_kinds_are_one_agent_mixed_batch_each_decoded_to_its_own_space():
    env = make_env(f"pettingzoo:{__name__}:Kinds", 2, seed=0)
    spec = env.action_spec
    assert isinstance(spec, AgentMixed) and spec.shape == (3, 2)
    assert [(a.name, a.obs_width, a.action) for a in spec.agents] == [
        ("talker", 1, AgentDiscrete(3, 1)), ("mover", 2, AgentBox((2,), (-1.0, -1.0), (1.0, 1.0), 1)),
        ("picker", 3, AgentMultiDiscrete((2, 3), 1))]
    env.reset()
    action = torch.tensor([[[2, 0], [0.25, 3.0], [1, 2]],       # word 2 (sent as 3: the space starts at 1)
                           [[0, 0], [-0.5, -0.25], [0, 1]]])  # the move clipped to its bounds
    reward = env.step(action).reward
    torch.testing.assert_close(reward, torch.tensor([[3.0, 1.25, 12.0], [1.0, -0.75, 1.0]]))
    from rl_system.envs.checker import check_env

    assert all(not r.failed for r in check_env(f"pettingzoo:{__name__}:Kinds", num_envs=3, steps=12))
