"""distrl.load_policy: a saved run's policy acting in the user's own code, as `distrl eval`
acts (greedy, observation filter applied), for single observations and batches, with
an LSTM's state passed in and out, and a game's action mask."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import distrl
from distrl import (
    AlphaZeroConfig,
    ApexConfig,
    LeagueConfig,
    LeagueRules,
    ModelConfig,
    PPOConfig,
    RunConfig,
    train_alphazero,
    train_apex,
    train_league,
    train_ppo,
)
from distrl.core.checkpoint import Checkpoint
from distrl.core.evaluation import load_policy as load_net
from distrl.core.evaluation import run_episodes
from distrl.models.actor_critic import OBS_CLIP, ActorCritic

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

GAME = "pettingzoo:tictactoe_v3"
SPIEL = "openspiel:tic_tac_toe"  # AlphaZero searches OpenSpiel states
PPO = dict(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=128,
           minibatch_size=64, num_epochs=1)
LSTM = ModelConfig(hiddens=(16,), use_lstm=True, lstm_cell_size=8, lstm_use_prev_action=True,
                   lstm_use_prev_reward=True, max_seq_len=4)


def _run(tmp, name, env, steps):
    return RunConfig(env=env, max_env_steps=steps, logdir=str(tmp / name), progress=False)


def train_tiny(tmp, names):
    """Tiny runs (in process, a few hundred steps) of the named kinds: name -> logdir."""
    torch.set_num_threads(1)
    small = ModelConfig(hiddens=(16,))
    filtered = ModelConfig(hiddens=(16,), observation_filter="MeanStdFilter")
    train = {
        "ppo": lambda: train_ppo(PPOConfig(**PPO, model=small),
                                 _run(tmp, "ppo", "CartPole-v1", 256)),
        "pendulum": lambda: train_ppo(PPOConfig(**PPO, model=filtered),
                                      _run(tmp, "pendulum", "Pendulum-v1", 256)),
        "lstm": lambda: train_ppo(PPOConfig(**PPO, model=LSTM),
                                  _run(tmp, "lstm", "CartPole-v1", 256)),
        "apex": lambda: train_apex(
            ApexConfig(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=25,
                       learning_starts=100, capacity=1_000, train_batch_size=32,
                       min_time_s_per_reporting=0.0, min_sample_timesteps_per_reporting=100,
                       model=small), _run(tmp, "apex", "CartPole-v1", 200)),
        "league": lambda: train_league(
            LeagueConfig(rules=LeagueRules(snapshot_steps=32), train_batch_size=32,
                         minibatch_size=32, num_epochs=1, num_envs=2, league_eval_interval=1,
                         league_eval_games=2, model=small), _run(tmp, "league", GAME, 64)),
        "alphazero": lambda: train_alphazero(
            AlphaZeroConfig(num_games=2, num_simulations=4, moves_per_iteration=16,
                            learning_starts=16, train_batch_size=16, eval_interval=0,
                            model=small), _run(tmp, "alphazero", SPIEL, 32)),
    }
    for name in names:
        train[name]()
    return {name: tmp / name for name in names}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("runs"),
                      ("ppo", "pendulum", "lstm", "apex", "league", "alphazero"))


def _observations(env_id, n=64, seed=0):
    """Observations an env really shows (random actions)."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = []
    for _ in range(n):
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(out)


def _episode_return(policy, env_id, seed):
    """One greedy episode played through load_policy, as a user's loop plays it."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    state, reward, total, done = None, None, 0.0, False
    while not done:
        if policy.recurrent:
            action, state = policy.act(obs, state, reward=reward)
        else:
            action = policy.act(obs)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    return total


@pytest.mark.parametrize(("name", "env_id"), [("ppo", "CartPole-v1"), ("lstm", "CartPole-v1"),
                                              ("apex", "CartPole-v1"),
                                              ("pendulum", "Pendulum-v1")])
def test_an_episode_played_with_load_policy_scores_as_distrl_eval(runs, name, env_id):
    policy = distrl.load_policy(runs[name])
    for seed in (0, 1):
        expected = run_episodes(runs[name], episodes=1, seed=seed).returns[0]
        assert _episode_return(policy, env_id, seed) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(("name", "env_id"), [("ppo", "CartPole-v1"), ("apex", "CartPole-v1"),
                                              ("pendulum", "Pendulum-v1")])
def test_a_batch_acts_as_its_observations_one_at_a_time(runs, name, env_id):
    policy = distrl.load_policy(runs[name])
    obs = _observations(env_id)
    batch = policy.act(obs)
    assert batch.shape == (len(obs), *policy.action_space.shape)
    singles = np.stack([policy.act(o) for o in obs])
    assert singles.shape == batch.shape
    np.testing.assert_allclose(singles, batch, rtol=1e-5, atol=1e-6)  # equal when Discrete
    assert np.shape(policy.act(obs[0])) == policy.action_space.shape  # one in, one out


def test_greedy_actions_are_the_networks_argmax_and_clipped_mean(runs):
    obs = _observations("CartPole-v1")
    net = load_net(Checkpoint(runs["ppo"]))
    expected = net(torch.as_tensor(obs))[0].argmax(-1).numpy()
    assert np.array_equal(distrl.load_policy(runs["ppo"]).act(obs), expected)
    q = load_net(Checkpoint(runs["apex"]))
    assert np.array_equal(distrl.load_policy(runs["apex"]).act(obs),
                          q(torch.as_tensor(obs)).argmax(-1).numpy())
    # Pendulum: the run's observation filter applies, then the mean is clipped to [-2, 2].
    obs = _observations("Pendulum-v1") * 3
    filtered = load_net(Checkpoint(runs["pendulum"]))
    assert float(filtered.obs_count) > 0
    plain = ActorCritic(filtered_space(), gym.spaces.Box(-2, 2, (1,)), ModelConfig(hiddens=(16,)))
    plain.load_state_dict({k: v for k, v in filtered.state_dict().items()
                           if not k.startswith("obs_")})
    x = torch.as_tensor(obs)
    normalized = ((x - filtered.obs_mean) / torch.sqrt(filtered.obs_var + 1e-8)).clamp(
        -OBS_CLIP, OBS_CLIP)
    mean = plain(normalized)[0][:, :1].clamp(-2, 2).detach().numpy()
    np.testing.assert_allclose(distrl.load_policy(runs["pendulum"]).act(obs), mean, rtol=1e-5,
                               atol=1e-6)


def filtered_space():
    return gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)


def test_the_recurrent_state_goes_out_and_back_in_as_a_step_by_step_rollout(runs):
    policy = distrl.load_policy(runs["lstm"])
    net = load_net(Checkpoint(runs["lstm"]))
    obs = _observations("CartPole-v1", n=12)
    rewards = np.linspace(0.0, 1.0, len(obs)).astype(np.float32)
    h, c = net.initial_state(1)
    prev_a, prev_r = torch.zeros(1, dtype=torch.long), torch.zeros(1)
    state, memories = None, []
    for t, o in enumerate(obs):
        dist_inputs, _, (h, c) = net.step(torch.as_tensor(o[None]), (h, c), prev_a, prev_r)
        expected = int(dist_inputs.argmax(-1))
        action, state = policy.act(o, state, reward=None if t == 0 else rewards[t - 1])
        assert action == expected
        np.testing.assert_allclose(state.memory[0], torch.stack([h[0], c[0]]).numpy(),
                                   rtol=1e-6, atol=1e-6)
        memories.append(state.memory.copy())
        prev_a, prev_r = torch.tensor([expected]), torch.tensor(rewards[t:t + 1])
    assert not np.allclose(memories[0], memories[-1])  # the memory changes as it acts
    # Two envs in one batch, the second reset midway: its rows start from zero again.
    _, state2 = policy.act(obs[:2])
    _, fresh = policy.act(obs[2:3])
    _, state2 = policy.act(obs[2:4], state2, reward=[1.0, 1.0], episode_start=[False, True])
    np.testing.assert_allclose(state2.memory[1], policy.act(obs[3])[1].memory[0], atol=1e-6)
    assert not np.allclose(state2.memory[0], fresh.memory[0])
    with pytest.raises(ValueError, match="lstm_use_prev_reward: pass the previous step's"):
        policy.act(obs[0], state)


def test_a_game_policy_takes_the_action_mask(runs):
    from distrl.games.games import make_multiagent_env

    for name in ("league", "alphazero"):
        policy = distrl.load_policy(runs[name])
        assert policy.policy_id == "main_0"
        net = load_net(Checkpoint(runs[name]))
        rng = np.random.default_rng(0)
        obs = np.stack([policy.observation_space.sample() for _ in range(200)])
        masks = rng.random((200, 9)) < 0.3
        masks[np.arange(200), rng.integers(0, 9, 200)] = True
        actions = policy.act(obs, action_mask=masks)
        assert masks[np.arange(200), actions].all()
        logits = net(torch.as_tensor(obs))[0].masked_fill(~torch.as_tensor(masks), -1e9)
        assert np.array_equal(actions, logits.argmax(-1).numpy())
        only = np.zeros(9, bool)
        only[4] = True
        assert policy.act(obs[0], action_mask=only) == 4
        # The env's own observation dict brings its mask.
        env = make_multiagent_env(Checkpoint(runs[name]).run_config()["env"], {})
        seen, _ = env.reset(seed=0)
        ob = next(iter(seen.values()))
        legal = np.flatnonzero(ob["action_mask"])
        assert policy.act(ob) in legal
        assert policy.act([ob, ob]).tolist() == [policy.act(ob)] * 2


def test_any_saved_policy_of_a_league_and_errors_that_name_the_fix(runs):
    ids = Checkpoint(runs["league"]).policy_ids
    other = next(pid for pid in ids if pid != "main_0")
    weights = Checkpoint(runs["league"]).learner_state()["weights"][other]
    policy = distrl.load_policy(runs["league"], policy=other)
    assert policy.policy_id == other
    assert all(torch.equal(v, weights[k]) for k, v in policy.model.state_dict().items())
    with pytest.raises(ValueError, match=r"no policy 'nobody' in this run; it has \['league_"):
        distrl.load_policy(runs["league"], policy="nobody")
    with pytest.raises(ValueError, match=r"policy ids .* name the policies of game runs"):
        distrl.load_policy(runs["ppo"], policy="main_0")
    ppo = distrl.load_policy(runs["ppo"])
    with pytest.raises(ValueError, match=r"shape \(3,\).*pass one of shape \(4,\)"):
        ppo.act(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="feed-forward: it has no state"):
        ppo.act(np.zeros(4, np.float32), state=object())
    with pytest.raises(ValueError, match="no stochastic policy"):
        distrl.load_policy(runs["apex"]).act(np.zeros(4, np.float32), deterministic=False)
    with pytest.raises(ValueError, match="action masks restrict Discrete actions"):
        distrl.load_policy(runs["pendulum"]).act(np.zeros(3, np.float32), action_mask=[1])


def test_a_leagues_average_policy_acts_as_its_table(tmp_path):
    from distrl.export import export_policy
    from distrl.games.tabular import load_table

    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=4,
                          league_eval_interval=1, league_eval_games=2,
                          league_eval_average_window=2, model=ModelConfig(hiddens=(16,)))
    train_league(config, _run(tmp_path, "kuhn", "openspiel:kuhn_poker", 200))
    table = load_table(Checkpoint(tmp_path / "kuhn"))
    policy = distrl.load_policy(tmp_path / "kuhn", policy="average")
    assert policy.policy_id == "average" and not policy.recurrent
    legal = table.probs > 0
    actions = policy.act(table.observations, action_mask=legal)
    assert np.array_equal(actions, table.probs.argmax(-1))
    assert [policy.act(o) for o in table.observations] == list(table.probs.argmax(-1))
    with pytest.raises(ValueError, match="'average' is a table over the game's information"):
        export_policy(tmp_path / "kuhn", "torchscript", tmp_path / "x.pt", policy="average")
