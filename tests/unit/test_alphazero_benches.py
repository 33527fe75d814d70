"""AlphaZero's benches: the ladder names every rate it promises (the network alone and
searched, against every rung, with the right opponent and search), and the speed
bench's profile puts each function in the part of the work it belongs to; the perfect
player's bench weighs the random openings by their solved values."""

import argparse
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

import alphazero_ladder as ladder_bench  # noqa: E402
import alphazero_speed as speed_bench  # noqa: E402
import connect4_perfect  # noqa: E402
import search_memory  # noqa: E402


def test_ladder_names_every_rate_and_plays_each_rung_as_asked(monkeypatch):
    played = []

    def rung(checkpoint, opponent, games, seed, opening_moves, search, reuse):
        played.append((opponent, search, games, opening_moves))
        assert reuse is False  # as OpenSpiel's MCTSBot: every move searched afresh
        return {"win_rate": 0.5, "draw_rate": 0.25, "loss_rate": 0.25, "distinct_games": 7,
                "win_rate_ci95": [0.2, 0.8],
                "win_rate_by_seat": {"player_0": 0.75, "player_1": 0.25}}

    monkeypatch.setattr(ladder_bench, "rung", rung)
    args = argparse.Namespace(search=200, games=6, opening_moves=2, only=None,
                              search_reuse=False)
    out = ladder_bench.ladder("run", args, 0)
    wins = {k for k in out if k.startswith("win_rate_")}
    assert wins == {f"win_rate_{p}_vs_{r}" for p in ("net", "search200")
                    for r in ("random", "oneply", "mcts200", "mcts1000", "alphabeta5")}
    assert out["distinct_games_search200_vs_mcts1000"] == 7
    assert (out["ci95_low_search200_vs_mcts1000"], out["ci95_high_net_vs_random"]) == (0.2, 0.8)
    # The first mover's seat (player_0 moves first in PettingZoo's games) and the second.
    assert (out["first_seat_win_rate_net_vs_oneply"],
            out["second_seat_win_rate_net_vs_oneply"]) == (0.75, 0.25)
    specs = ["random", "board_bots:oneply", "mcts:200", "mcts:1000", "board_bots:alphabeta5"]
    assert played == [(s, n, 6, 2) for n in (0, 200) for s in specs]
    played.clear()
    args.only = ["search200_vs_mcts1000", "net_vs_oneply"]
    assert set(ladder_bench.ladder("run", args, 0)) == {
        f"{k}_{game}" for game in args.only for k in (
            "win_rate", "draw_rate", "loss_rate", "distinct_games", "first_seat_win_rate",
            "second_seat_win_rate", "ci95_low", "ci95_high")}
    assert played == [("mcts:1000", 200, 6, 2), ("board_bots:oneply", 0, 6, 2)]
    args.only = ["search_vs_mcts1000"]
    with pytest.raises(SystemExit, match="not a rung"):
        ladder_bench.ladder("run", args, 0)


def test_ladder_median_over_seeds():
    rows = [{"seed": 0, "win_rate_net_vs_random": 1.0, "per": "x"},
            {"seed": 1, "win_rate_net_vs_random": 0.5, "per": "y"},
            {"seed": 2, "win_rate_net_vs_random": 0.6, "per": "z"}]
    assert ladder_bench.median(rows) == {"seed": 1, "win_rate_net_vs_random": 0.6}


def test_speed_profile_parts():
    part = speed_bench.part
    observe = ("/x/distrl/games/games.py", 10, "observe_states")
    array = ("~", 0, "<built-in method numpy.array>")
    # pstats rows: (calls, primitive calls, own time, cumulative time, callers)
    stats = {array: (1, 1, 0.1, 0.1, {observe: (1, 1, 0.1, 0.1)}),
             observe: (1, 1, 0.1, 0.2, {})}
    assert part(("~", 0, "<built-in method torch.conv2d>")) == "network"
    assert part(("/x/distrl/alphazero/self_play.py", 5, "evaluate")) == "network"
    assert part(("/x/distrl/games/search.py", 60, "select")) == "tree"
    assert part(("~", 0, "<method 'clone' of 'pyspiel.State' objects>")) == "game"
    assert part(("~", 0, "<built-in method pyspiel.observation_tensor>")) == "observe"
    assert part(array, stats) == "observe"  # a numpy built-in counts for its caller
    assert part(array) == "other"


def test_elo_rates_a_runs_kept_checkpoints_each_as_its_own_player(tmp_path, monkeypatch):
    import json

    import league_elo

    import distrl.games.scoring as scoring

    for it in (200, 400, 437):
        (tmp_path / f"snapshots/{it:06d}").mkdir(parents=True)
    rows = [{"iteration": i, "time/total_s": 1.5 * i, "env/steps_total": 1024 * i}
            for i in range(1, 438)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    ladder, paths, clock = league_elo.snapshots(tmp_path, "main_0")
    assert ladder == ["main_0@200", "main_0@400", "main_0@437"]
    assert clock["main_0@437"] == (1.5 * 437, 1024 * 437)
    calls = []

    def evaluate(ckpt, policy, opponent, games, seed, opening_moves):
        calls.append((Path(ckpt).name, policy, opponent, opening_moves))
        return {"win_rate": 0.5, "draw_rate": 0.0, "distinct_games": games}

    monkeypatch.setattr(scoring, "evaluate_league", evaluate)
    pairs = league_elo.pairings(ladder, league_elo.SNAPSHOT_BOTS)
    league_elo.play(tmp_path, pairs, 4, 0, paths)
    snap = str(tmp_path / "snapshots")
    assert ("000400", "main_0", "mcts:1000", 0) in calls  # each checkpoint meets every bot
    assert ("000200", "main_0", f"run:{snap}/000400", 2) in calls  # neighbours: run:PATH
    assert ("000200", "mcts:1000", "mcts:200", 0) in calls  # the bots' own rung
    assert len(calls) == 3 * 3 + 2 + 2


def test_search_memory_counts_every_node_array_and_the_trees_kept_for_reuse():
    import numpy as np

    from distrl.games.players import SearchPlayer
    from tests.unit.test_search_solver import network, observe, position

    player = SearchPlayer(network, 60, c=1.25)
    peak = {"trees_bytes_max": 0, "kept_bytes_max": 0, "games_side_by_side": 0}
    choose = search_memory.measured(SearchPlayer.choose, peak)
    choose(player, [position([4]), position([0])], observe)
    trees = player.trees
    arrays = [v for v in vars(trees).values() if isinstance(v, np.ndarray)]
    arrays += [x for v in vars(trees).values() if isinstance(v, dict) for x in v.values()
               if isinstance(x, np.ndarray)]
    assert any(a.shape[:2] == (2, trees.capacity) for a in arrays)  # the node fields count
    assert peak["trees_bytes_max"] == sum(a.nbytes for a in arrays) == peak["kept_bytes_max"]
    first = peak["trees_bytes_max"]
    choose(player, [position([4, 0]), position([0, 4])], observe)
    # Two calls' trees are kept: their bytes add up.
    assert peak["kept_bytes_max"] == first + search_memory.nbytes(player.trees)
    assert peak["games_side_by_side"] == 2


def test_opening_values_weigh_each_random_opening_by_its_solved_value():
    # One random move: the centre wins for the first player, its two neighbours draw,
    # the four outer columns lose (Allis 1988), each with probability 1/7.
    assert connect4_perfect.opening_values(1) == {"win": round(1 / 7, 4),
                                                  "draw": round(2 / 7, 4),
                                                  "loss": round(4 / 7, 4)}
    assert connect4_perfect.opening_values(0) == {"win": 1.0, "draw": 0.0, "loss": 0.0}


def test_perfect_player_bench_plays_the_ladders_games(monkeypatch):
    seen = {}

    def fake_play_matches(game, env_config, policies, greedy, pid, opponent, games, seed,
                          opening_moves):
        seen.update(game=game, ids=set(policies), pid=pid, opponent=opponent, games=games,
                    seed=seed, opening_moves=opening_moves)
        return []

    import distrl.games.scoring as scoring

    monkeypatch.setattr(scoring, "play_matches", fake_play_matches)
    connect4_perfect.play("mcts:1000", 200, 3, 2)
    assert seen == {"game": "pettingzoo:connect_four_v3",
                    "ids": {"board_bots:solver", "mcts:1000"}, "pid": "board_bots:solver",
                    "opponent": "mcts:1000", "games": 200, "seed": 3, "opening_moves": 2}
