"""AlphaZero: PUCT search (values backed up with the right sign, wins taken and losses
blocked), the twin observation the network sees, the replay, mirroring, the
checks a run makes before it starts."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

import pyspiel

from distrl.alphazero.config import AlphaZeroConfig
from distrl.alphazero.self_play import (
    Replay,
    SelfPlay,
    check_turn_visible,
    mirrored,
    search_game,
)
from distrl.alphazero.train import train_alphazero
from distrl.core.config import RunConfig
from distrl.games.games import make_multiagent_env, split_obs
from distrl.games.search import Trees


def uniform(value: float = 0.0):
    """A network with no opinion: equal logits, the same value for every position."""
    def evaluate(states):
        n = states[0].get_game().num_distinct_actions()
        return np.zeros((len(states), n)), np.full(len(states), value)
    return evaluate


def connect_four(moves):
    state = pyspiel.load_game("connect_four").new_initial_state()
    for m in moves:
        state.apply_action(m)
    return state


def test_a_leaf_value_counts_for_its_mover_and_against_the_parent():
    """One simulation from the first position: the new leaf is the second player's turn,
    valued 0.3 for that player, so the root's edge gains -0.3 for the first player."""
    trees = Trees([connect_four([])])
    trees.expand_roots(uniform(0.3))
    trees.search(uniform(0.3), 1, 1.5)
    root = trees.edges(0)
    (action,) = np.flatnonzero(root.visits)
    assert sum(root.visits) == 1
    assert root.value_sum[action] == pytest.approx(-0.3)
    child = trees.edges(0, (int(action),))
    assert child.expanded and sum(child.visits) == 0


@pytest.mark.parametrize(("moves", "best"), [([0, 6, 1, 6, 2, 5], 3), ([0, 3, 6, 3, 6, 3], 3)],
                         ids=["win", "block"])
def test_search_takes_the_win_and_blocks_the_loss(moves, best):
    """Connect four, first player to move. After 0 6 1 6 2 5 column 3 completes its
    row; after 0 3 6 3 6 3 the second player threatens column 3, which only playing
    column 3 stops. An opinion-free network: only the search's terminal states tell."""
    trees = Trees([connect_four(moves)])
    trees.expand_roots(uniform())
    trees.search(uniform(), 200, 1.5)
    assert int(np.argmax(trees.edges(0).visits)) == best
    assert trees.policy(0)[best] > 0.5


def test_a_root_value_is_the_mean_of_what_its_edges_backed_up():
    """Tic-tac-toe, every leaf valued 0.5 for its mover: the first 9 simulations visit
    each of the 9 replies once (unvisited edges score highest), each a leaf of the
    second player's, so the first player's searched value is -0.5."""
    trees = Trees([pyspiel.load_game("tic_tac_toe").new_initial_state()])
    assert trees.value(0) == 0.0  # nothing searched yet
    trees.expand_roots(uniform(0.5))
    trees.search(uniform(0.5), 9, 1.5)
    assert trees.edges(0).visits == [1] * 9
    assert trees.value(0) == pytest.approx(-0.5)


def test_value_targets_mix_the_outcome_with_the_searched_value():
    """The same games (same seed and network) under three mixes: 0 gives the outcomes,
    1 the roots' searched values, 0.5 their mean."""
    game = pyspiel.load_game("tic_tac_toe")

    def targets(mix):
        cfg = AlphaZeroConfig(num_games=4, num_simulations=12, value_target_mix=mix)
        games = SelfPlay(game, lambda states: np.zeros((len(states), 1)), cfg,
                         np.random.default_rng(0))
        ended = []
        while len(ended) < 4:
            ended += games.move(uniform(0.2))
        return np.concatenate([target for _, _, target, _ in ended[:4]])

    outcome, searched, half = targets(0.0), targets(1.0), targets(0.5)
    assert set(outcome.tolist()) <= {-1.0, 0.0, 1.0}
    assert not np.isin(searched, [-1.0, 0.0, 1.0]).all()
    np.testing.assert_allclose(half, (outcome + searched) / 2, atol=1e-6)


def test_each_positions_outcome_is_the_return_of_its_player_to_move():
    """With value_target_mix 0 a position's target is the game's return for the player
    who moved there: tic-tac-toe from the empty board, player 0 at the even plies."""
    cfg = AlphaZeroConfig(num_games=8, num_simulations=4)
    games = SelfPlay(pyspiel.load_game("tic_tac_toe"), lambda states: np.zeros((len(states), 1)),
                     cfg, np.random.default_rng(0))
    ended = []
    while len(ended) < 8:
        ended += games.move(uniform())
    for _, _, target, returns in ended:
        np.testing.assert_array_equal(target, [returns[ply % 2] for ply in range(len(target))])
    assert any(returns[0] != 0 for *_, returns in ended)  # a draw tells no player apart


class CountingDraws:
    """A generator that counts the moves drawn from visit counts (choice with p=)."""

    def __init__(self, seed: int):
        self.rng, self.draws = np.random.default_rng(seed), 0

    def choice(self, *args, **kwargs):
        self.draws += "p" in kwargs
        return self.rng.choice(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.rng, name)


@pytest.mark.parametrize("temperature_moves", [0, 2, 5])
def test_exactly_the_first_temperature_moves_are_drawn_from_the_visits(temperature_moves):
    """A game's moves 0 .. temperature_moves - 1 are drawn from the visit counts; the
    rest take the most visited move (tic-tac-toe lasts at least 5 moves)."""
    rng = CountingDraws(0)
    cfg = AlphaZeroConfig(num_games=1, num_simulations=4, temperature_moves=temperature_moves)
    games = SelfPlay(pyspiel.load_game("tic_tac_toe"), lambda states: np.zeros((len(states), 1)),
                     cfg, rng)
    while not games.move(uniform()):
        pass
    assert rng.draws == temperature_moves


def test_roots_search_side_by_side_in_one_batch_per_simulation():
    calls = []

    def counting(states):
        calls.append(len(states))
        return uniform()(states)

    trees = Trees([connect_four(m) for m in ([], [3], [3, 3])])
    trees.expand_roots(counting)
    trees.search(counting, 5, 1.5)
    assert calls == [3] + [3] * 5
    assert [sum(trees.edges(g).visits) for g in range(3)] == [5, 5, 5]


def test_noise_moves_prior_mass_only_among_legal_moves():
    trees = Trees([connect_four([0, 0, 0, 0, 0, 0])])  # column 0 full
    trees.expand_roots(uniform())
    trees.add_noise(0.3, 0.5, np.random.default_rng(0))
    prior = trees.edges(0).prior
    assert prior[0] == 0 and sum(prior) == pytest.approx(1)
    assert not np.allclose(prior[1:], 1 / 6)


def test_the_network_sees_pettingzoos_observation_of_every_searched_position():
    """observe_states of the twin's state equals what PettingZoo shows the player to move,
    along random games (rows top first, own pieces in plane 0)."""
    env = make_multiagent_env("pettingzoo:connect_four_v3")
    rng = np.random.default_rng(0)
    for episode in range(5):
        obs, _ = env.reset(seed=episode)
        while obs:
            (agent, o), = obs.items()
            seen, mask = split_obs(o)
            np.testing.assert_array_equal(env.observe_states([env.openspiel_state()])[0], seen)
            obs, *_ = env.step({agent: int(rng.choice(np.flatnonzero(mask)))})
    env.close()


def test_mirroring_a_position_is_the_position_of_the_mirrored_moves():
    env = make_multiagent_env("pettingzoo:connect_four_v3")
    moves = [3, 0, 1, 6, 6, 2]
    obs = env.observe_states([connect_four(moves)])
    policy = np.arange(7, dtype=np.float32)[None]
    flipped, flipped_policy = mirrored(obs, policy)
    np.testing.assert_array_equal(flipped[0],
                                  env.observe_states([connect_four([6 - m for m in moves])])[0])
    assert flipped_policy[0].tolist() == [6, 5, 4, 3, 2, 1, 0]


def test_replay_keeps_the_newest_positions_and_round_trips():
    replay = Replay(3, (2,), 2)
    for i in range(5):
        replay.add(np.full((1, 2), i), np.array([[i, 0]]), np.array([i]))
    assert replay.size == 3 and sorted(replay.outcome.tolist()) == [2, 3, 4]
    copy = Replay(3, (2,), 2)
    copy.set_state(replay.get_state())
    np.testing.assert_array_equal(copy.obs, replay.obs)
    assert copy.next == replay.next == 2
    rng = np.random.default_rng(0)
    obs, policy, outcome = copy.sample(50, rng)
    assert set(outcome.tolist()) == {2, 3, 4}
    assert torch.equal(obs[:, 0], outcome) and torch.equal(policy[:, 0], outcome)


def test_a_resized_replay_keeps_the_newest_positions():
    full = Replay(4, (1,), 1)  # a full ring: 2, 3, 4, 5 with its oldest (2) at index 2
    full.add(*(np.arange(6, dtype=np.float32).reshape(-1, 1),) * 2, np.arange(6))
    for capacity, kept in ((3, [3, 4, 5]), (4, [4, 5, 2, 3]), (8, [2, 3, 4, 5])):
        resized = Replay(capacity, (1,), 1)
        resized.set_state(full.get_state())
        assert resized.outcome[:resized.size].tolist() == kept
        resized.add(np.array([[6.0]]), np.array([[6.0]]), np.array([6.0]))
        held = resized.outcome[:resized.size].tolist()
        # The newest overwrote the oldest (or filled a free row); no unwritten row is held.
        assert sorted(held) == list(range(7 - min(capacity, 5), 7))
        assert sorted(resized.obs[:resized.size, 0].tolist()) == sorted(held)
    filling = Replay(4, (1,), 1)  # not full: 0, 1
    filling.add(np.zeros((2, 1)), np.zeros((2, 1)), np.arange(2))
    smaller = Replay(1, (1,), 1)
    smaller.set_state(filling.get_state())
    assert smaller.outcome.tolist() == [1] and (smaller.size, smaller.next) == (1, 0)


def _naive_means(replay, obs):
    """The mean policy and outcome over the ring's held rows equal to each of ``obs``."""
    held = replay.obs[:replay.size].astype(np.float32)
    same = (held[None] == obs.numpy()[:, None]).all(-1)  # [n, size]
    policy = same @ replay.policy[:replay.size] / same.sum(1, keepdims=True)
    return policy, same @ replay.outcome[:replay.size] / same.sum(1)


def _averaged_rows(rng, keys):
    """Rows of three-action positions keyed by ``keys``, random targets of magnitudes
    1e-12 to 1 (running sums of them round, so the sums summed again differ)."""
    obs = np.stack([np.full(2, k, np.int8) for k in keys])
    outcome = rng.uniform(-1, 1, len(keys)) * 10.0 ** rng.uniform(-12, 0, len(keys))
    return obs, rng.dirichlet(np.ones(3), len(keys)).astype(np.float32), \
        outcome.astype(np.float32)


def test_an_averaged_replay_learns_each_position_towards_the_mean_of_its_rows():
    rng, replay = np.random.default_rng(0), Replay(10, (2,), 3, np.int8, average=True)
    # Position 5 enters once and leaves the ring entirely; when played again its mean
    # is its new row's alone (a stale sum would still count the old one).
    phases = [[5], rng.integers(3, size=10), [7, 5], rng.integers(3, size=37)]
    for i, keys in enumerate(phases):
        for key in keys:
            replay.add(*_averaged_rows(rng, [key]))
            obs, policy, outcome = replay.sample(32, rng)
            want_policy, want_outcome = _naive_means(replay, obs)
            np.testing.assert_allclose(policy.numpy(), want_policy, atol=1e-6)
            np.testing.assert_allclose(outcome.numpy(), want_outcome, atol=1e-6)
        if i == 2:  # the returned position's mean is its one new row
            five = replay.obs[:, 0] == 5
            assert five.sum() == 1
            np.testing.assert_array_equal(replay.means.of(np.flatnonzero(five))[1],
                                          replay.outcome[five])
    # Averaging changed the targets: a duplicated position's rows differ from their mean.
    raw = Replay(10, (2,), 3, np.int8)
    raw.set_state(replay.get_state())
    assert not np.allclose(raw.sample(32, np.random.default_rng(1))[2],
                           replay.sample(32, np.random.default_rng(1))[2])


def test_an_averaged_replay_resumes_to_the_same_targets():
    rng, replay = np.random.default_rng(0), Replay(8, (2,), 3, np.int8, average=True)
    replay.add(*_averaged_rows(rng, rng.integers(3, size=30)))  # a full ring, sums moved
    same, resized = (Replay(c, (2,), 3, np.int8, average=True) for c in (8, 5))
    for copy in (same, resized):
        copy.set_state(replay.get_state())
    more = _averaged_rows(rng, rng.integers(3, size=5))
    for r in (replay, same, resized):
        r.add(*more)
    # The same capacity restores the running sums: every draw after it is identical.
    for a, b in zip(replay.sample(64, np.random.default_rng(2)),
                    same.sample(64, np.random.default_rng(2)), strict=True):
        assert torch.equal(a, b)
    # Sums that rounded are restored as they were: in float64, 1 + 1e-12 - 1 != 1e-12.
    ring = Replay(2, (2,), 3, np.int8, average=True)
    for key, z in ((0, 1.0), (0, 1e-12), (1, 0.5)):  # the third evicts the first
        ring.add(np.full((1, 2), key), np.full((1, 3), 1 / 3), np.array([z], np.float32))
    copy = Replay(2, (2,), 3, np.int8, average=True)
    copy.set_state(ring.get_state())
    kept = ring.means.of(np.array([1]))[1]
    assert copy.means.of(np.array([1]))[1] == kept != np.float32(1e-12)
    obs, policy, outcome = resized.sample(64, np.random.default_rng(2))
    want_policy, want_outcome = _naive_means(resized, obs)  # summed again from its rows
    np.testing.assert_allclose(policy.numpy(), want_policy, atol=1e-6)
    np.testing.assert_allclose(outcome.numpy(), want_outcome, atol=1e-6)


def test_search_refuses_games_it_cannot_search():
    with pytest.raises(ValueError, match="perfect information without chance"):
        search_game(make_multiagent_env("openspiel:kuhn_poker"))
    with pytest.raises(ValueError, match="has none: use --env openspiel"):
        search_game(make_multiagent_env("tests.fakes:WeightedRockPaperScissors"))


@pytest.mark.parametrize(("fields", "message"), [
    ({"num_simulations": 0}, "num_simulations"),
    ({"dirichlet_fraction": 1.5}, "dirichlet_fraction"),
    ({"value_target_mix": -0.1}, r"`value_target_mix` \(-0.1\) must lie in \[0, 1\]"),
    ({"learning_starts": 10, "replay_capacity": 5}, "no step would ever be taken"),
    ({"train_batch_size": 64, "replay_capacity": 32, "learning_starts": 0},
     r"`train_batch_size` \(64\) exceeds `replay_capacity` \(32\)"),
    ({"lr_schedule": ((0, 1e-3), (100, 0.0))}, r"`lr_schedule` value 0.0 at timestep 100"),
    ({"lr_schedule": ((100, 1e-3), (0, 1e-4))}, "strictly increasing"),
])
def test_config_errors_say_what_to_change(fields, message):
    with pytest.raises(ValueError, match=message):
        AlphaZeroConfig(**fields)


def test_mirror_is_refused_where_the_board_has_no_column_moves(tmp_path):
    with pytest.raises(ValueError, match="leave mirror off"):
        train_alphazero(AlphaZeroConfig(mirror=True),
                        RunConfig(env="pettingzoo:tictactoe_v3", max_env_steps=1,
                                  logdir=str(tmp_path), progress=False))


SMALL = AlphaZeroConfig(num_games=8, num_simulations=4, moves_per_iteration=32,
                        learning_starts=64, train_batch_size=32, eval_interval=2,
                        eval_games=4, mirror=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is there: test_gpu.py runs it")
def test_the_learner_goes_to_the_run_device(tmp_path):
    with pytest.raises(ValueError, match="torch sees no CUDA device"):
        train_alphazero(SMALL, RunConfig(env="pettingzoo:connect_four_v3", device="cuda",
                                         max_env_steps=32, logdir=str(tmp_path), progress=False))


@pytest.mark.parametrize(("fraction", "temperature_moves", "alike"),
                         [(0.0, 0, True), (0.25, 0, False), (0.0, 1, False)],
                         ids=["neither", "noise", "temperature"])
def test_noise_and_temperature_vary_the_openings(fraction, temperature_moves, alike):
    """Tic-tac-toe, 32 games, an opinion-free network. One simulation without noise
    visits the first legal move; with noise the noisy priors pick. Nine simulations visit
    every move once: the most visited is the first, a sample from the visits is any."""
    cfg = AlphaZeroConfig(num_games=32, num_simulations=1 if fraction else 9,
                          dirichlet_fraction=fraction, temperature_moves=temperature_moves)
    games = SelfPlay(pyspiel.load_game("tic_tac_toe"), lambda states: np.zeros((len(states), 1)),
                     cfg, np.random.default_rng(0))
    games.move(uniform())
    first = {tuple(state.history()) for state in games.positions()}
    assert (first == {(0,)}) == alike and (alike or len(first) > 3)


def test_games_whose_observation_hides_the_player_to_move_are_refused(tmp_path):
    """Checkers observes the board alike from both seats, with no to-play plane, and a
    multi-jump lets one player move twice: the count of moves no longer tells the mover.
    Connect four (either env), tic-tac-toe (turns alternate) and mancala (its observation
    marks the player to move, though extra turns repeat a player) pass."""
    for spec in ("pettingzoo:connect_four_v3", "openspiel:tic_tac_toe", "openspiel:mancala"):
        env = make_multiagent_env(spec)
        check_turn_visible(search_game(env), env.observe_states)
    with pytest.raises(ValueError, match=r"'checkers' .* moving twice in a row"):
        train_alphazero(AlphaZeroConfig(), RunConfig(env="openspiel:checkers", max_env_steps=1,
                                                     logdir=str(tmp_path), progress=False))


def test_random_openings_start_games_after_unlearnt_random_moves():
    """Connect four, random_openings=2: games begin after 0, 1 or 2 random moves, each
    count about a third of the time, every column taken first; the first recorded
    position of a game is the one after its opening (no search chose those moves)."""
    game = pyspiel.load_game("connect_four")
    cfg = AlphaZeroConfig(num_games=600, num_simulations=1, random_openings=2)
    moves_made = lambda states: np.array([[len(s.history())] for s in states])  # noqa: E731
    games = SelfPlay(game, moves_made, cfg, np.random.default_rng(0))
    starts = [state.history() for state in games.positions()]
    counts = np.bincount([len(h) for h in starts], minlength=3)
    assert counts.sum() == 600 and counts.min() > 150, counts
    assert {h[0] for h in starts if h} == set(range(7))
    games.move(uniform())
    assert [int(record[0][0][0]) for record in games.records] == [len(h) for h in starts]


def test_no_random_openings_leaves_every_game_at_the_initial_state():
    game = pyspiel.load_game("connect_four")
    games = SelfPlay(game, lambda states: np.zeros((len(states), 1)),
                     AlphaZeroConfig(num_games=8, num_simulations=1), np.random.default_rng(0))
    assert all(state.history() == [] for state in games.positions())
    with pytest.raises(ValueError, match="random_openings"):
        AlphaZeroConfig(random_openings=-1)
