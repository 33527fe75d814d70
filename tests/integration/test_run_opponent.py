"""Any saved game run as an opponent: `--opponent run:PATH[@search=N][@policy=ID]`,
parsed once when the command's config is made (games.opponents), played head to head in
both seats with the games counted as against any other opponent."""

import json
from collections import Counter

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl.cli import main
from distrl.games import scoring
from distrl.games.opponents import Opponent, parse_opponent
from distrl.games.players import SearchPlayer
from distrl.games.policies import LocalPolicy, check_opponent
from tests.integration.tiny_game_runs import tiny_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tiny_runs(tmp_path_factory.mktemp("runs"), ("az_pz", "league_pz", "az_os", "ppo"))


def test_specs_parse_into_typed_opponents(tmp_path):
    path = str(tmp_path)
    assert parse_opponent("random") == Opponent("random", "random")
    assert parse_opponent("mcts:25") == Opponent("mcts:25", "mcts", simulations=25)
    assert parse_opponent("main_1") == Opponent("main_1", "policy", policy="main_1")
    assert parse_opponent("main_0@3").policy == "main_0@3"  # a snapshot
    assert parse_opponent("tests.fakes:first_legal_move").kind == "module"
    assert parse_opponent(f"run:{path}") == Opponent(f"run:{path}", "run", path=path)
    assert parse_opponent(f"run:{path}@search=8") == Opponent(
        f"run:{path}@search=8", "run", path=path, search=8)
    both = parse_opponent(f"run:{path}@search=3@policy=snap_2")
    assert (both.path, both.search, both.policy) == (path, 3, "snap_2")
    assert parse_opponent(f"run:{path}@policy=snap_2@search=3").search == 3
    at = tmp_path / "a@b"
    at.mkdir()
    assert parse_opponent(f"run:{at}").path == str(at)  # an @ of the path itself


@pytest.mark.parametrize(("spec", "message"), [
    ("run:/no/such/run", "no saved run at '/no/such/run'"),
    ("run:{tmp}@serch=3", r"give run:PATH, run:PATH@search=N, run:PATH@policy=ID"),
    ("run:{tmp}@search=3@search=4", r"run:PATH@policy=ID or both options once each"),
    ("run:{tmp}@search=0", "N >= 1"),
    ("run:{tmp}@search=many", "N >= 1"),
    ("run:", "no saved run"),
    ("mcts:0", r"give mcts:<simulations>"),
    ("two words", r"give random, a policy id of the run \(e.g. main_1\), mcts:<simulations>, "
                  r"run:PATH\[@search=N\]\[@policy=ID\] or module:callable"),
    ("no_such_module_xyz:bot", "run:PATH.*module:callable"),
])
def test_a_bad_spec_is_one_line_naming_the_accepted_forms(tmp_path, spec, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_opponent(spec.format(tmp=tmp_path))
    assert "\n" not in str(err.value)


def test_training_opponents_refuse_saved_runs_and_policy_ids(tmp_path):
    with pytest.raises(ValueError, match="saved runs play in `distrl eval`"):
        check_opponent(f"run:{tmp_path}")
    with pytest.raises(ValueError, match="give random, mcts:<simulations>"):
        check_opponent("main_1")
    assert check_opponent("mcts:5") == "mcts:5"


def test_the_cli_refuses_a_bad_spec_before_anything_loads(runs, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("evaluated despite a bad spec")

    monkeypatch.setattr(scoring, "evaluate_league", must_not_run)
    with pytest.raises(SystemExit) as err:
        main(["eval", runs["az_pz"], "--opponent", "run:/no/such/run@search=2"])
    assert str(err.value.code).startswith("distrl: error: opponent 'run:/no/such/run@search=2'")
    assert "\n" not in str(err.value.code)


def seats_played(monkeypatch, run, opponent, games):
    """The (player id, agent) seats of every game evaluate_league counted."""
    results = []
    play = scoring.play_matches

    def recorded(*args, **kwargs):
        results.extend(play(*args, **kwargs))
        return results

    monkeypatch.setattr(scoring, "play_matches", recorded)
    out = scoring.evaluate_league(run, opponent=opponent, games=games)
    monkeypatch.setattr(scoring, "play_matches", play)
    return out, Counter((pid, agent) for r in results for agent, pid in r.policies.items())


@pytest.mark.parametrize("games", [4, 5])
def test_a_head_to_head_plays_both_seats_as_any_evaluation(runs, monkeypatch, games):
    rival = f"run:{runs['league_pz']}"
    out, seats = seats_played(monkeypatch, runs["az_pz"], rival, games)
    _, against_random = seats_played(monkeypatch, runs["az_pz"], "random", games)
    assert out["games"] == games and out["opponent"] == rival
    assert sum(out[k] for k in ("win_rate", "draw_rate", "loss_rate")) == pytest.approx(1)
    assert seats[(rival, "player_1")] + seats[(rival, "player_2")] == games
    for agent in ("player_1", "player_2"):  # the same split over the seats as vs random
        assert seats[(rival, agent)] == against_random[("random", agent)] > 0
        assert seats[("main_0", agent)] == against_random[("main_0", agent)]


def test_a_searching_saved_run_and_its_other_policies(runs, capsys):
    main(["eval", runs["league_pz"], "--opponent", f"run:{runs['az_pz']}@search=3",
          "--search", "2", "--episodes", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert (out["policy_search"], out["opponent_search"]) == (2, 3)
    spec = f"run:{runs['az_pz']}@search=3"
    player = scoring.outside_policy(spec, "pettingzoo:tictactoe_v3", {}, 0, 9)
    assert isinstance(player, SearchPlayer) and (player.simulations, player.name) == (3, spec)
    plain = scoring.outside_policy(f"run:{runs['az_pz']}", "pettingzoo:tictactoe_v3", {}, 0, 9)
    assert isinstance(plain, LocalPolicy)
    with pytest.raises(ValueError, match=r"no policy 'nope' in this run; it has \['main_0'\]"):
        scoring.evaluate_league(runs["league_pz"], opponent=f"run:{runs['az_pz']}@policy=nope",
                                games=2)


def test_a_run_of_another_game_or_kind_is_refused_in_one_line(runs):
    with pytest.raises(ValueError, match="was trained on openspiel:tic_tac_toe"):
        scoring.evaluate_league(runs["az_pz"], opponent=f"run:{runs['az_os']}", games=2)
    with pytest.raises(ValueError, match="holds a 'ppo' run; run: opponents are saved game"):
        scoring.evaluate_league(runs["az_pz"], opponent=f"run:{runs['ppo']}", games=2)
