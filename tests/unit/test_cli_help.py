"""What the command line says before anything trains: the commands, --version, each
algorithm's tuned examples, errors that name the real command, the flag a user meant,
and which algorithm a game belongs to. In process: no run starts."""

import pytest

import distrl
from distrl.cli import main
from distrl.tuned import TABLES


def run_cli(capsys, *argv):
    """(exit status, stdout, stderr) of `distrl ARGV`."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    if isinstance(code, str):  # SystemExit("distrl: error: ...") prints its message
        code, err = 1, err + code + "\n"
    return code, out, err


def test_help_lists_the_commands_with_an_example_each(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for line in ("train ALGO", "eval RUN", "export RUN", "distrl train ppo --env",
                 "distrl eval runs/", "distrl export runs/"):
        assert line in out, line
    assert run_cli(capsys, "--version")[:2] == (0, f"distrl {distrl.__version__}\n")


def test_train_help_names_every_tuned_example(capsys):
    code, out, _ = run_cli(capsys, "train", "--help")
    assert code == 0
    for algo, table in TABLES.items():
        code, algo_help, _ = run_cli(capsys, "train", algo, "--help")
        assert code == 0 and "--tuned" in algo_help
        text = " ".join(algo_help.split())
        for name in table:
            assert name in text and name in out, (algo, name)


def test_a_config_error_names_the_real_command(capsys):
    code, _, err = run_cli(capsys, "train", "ppo", "--minibatch-size", "512",
                           "--train-batch-size", "256")
    assert code == 2 and "minibatch_size" in err
    assert "dummy" not in err and "distrl train ppo --help" in err


@pytest.mark.parametrize(("flag", "meant"), [
    ("--learning-rate", "--lr"), ("--learning_rate", "--lr"), ("--gae-lambda", "--lambda"),
    ("--total-timesteps", "--max-env-steps"), ("--num-workers", "--num-env-runners"),
    ("--clip-parm", "--clip-param"),
])
def test_a_misspelled_or_foreign_flag_suggests_the_real_one(capsys, flag, meant):
    code, _, err = run_cli(capsys, "train", "ppo", flag, "3")
    assert code == 2
    assert err.strip().splitlines() == [
        f"distrl: error: unknown flag {flag} (did you mean {meant}?). `distrl train ppo "
        "--help` lists every flag."]


def test_a_misspelled_algorithm_suggests_the_real_one(capsys):
    code, _, err = run_cli(capsys, "train", "ppx")
    assert code == 2 and "no algorithm 'ppx' (did you mean ppo?)" in err


def test_a_game_algorithm_without_env_suggests_a_game(capsys):
    code, _, err = run_cli(capsys, "train", "alphazero", "--max-env-steps", "64")
    assert code == 1
    assert err.strip().splitlines() == [
        "distrl: error: `distrl train alphazero` plays a multi-agent game: pass --env, e.g. "
        "--env openspiel:tic_tac_toe or --env pettingzoo:connect_four_v3, or start from "
        "--tuned connect_four."]


def test_a_game_given_to_a_single_agent_algorithm_points_to_the_game_ones(capsys):
    code, _, err = run_cli(capsys, "train", "ppo", "--env", "pettingzoo:connect_four_v3")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "`distrl train league --env pettingzoo:connect_four_v3`" in err
    assert "`distrl train alphazero --env pettingzoo:connect_four_v3`" in err


def test_export_is_a_command(capsys):
    code, out, _ = run_cli(capsys, "export", "--help")
    assert code == 0 and "distrl export" in out
