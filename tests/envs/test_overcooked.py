"""Tests for the batched Overcooked env (``rl_system.envs.overcooked``): step-for-step parity with
overcooked-ai 1.1.0 on every standard layout, bad input, bit-exact resume."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from rl_system.envs import make_env
from rl_system.envs.overcooked import OvercookedVecEnv, layout_names, load_layout
from rl_system.envs.overcooked.env import ONION
from overcooked_oracle import ScriptedCook, action_of, encode, env_states, import_mdp, old_dynamics_mdp


@pytest.fixture(autouse=True)
def _one_thread():
    """Small batches step fastest on one thread (the conftest restores the count afterwards)."""
    torch.set_num_threads(1)


CLASSIC = ["cramped_room", "asymmetric_advantages", "coordination_ring", "forced_coordination",
           "counter_circuit_o_1order"]


def supported_layouts() -> list[str]:
    names = []
    for name in layout_names():
        try:
            load_layout(name)
        except ValueError:
            continue
        names.append(name)
    return names


def run_parity(layout: str, num_envs: int, steps: int, seed: int, horizon: int = 400, obs_every: int = 7,
               old_dynamics: bool = False) -> int:
    """Step ``num_envs`` envs and as many oracle states with the same scripted-then-random joint actions;
    assert equal states and rewards at every step and equal observations every ``obs_every`` steps and at
    every episode end; returns the soups served."""
    om = import_mdp()
    mdp = old_dynamics_mdp(om, layout) if old_dynamics else om.OvercookedGridworld.from_layout_name(layout)
    env = OvercookedVecEnv(num_envs, layout=layout, horizon=horizon, reward_shaping=1.0, old_dynamics=old_dynamics)
    env.reset()
    states = [mdp.get_standard_start_state() for _ in range(num_envs)]
    cook = ScriptedCook(mdp, random.Random(seed))
    served = 0
    for step in range(steps):
        joint = [[cook.act(states[k], i) for i in range(2)] for k in range(num_envs)]
        out = env.step(torch.tensor(joint))
        rewards = torch.cat([out.info["sparse_reward"], out.info["shaped_reward"], out.reward[:, None]], 1).numpy()
        got_states = env_states(env)
        for k in range(num_envs):
            new, infos = mdp.get_state_transition(states[k], tuple(action_of(a) for a in joint[k]))
            sparse, shaped = infos["sparse_reward_by_agent"], infos["shaped_reward_by_agent"]
            where = f"{layout} env {k} step {step} actions {joint[k]}"
            want_rewards = [*sparse, *shaped, sum(sparse) + sum(shaped)]
            if not np.array_equal(rewards[k], want_rewards):  # the fast check; the assert says where and how
                np.testing.assert_array_equal(rewards[k], want_rewards, err_msg=where)
            served += sum(infos["event_infos"]["soup_delivery"])
            done = new.timestep >= horizon
            assert bool(out.truncated[k]) == done, where
            if step % obs_every == 0 or done:
                ref = np.stack(mdp.lossless_state_encoding(new, horizon=horizon)).reshape(2, -1)
                np.testing.assert_array_equal(out.final_obs["obs"][k].numpy(), ref, err_msg=where)
                np.testing.assert_array_equal(out.final_obs["state"][k].numpy(), ref[0], err_msg=where)
            states[k] = mdp.get_standard_start_state() if done else new
            want, got = encode(states[k], env.width, env.height), got_states[k]
            if not all(np.array_equal(got[key], want[key]) for key in want):
                for key in want:
                    np.testing.assert_array_equal(got[key], want[key], err_msg=f"{where}: {key}")
    return served


@pytest.mark.parametrize("layout", CLASSIC)
def test_parity_classic_layouts(layout):
    """The five layouts of the Overcooked-AI benchmark: 500 steps in each of 4 envs (2,000 env steps, the
    400-step horizon reached once), soups served."""
    assert run_parity(layout, num_envs=4, steps=500, seed=1, obs_every=10) > 0


@pytest.mark.parametrize("layout", ["cramped_room", "coordination_ring"])
def test_parity_old_dynamics(layout):
    """``old_dynamics``: pots start by themselves once full, never on an interact; soups served."""
    assert run_parity(layout, num_envs=4, steps=500, seed=1, obs_every=10, old_dynamics=True) > 0


@pytest.mark.slow
@pytest.mark.parametrize("layout", CLASSIC)
def test_parity_old_dynamics_long(layout):
    assert run_parity(layout, num_envs=8, steps=350, seed=3, horizon=300, obs_every=31, old_dynamics=True) > 0


def test_old_dynamics_refuses_orders_of_other_sizes():
    with pytest.raises(ValueError, match="old_dynamics takes layouts whose orders are all of 3 ingredients"):
        OvercookedVecEnv(1, layout=next(n for n in supported_layouts() if "tomato" in n), old_dynamics=True)


def test_parity_every_layout():
    """Every other standard two-player layout (tomatoes, bonus orders, recipe values and times): 100 steps in
    each of 2 envs with a 100-step horizon; soups served in a third of them at least."""
    names = [n for n in supported_layouts() if n not in CLASSIC]
    assert len(names) >= 30
    served = {name: run_parity(name, num_envs=2, steps=100, seed=2, horizon=100, obs_every=10) for name in names}
    assert sum(v > 0 for v in served.values()) >= len(names) // 3, served


@pytest.mark.slow
@pytest.mark.parametrize("layout", supported_layouts())
def test_parity_long(layout):
    """350 steps in each of 8 envs per layout with a 300-step horizon: 2,800 env steps, every env
    through an episode's end and on into the next, soups served (one in ``long_cook_time``, whose
    soups cook 100 ticks). The env steps all 8 in one call, so
    8 envs cost about half what 4 envs for twice the steps do, for as many env steps and the same
    events; the reference's Python step is the cost (about 1 ms an env step)."""
    assert run_parity(layout, num_envs=8, steps=350, seed=3, horizon=300, obs_every=31) > 0


def test_dish_reward_reads_the_pots_before_either_cook_acts():
    """Cook 1 puts an onion in the empty pot while cook 2 takes a dish: overcooked-ai counts the pots before
    cook 1 acts (none needs a dish), so the dish earns no shaped reward."""
    om = import_mdp()
    mdp = om.OvercookedGridworld.from_layout_name("cramped_room")
    player, obj = om.PlayerState, om.ObjectState
    state = om.OvercookedState([player((2, 1), (0, -1), obj("onion", (2, 1))), player((1, 2), (0, 1))], {},
                               all_orders=mdp.start_all_orders)
    _, infos = mdp.get_state_transition(state, ("interact", "interact"))
    env = OvercookedVecEnv(1, layout="cramped_room", reward_shaping=1.0)
    env.reset()
    env._pos[0] = torch.tensor([env.layout.cell(2, 1), env.layout.cell(1, 2)])
    env._ori[0] = torch.tensor([0, 1])  # north to the pot, south to the dish dispenser
    env._held[0, 0] = ONION
    out = env.step(torch.tensor([[5, 5]]))
    assert out.info["shaped_reward"][0].tolist() == infos["shaped_reward_by_agent"] == [3, 0]


def test_unsupported_layouts_are_refused_in_one_line():
    for name in ("cramped_room_single", "multiplayer_schelling", "tutorial_1"):
        with pytest.raises(ValueError) as err:
            load_layout(name)
        assert "\n" not in str(err.value) and name in str(err.value)


def test_shipped_layouts_are_overcooked_ais_and_suffice(monkeypatch):
    """The package's copies equal the installed overcooked-ai's files, and are used where it is missing."""
    from rl_system.envs.overcooked import layout as layout_mod

    installed = layout_mod.installed_dir()
    if installed is not None:
        for path in sorted(installed.glob("*.layout")):
            assert (layout_mod.SHIPPED_DIR / path.name).read_text() == path.read_text(), path.name
    monkeypatch.setattr(layout_mod, "installed_dir", lambda: None)
    assert {"cramped_room", "forced_coordination", "counter_circuit_o_1order"} <= set(layout_names())
    env = OvercookedVecEnv(2, layout="forced_coordination")
    assert env.reset()["obs"].shape == (2, 2, 5 * 5 * 26)


def test_make_env_and_specs():
    env = make_env("Overcooked", 3, layout="coordination_ring")
    obs = env.reset()
    assert obs["obs"].shape == (3, 2, 5 * 5 * 26) and obs["state"].shape == (3, 5 * 5 * 26)
    assert env.action_spec.n == 6 and env.action_spec.num_agents == 2
    out = env.step(torch.full((3, 2), 4))
    assert out.reward.shape == (3,) and out.truncated.shape == (3,) and not out.truncated.any()


def test_unknown_layout_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown Overcooked layout 'nope'; known: .*cramped_room") as err:
        OvercookedVecEnv(1, layout="nope")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("grid, match", [
    (["XXXXX", "X1 2S", "XODXX"], "no pot"),
    (["XXPXX", "X1 2X", "XODXX"], "serving"),
    (["XXPXX", "X1 2S", "XXXXX"], "dish"),
    (["XXPXX", "X1 2S", "XDXX"], "rectangle"),
    (["XXPXX", "X1  S", "XODXX"], "player 2"),
    (["XXPXX", "X1Q2S", "XODXX"], "unknown grid characters"),
    (["XXPXX", " 1 2S", "XODXX"], "border"),
    (["XXXXXXX", "X1X2XPX", "XOXDXSX", "XXXXXXX"], "no pot can be reached"),
])
def test_malformed_grids_are_refused_in_one_line(grid, match):
    with pytest.raises(ValueError, match=match) as err:
        OvercookedVecEnv(1, layout=grid)
    assert "\n" not in str(err.value)


def test_bad_actions_are_refused_in_one_line():
    env = OvercookedVecEnv(2)
    env.reset()
    for bad in (torch.zeros(2, dtype=torch.int64), torch.zeros((2, 3), dtype=torch.int64),
                torch.zeros((3, 2), dtype=torch.int64), torch.full((2, 2), 6)):
        with pytest.raises(ValueError) as err:
            env.step(bad)
        assert "\n" not in str(err.value)


def test_state_dict_resumes_bit_exactly():
    """Stop mid-episode, resume in a fresh env: the same observations, rewards and resets follow."""
    torch.manual_seed(0)
    actions = torch.randint(0, 6, (700, 16, 2))
    actions[:, :, 1] = torch.where(torch.rand(700, 16) < 0.5, 5, actions[:, :, 1])
    env = OvercookedVecEnv(16, layout="cramped_room", reward_shaping=1.0, reward_shaping_horizon=1e5)
    env.reset()
    for a in actions[:250]:
        env.step(a)
    saved = env.state_dict()
    first = [env.step(a) for a in actions[250:]]
    resumed = OvercookedVecEnv(16, layout="cramped_room", reward_shaping=1.0, reward_shaping_horizon=1e5)
    resumed.load_state_dict(saved)
    for a, ref in zip(actions[250:], first):
        out = resumed.step(a)
        assert torch.equal(out.obs["obs"], ref.obs["obs"]) and torch.equal(out.reward, ref.reward)
        assert torch.equal(out.truncated, ref.truncated)
    with pytest.raises(ValueError, match="must have shape"):
        OvercookedVecEnv(8, layout="cramped_room").load_state_dict(saved)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    """The same kitchens on the GPU step exactly as on the CPU (where parity with overcooked-ai is tested)."""
    gen = torch.Generator().manual_seed(0)
    for layout in CLASSIC:
        envs = [OvercookedVecEnv(64, device=d, layout=layout, reward_shaping=1.0) for d in ("cpu", "cuda")]
        for env in envs:
            env.reset()
        for _ in range(900):
            a = torch.where(torch.rand((64, 2), generator=gen) < 0.5, 5, torch.randint(0, 5, (64, 2), generator=gen))
            ref, out = (env.step(a) for env in envs)
            assert torch.equal(out.obs["obs"].cpu(), ref.obs["obs"]) and torch.equal(out.reward.cpu(), ref.reward)
            assert torch.equal(out.truncated.cpu(), ref.truncated)
        for key, value in envs[0].state_dict().items():
            if key != "generator":
                assert torch.equal(envs[1].state_dict()[key].cpu(), value), key


def test_per_cook_rewards_sum_to_the_team_reward():
    gen = torch.Generator().manual_seed(1)
    envs = [OvercookedVecEnv(32, layout="cramped_room", reward_shaping=0.5, team_reward=t) for t in (True, False)]
    for env in envs:
        env.reset()
    nonzero = 0
    for _ in range(300):
        a = torch.where(torch.rand((32, 2), generator=gen) < 0.5, 5, torch.randint(0, 5, (32, 2), generator=gen))
        team, own = (env.step(a).reward for env in envs)
        assert own.shape == (32, 2) and torch.equal(own.sum(1), team)
        nonzero += int((own != 0).sum())
    assert nonzero > 0


def test_shaping_anneals_to_zero():
    env = OvercookedVecEnv(4, reward_shaping=1.0, reward_shaping_horizon=40)
    env.reset()
    assert env.shaping_weight == 1.0
    for _ in range(5):
        env.step(torch.full((4, 2), 4))
    assert env.shaping_weight == 0.5
    for _ in range(10):
        env.step(torch.full((4, 2), 4))
    assert env.shaping_weight == 0.0


def test_random_play_cooks_only_paid_soups_under_old_dynamics(tmp_path):
    """overcooked-ai 1.1.0's rules let a random interact start a pot of one or two onions, a soup no order
    pays for; under ``old_dynamics`` a pot starts only once full, so every soup served is paid
    (``bench/bench_overcooked_random.py``, whose table this also writes)."""
    from bench.bench_overcooked_random import main, random_episodes

    new, old = (random_episodes("cramped_room", od, envs=256) for od in (False, True))
    assert new["soups_served"] > 5 * new["soups_paid"]
    assert old["soups_served"] == old["soups_paid"] > 0 and old["episodes_with_reward"] > new["episodes_with_reward"]
    main(["--layouts", "cramped_room", "--envs", "8", "--out", str(tmp_path)])
    assert "| cramped_room | old_dynamics | 8 |" in (tmp_path / "random_play.md").read_text()
