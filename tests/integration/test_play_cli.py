"""`distrl play RUN`: a human seat in the terminal, driven here through stdin: the board,
the legal moves, the agent's move with its value estimate, one line for an illegal
input (then asked again), a result line at the end, and a clean exit on Ctrl-C (130)
or at the end of input (0)."""

import io
import re

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

import pyspiel

from distrl.cli import main
from distrl.games.human import board
from tests.integration.tiny_game_runs import tiny_runs

EVERY_SQUARE = "".join(f"{k}\n" for k in range(9)) * 2  # the legal ones play, in order


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tiny_runs(tmp_path_factory.mktemp("runs"), ("az_pz", "az_os", "league_pz", "ppo"))


def play(monkeypatch, capsys, stdin, *args):
    monkeypatch.setattr("sys.stdin", stdin if not isinstance(stdin, str) else io.StringIO(stdin))
    try:
        main(["play", *args])
        code = 0
    except SystemExit as err:
        code = err.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_illegal_input_gets_one_line_and_is_asked_again(runs, monkeypatch, capsys):
    code, out, _ = play(monkeypatch, capsys, "x\n9\n" + EVERY_SQUARE, runs["az_pz"], "--first")
    assert code == 0
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "'x'" in line)
    assert lines[first] == ("your move: 'x' is not a legal move here; give one of "
                            "0 1 2 3 4 5 6 7 8")
    assert lines[first + 1].startswith("your move: '9' is not a legal move here")
    assert lines[first + 2].startswith("your move: ")  # asked again, then 0 is played
    assert "legal moves: 0 1 2 3 4 5 6 7 8" in out
    assert re.search(r"main_0 plays \d \(its value estimate [+-]\d\.\d\d\)", out)
    assert re.search(r"^game over: (you win|you lose|draw) \([+-]?\d\)$", lines[-1])


@pytest.mark.parametrize("run", ["az_os", "league_pz"])
def test_a_whole_game_ends_with_a_result_line(runs, monkeypatch, capsys, run):
    code, out, _ = play(monkeypatch, capsys, EVERY_SQUARE, runs[run], "--search", "4")
    assert code == 0
    assert out.splitlines()[0] == "you play o against main_0 (searching 4 simulations a move)"
    assert out.splitlines()[-1].startswith("game over: ")


def test_the_end_of_input_leaves_cleanly(runs, monkeypatch, capsys):
    code, out, err = play(monkeypatch, capsys, "", runs["az_pz"], "--first")
    assert code == 0 and "game over" not in out
    assert err.strip() == "distrl: end of input; the game is left unfinished"


class CtrlC(io.StringIO):
    def readline(self, *args):
        raise KeyboardInterrupt


def test_ctrl_c_leaves_with_one_line_and_130(runs, monkeypatch, capsys):
    code, _, err = play(monkeypatch, capsys, CtrlC(), runs["az_pz"], "--first")
    assert code == 130
    assert err.strip() == "distrl: interrupted; stopped without saving anything more"


def test_what_cannot_be_played_is_refused_in_one_line(runs, monkeypatch, capsys):
    code, _, _ = play(monkeypatch, capsys, "", runs["ppo"])
    assert "holds a 'ppo' run; `distrl play` seats you against a game run" in code
    code, _, _ = play(monkeypatch, capsys, "", runs["league_pz"], "--policy", "nope")
    assert code.startswith("distrl: error: no policy 'nope'") and "\n" not in code


def test_boards_show_marks_and_move_numbers():
    c4 = pyspiel.load_game("connect_four").new_initial_state()
    for move in (3, 3, 4):
        c4.apply_action(move)
    rows = board(c4).splitlines()
    assert rows[-1] == "0 1 2 3 4 5 6"
    assert "[bold red]x[/]" in rows[-2] and "[bold blue]o[/]" in rows[-3]
    tic = pyspiel.load_game("tic_tac_toe").new_initial_state()
    tic.apply_action(4)
    assert board(tic).splitlines()[1] == "[dim]3[/] [bold red]x[/] [dim]5[/]"
