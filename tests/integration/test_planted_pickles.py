"""A run folder may come from anyone. Pickles that run code when unpickled (each makes a
marker file) are planted in every pickle of a saved run, in each file a loader looks for
by name, and in its tensor files: `distrl eval`, distrl.load_policy, `distrl export`,
``run:PATH`` opponents and `distrl play` never unpickle them. They work from the weights
and JSON, or fail with one line naming the file. Resume, the one path that reads the
run's own pickles (its envs' states), reads only those and loads its tensors weights-only
too (docs/reliability.md). The marker, not a patched ``pickle``, is the proof: distrl's
trusted_loads binds its Unpickler at import."""

import contextlib
import io
import itertools
import pickle
import shutil
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from rich.console import Console

import distrl
from distrl.cli import main
from distrl.core.checkpoint import Checkpoint
from distrl.export import export_policy
from distrl.games.scoring import evaluate_league
from tests.integration.tiny_game_runs import tiny_runs

MARKER = "planted-pickle-ran"
EXTRA = ("ppo/pending.pkl", "appo/pending.pkl", "replay/state.pt", "average/table.pt")
"""Files other runs' checkpoints hold, which a loader reads by name."""
TRUSTED = {("runners", "state.pkl"), ("ppo", "pending.pkl")}
"""The pickles a PPO resume may read: its own run's envs and the batch it had in flight."""


class Planted:
    """Unpickled, it creates ``marker``: what a pickle in a downloaded run could do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def cartpole(**kwargs):
    """A factory env: the run's JSON cannot hold it, only its trusted pickle."""
    return gym.make("CartPole-v1", **kwargs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    out = tiny_runs(tmp, ("ppo",))
    distrl.train_ppo(distrl.PPOConfig(num_env_runners=0, num_envs_per_env_runner=2,
                                      train_batch_size=64, minibatch_size=64, num_epochs=1),
                     distrl.RunConfig(env=cartpole, max_env_steps=64, progress=False,
                                      logdir=str(tmp / "factory")))
    return {**out, "factory": str(tmp / "factory")}


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pyspiel")
    return tiny_runs(tmp_path_factory.mktemp("games"), ("league_pz", "az_pz"))


def plant(run: str, tmp: Path, tensors: bool = False, spare: set = frozenset()) -> str:
    """A copy of ``run`` in ``tmp`` with a planted pickle in each of its pickles and each
    EXTRA file it lacks (``tensors``: its .pt files too), except the ``spare`` ones."""
    copy = tmp / (Path(run).name + ("-tensors" if tensors else ""))
    shutil.copytree(run, copy)
    ckpt, marker = copy / "checkpoint", tmp / MARKER
    names = {*(str(p.relative_to(ckpt)) for p in ckpt.rglob("*.pkl")),
             *(e for e in EXTRA if not (ckpt / e).exists())}
    if tensors:
        names |= {str(p.relative_to(ckpt)) for p in ckpt.rglob("*.pt")}
    for name in names - {"/".join(s) for s in spare}:
        path = ckpt / name
        path.parent.mkdir(exist_ok=True)
        if path.suffix == ".pt":  # as torch.save writes it: a zip around a pickle
            torch.save({"weights": Planted(marker), "t": torch.zeros(1)}, path)
        else:
            path.write_bytes(pickle.dumps(Planted(marker)))
    return str(copy)


@contextlib.contextmanager
def never_unpickled(tmp: Path):
    """Fails when a planted pickle ran, whatever else the body raised (chained below)."""
    try:
        yield
    finally:
        assert not (tmp / MARKER).exists(), "a planted pickle was unpickled: it ran code"


def one_line_naming(err: pytest.ExceptionInfo, name: str) -> None:
    message = str(err.value.code if isinstance(err.value, SystemExit) else err.value)
    assert "\n" not in message and name in message and "not loaded" in message, message


def test_the_planted_files_run_code_when_unpickled(runs, tmp_path):
    from distrl.core.checkpoint import trusted_loads

    ckpt = Path(plant(runs["ppo"], tmp_path, tensors=True)) / "checkpoint"
    for load in (lambda: trusted_loads((ckpt / "runners" / "state.pkl").read_bytes()),
                 lambda: pickle.loads((ckpt / "ppo" / "pending.pkl").read_bytes()),
                 lambda: torch.load(ckpt / "policy" / "weights.pt", weights_only=False),
                 lambda: torch.load(ckpt / "learner" / "state.pt", weights_only=False)):
        (tmp_path / MARKER).unlink(missing_ok=True)
        load()
        assert (tmp_path / MARKER).exists()


def test_eval_plays_from_the_weights_and_never_unpickles(runs, tmp_path, capsys):
    run = plant(runs["ppo"], tmp_path)
    with never_unpickled(tmp_path):
        main(["eval", run, "--episodes", "2"])
        assert "mean greedy return over 2 episodes" in capsys.readouterr().out
        assert len(distrl.evaluate(run, episodes=2)) == 2


def test_eval_refuses_weights_that_are_not_tensors_in_one_line(runs, tmp_path):
    run = plant(runs["ppo"], tmp_path, tensors=True)
    with never_unpickled(tmp_path), pytest.raises(SystemExit) as err:
        main(["eval", run, "--episodes", "2"])
    one_line_naming(err, "weights.pt")


def test_eval_of_a_factory_env_run_never_takes_the_factory_from_its_pickle(runs, tmp_path):
    run = plant(runs["factory"], tmp_path)
    with never_unpickled(tmp_path):
        with pytest.raises(ValueError, match=r"factory env .*env=<factory>"):
            distrl.evaluate(run, episodes=2)
        with pytest.raises(SystemExit, match="factory env"):
            main(["eval", run, "--episodes", "2"])
        assert len(distrl.evaluate(run, episodes=2, env=cartpole)) == 2


@pytest.mark.parametrize("name", ["ppo", "factory", "league_pz", "az_pz"])
def test_load_policy_acts_from_the_weights_and_never_unpickles(runs, games, tmp_path, name):
    run = plant({**runs, **games}[name], tmp_path)
    with never_unpickled(tmp_path):
        policy = distrl.load_policy(run)
        policy.observation_space.seed(0)
        assert policy.act(policy.observation_space.sample()) in policy.action_space
        if name in games:  # another policy id: read from the learner's tensors
            with pytest.raises(ValueError, match="no policy 'main_1'"):
                distrl.load_policy(run, "main_1")


@pytest.mark.parametrize("name", ["ppo", "league_pz"])
def test_load_policy_refuses_tensor_files_that_are_not_tensors(runs, games, tmp_path, name):
    run = plant({**runs, **games}[name], tmp_path, tensors=True)
    with never_unpickled(tmp_path), pytest.raises(ValueError) as err:
        distrl.load_policy(run)
    one_line_naming(err, "weights.pt")
    if name in games:
        with never_unpickled(tmp_path), pytest.raises(ValueError) as err:
            distrl.load_policy(run, "main_1")
        one_line_naming(err, "state.pt")


@pytest.mark.parametrize("name", ["ppo", "league_pz"])
def test_export_writes_from_the_weights_and_never_unpickles(runs, games, tmp_path, name):
    run = plant({**runs, **games}[name], tmp_path)
    tampered = plant({**runs, **games}[name], tmp_path, tensors=True)
    with never_unpickled(tmp_path):
        assert export_policy(run, out=tmp_path / "policy.pt").is_file()
        with pytest.raises(SystemExit) as err:
            main(["export", tampered])
    one_line_naming(err, "weights.pt")


def test_a_run_opponent_plays_from_its_weights_and_never_unpickles(games, tmp_path, capsys):
    league = plant(games["league_pz"], tmp_path)
    rival = plant(games["az_pz"], tmp_path)
    with never_unpickled(tmp_path):
        out = evaluate_league(league, opponent=f"run:{rival}", games=2)
        assert out["opponent"] == f"run:{rival}" and out["games"] == 2
        main(["eval", league, "--episodes", "2", "--opponent", f"run:{rival}@search=2"])
        assert "over 2 games" in capsys.readouterr().out


def test_a_run_opponent_refuses_weights_that_are_not_tensors(games, tmp_path):
    league = plant(games["league_pz"], tmp_path)
    rival = plant(games["az_pz"], tmp_path, tensors=True)
    with never_unpickled(tmp_path), pytest.raises(SystemExit) as err:
        main(["eval", league, "--episodes", "2", "--opponent", f"run:{rival}"])
    one_line_naming(err, "weights.pt")


def test_play_moves_from_the_weights_and_never_unpickles(games, tmp_path):
    from distrl.games.human import play_game

    moves = itertools.cycle("012345678")  # illegal ones are answered and the next read
    console = Console(file=io.StringIO())
    with never_unpickled(tmp_path):
        play_game(plant(games["az_pz"], tmp_path), first=True, ask=lambda _: next(moves),
                  console=console)
        with pytest.raises(ValueError) as err:
            play_game(plant(games["league_pz"], tmp_path, tensors=True), console=console)
    one_line_naming(err, "weights.pt")


def test_resume_unpickles_only_its_own_env_state(runs, tmp_path, monkeypatch):
    read = []
    trusted = Checkpoint.trusted
    monkeypatch.setattr(Checkpoint, "trusted", lambda self, component, name: (
        read.append((component, name)), trusted(self, component, name))[1])
    run = plant(runs["ppo"], tmp_path, spare=TRUSTED)
    with never_unpickled(tmp_path):
        result = distrl.train_ppo(run=distrl.RunConfig(resume=run, max_env_steps=128,
                                                       progress=False))
    assert result["iteration"] == 2
    assert ("runners", "state.pkl") in read and set(read) <= TRUSTED, read


def test_resume_loads_its_tensors_weights_only(runs, tmp_path):
    run = plant(runs["ppo"], tmp_path, tensors=True, spare=TRUSTED)
    with never_unpickled(tmp_path), pytest.raises(SystemExit) as err:
        main(["train", "ppo", "--resume", run, "--max-env-steps", "128"])
    one_line_naming(err, ".pt")
