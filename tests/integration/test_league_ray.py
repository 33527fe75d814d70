"""League on Ray: match runners read the policy store, DistributedLearners train and
publish, mappings change at the next reset of each game, a resumed league is the same."""

import time

import numpy as np
import pytest
import ray
import torch

pytest.importorskip("pettingzoo")

from distrl import LeagueConfig, LeagueRules, RunConfig, train_league
from distrl.core.checkpoint import Checkpoint
from tests.integration.conftest import kill

pytestmark = pytest.mark.ray

GAME = "pettingzoo:connect_four_v3"


@pytest.mark.slow
def test_runner_switches_mappings_at_next_reset_and_picks_up_new_versions(ray_local):
    from distrl.games.games import make_multiagent_env, policy_obs_space
    from distrl.league.learners import DistributedLearners
    from distrl.league.remote import MatchRunner, MatchSetup

    env = make_multiagent_env(GAME)
    obs_space = policy_obs_space(env.observation_space("player_0"))
    act_space = env.action_space("player_0")
    learners = DistributedLearners(LeagueConfig(minibatch_size=64, num_epochs=1),
                                   max_policies=1, cpus_per_learner=0)
    learner = learners.add_policy("a", obs_space, act_space)
    a_first = {"player_0": "a", "player_1": "random"}
    a_second = {"player_0": "random", "player_1": "a"}
    runner = ray.remote(num_cpus=0)(MatchRunner).remote(
        MatchSetup(GAME, {}, 4, 0.99, 0.95, bots=("mcts:2",)), 0, learners.head, [a_first])
    replay = learners.get("a")[1]
    try:
        results, _ = ray.get(runner.play.remote([a_first], {"a": replay}, 200))
        assert results and all(r.policies == a_first for r in results)
        assert ray.get(runner.versions.remote()) == {"a": 0}
        out = ray.get(learner.train.remote(1))  # trains on what the runner sent
        assert out["version"] == 1 and out["samples"] >= 200
        results, _ = ray.get(runner.play.remote([a_second], {"a": replay}, 400))
        assert ray.get(runner.versions.remote())["a"] == 1  # the new version, no restart
        # Per game slot: only the game under way at the call keeps the old mapping; every
        # game started after it has the new one (the same call, never mid-game).
        for env_index in range(4):
            mine = [r.policies for r in results if r.env == env_index]
            assert all(m == a_second for m in mine[1:]), (env_index, mine)
        assert sum(r.policies == a_second for r in results) > 4
        # A training bot plays its seats in the runner, not through the store.
        a_bot = {"player_0": "mcts:2", "player_1": "a"}
        results, _ = ray.get(runner.play.remote([a_bot], {"a": replay}, 200))
        assert sum(r.policies == a_bot for r in results) > 4
    finally:
        ray.kill(runner)
        learners.stop()


@pytest.mark.slow
def test_failed_start_stops_learners_and_store(ray_local, monkeypatch, tmp_path):
    from distrl.league import remote as league
    from distrl.store.remote import HEAD_NAME

    started = []

    def fail(self, run):
        started.extend(learner for _, learner, _ in self.learners)
        raise RuntimeError("runners did not start")

    monkeypatch.setattr(league.RayWorkers, "_start_runners", fail)
    with pytest.raises(RuntimeError, match="did not start"):
        train_league(LeagueConfig(num_env_runners=1, num_cpus_per_learner=0.25),
                     RunConfig(env=GAME, logdir=str(tmp_path), progress=False))
    assert len(started) == 3  # main agent, main exploiter, league exploiter
    for learner in started:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(learner.node_id.remote())
    with pytest.raises(ValueError):  # the store's name is free again
        ray.get_actor(HEAD_NAME)


CONFIG = LeagueConfig(
    rules=LeagueRules(snapshot_steps=300, league_exploiter_reset_prob=1.0),
    train_batch_size=128, minibatch_size=64, num_epochs=1, num_envs=4,
    league_eval_interval=1, league_eval_games=6, league_eval_member_games=4,
    num_env_runners=2, num_cpus_per_learner=0.25, num_cpus_per_env_runner=0.25)


@pytest.mark.slow
def test_ray_league_trains_snapshots_and_resumes(ray_local, tmp_path):
    from distrl.core.loop import Start
    from distrl.league.train import LeagueRun

    run = RunConfig(env=GAME, logdir=str(tmp_path), progress=False, max_env_steps=2_500)
    first = train_league(CONFIG, run)
    ckpt = Checkpoint(first["checkpoint"])
    league = ckpt.json("progress", "progress.json")["algo"]["league"]
    snaps = [p["id"] for p in league["players"] if p["parent"]]
    assert snaps and first["league/num_policies"] == 3 + len(snaps)
    for key in ("league/win_rate/main_0_vs_random", "league/win_rate/main_0_vs_main_exploiter_0",
                "league/elo/main_0", "league/matches_per_s", "faults/restarts/match_runners"):
        assert key in first, key
    assert league["payoff"]["main_0"]
    state = ckpt.tensors("learner", "state.pt")
    assert set(snaps) <= set(state["weights"])
    # A reset exploiter's and its frozen snapshot's saved weights differ (the snapshot
    # was published from the learner's weights, not aliased to them).
    assert min(state["trainers"][p]["env_steps"] for p in state["trainers"]) > 0
    reset_snaps = [p["id"] for p in league["players"] if p["parent"] == "league_exploiter_0"]
    assert reset_snaps, "league_exploiter_reset_prob=1.0: its snapshots come with resets"
    now = state["weights"]["league_exploiter_0"]
    for snap in reset_snaps:
        assert any(not torch.equal(state["weights"][snap][k], now[k]) for k in now)
    # Restored on Ray: the same league, the same snapshot and learner weights, read back
    # from the policy store the runners use.
    restored = LeagueRun(Start("league", CONFIG, run, tmp_path, ckpt))
    try:
        assert restored.league.to_json() == league
        for pid in [*snaps, "main_0"]:
            got = restored.workers.module(pid).state_dict()
            for k, v in state["weights"][pid].items():
                torch.testing.assert_close(got[k], v, rtol=0, atol=0)
        assert restored.workers.env_steps() == {p: t["env_steps"]
                                                for p, t in state["trainers"].items()}
    finally:
        restored.close()
    assert np.isfinite(first["league/elo/main_0"])


@pytest.mark.slow
def test_ray_league_trains_lstm_learners_through_the_store(ray_local, tmp_path):
    """Recurrent learners on Ray: runners act through the store's views with a state per
    game and seat, learners train on sequences and publish; the main agent's LSTM moved
    (exploiters may just have been reset)."""
    from dataclasses import replace

    from distrl import ModelConfig
    from distrl.league.trainer import LeagueTrainer
    from distrl.league.workers import learner_seed

    config = replace(CONFIG, model=ModelConfig(hiddens=(32,), use_lstm=True, lstm_cell_size=16,
                                               max_seq_len=4))
    run = RunConfig(env=GAME, logdir=str(tmp_path), progress=False, max_env_steps=1_500)
    result = train_league(config, run)
    assert result["iteration"] >= 2 and "league/win_rate/main_0_vs_random" in result
    ckpt = Checkpoint(result["checkpoint"])
    weights = ckpt.tensors("learner", "state.pt")["weights"]
    init = LeagueTrainer(*make_spaces(), config, seed=learner_seed(run.seed, "main_0")
                         ).model.state_dict()
    assert {k for k in init if k.startswith("lstm.")} <= set(weights["main_0"])
    assert any(not torch.equal(weights["main_0"][k], init[k]) for k in init
               if k.startswith("lstm.")), "the main agent's LSTM never trained"


@pytest.mark.slow
def test_ray_league_state_critics_and_counterfactual_magnets_train_in_their_learners(
        ray_local, tmp_path):
    """On Ray, match runners record what each learner needs beyond its samples: the
    games' nodes (each learner fits its state critic, checkpointed with Adam's steps
    taken) and each move's reach (Magnet.counterfactual: a learner given samples without
    it refuses them, which would fail the run). One run checks both."""
    from dataclasses import replace

    from distrl import Magnet, ModelConfig

    pytest.importorskip("pyspiel")
    config = replace(CONFIG, model=ModelConfig(hiddens=(32,)), state_critic=True, gamma=1.0,
                     magnet=Magnet(coeff=0.2, counterfactual=True))
    run = RunConfig(env="openspiel:kuhn_poker", logdir=str(tmp_path), progress=False,
                    max_env_steps=1_500)
    result = train_league(config, run)
    assert result["iteration"] >= 2 and result["learner/main_0/critic_loss"] > 0
    assert result["learner/main_0/magnet_kl"] > 0
    trainers = Checkpoint(result["checkpoint"]).tensors("learner", "state.pt")["trainers"]
    critic = trainers["main_0"]["critic"]
    assert critic["model"]["layers.0.weight"].shape[1] == 2 * 11  # both Kuhn players
    assert critic["model"]["layers.1.bias"].shape == (3,)  # Kuhn's deal has three cards
    assert all(int(s["step"]) >= 1 for s in critic["optimizer"]["state"].values())


def make_spaces():
    from distrl.games.games import make_multiagent_env, policy_obs_space

    env = make_multiagent_env(GAME)
    return policy_obs_space(env.observation_space("player_0")), env.action_space("player_0")


# alone: a timing bound
@pytest.mark.alone
def test_a_learner_that_cannot_start_is_an_error_within_its_timeout(ray_local):
    """Both CPUs held elsewhere: add_policy waited forever for its learner."""
    from distrl.games.games import make_multiagent_env, policy_obs_space
    from distrl.league.learners import DistributedLearners

    @ray.remote(num_cpus=2)
    class Hog:
        def ready(self):
            return True

    hog = Hog.remote()
    ray.get(hog.ready.remote())
    env = make_multiagent_env(GAME)
    spaces = (policy_obs_space(env.observation_space("player_0")),
              env.action_space("player_0"))
    learners = DistributedLearners(LeagueConfig(), max_policies=1, cpus_per_learner=1,
                                   timeout_s=3.0)
    try:
        with pytest.raises(RuntimeError, match=r"did not start within 3 s.*1 CPUs"):
            learners.add_policy("a", *spaces)
        assert len(learners) == 0
        with pytest.raises(ValueError, match="need 1 GPUs but the Ray cluster has 0"):
            DistributedLearners(LeagueConfig(), max_policies=1, num_gpus=1.0)
    finally:
        learners.stop()
        ray.kill(hog)


def test_cli_league_asking_for_a_missing_gpu_is_one_line(tmp_path):
    import subprocess
    import sys

    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "distrl", "train", "league", "--env",
                          "openspiel:kuhn_poker", "--num-env-runners", "1",
                          "--num-gpus-for-learners", "1", "--logdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and time.monotonic() - t0 < 120
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("distrl: error")]
    assert len(errors) == 1 and "--num-gpus-for-learners" in errors[0], out.stderr[-2000:]




def learner_threads(players) -> int:
    learner = players.learners.get("main_0")[0]
    return ray.get(learner.__ray_call__.remote(lambda _: torch.get_num_threads()))


@pytest.fixture
def restartable_league(ray_local, tmp_path):
    """A league run one iteration in, each group allowed one restart, 2 torch threads
    a learner."""
    from distrl.league.train import start_league

    league_run = start_league(CONFIG, RunConfig(env=GAME, logdir=str(tmp_path),
                                                progress=False, max_restarts=1,
                                                num_torch_threads=2))
    try:
        league_run.iterate()
        assert learner_threads(league_run.workers) == 2  # the run's num_torch_threads
        yield league_run
    finally:
        league_run.close()


def test_a_dead_learner_a_lost_store_and_replay_are_restarted_each_up_to_max(
        restartable_league):
    """A dead learner restarts from the weights it last published and its trainer state.
    The store dies with the weights it owned: learners publish theirs again, and the
    frozen snapshots (owned by the driver) are listed again, unchanged; a lost replay
    actor is replaced and its learners take from the new one. Each counts a restart;
    one more death than max_restarts stops the run with its own line. (One league for
    all: a league start is seconds.)"""
    league_run = restartable_league
    players = league_run.workers
    before = players.module("main_0").state_dict()
    steps = players.env_steps()["main_0"]
    saved = players.get_state()["trainers"]["main_0"]  # what a checkpoint holds
    kill(players.learners.get("main_0")[0])
    assert players.env_steps()["main_0"] == steps  # restarted, its steps restored
    restored = players.get_state()["trainers"]["main_0"]  # and its trainer state
    assert restored["kl_coeff"] == saved["kl_coeff"]
    adam, got = saved["optimizer"]["state"], restored["optimizer"]["state"]
    assert adam and all(torch.equal(adam[i]["exp_avg_sq"], got[i]["exp_avg_sq"])
                        for i in adam)
    for k, v in players.module("main_0").state_dict().items():  # republished as it was
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)
    metrics = league_run.iterate()  # and the league goes on
    assert metrics["faults/restarts/league_learners"] == 1
    assert learner_threads(players) == 2
    assert players.env_steps()["main_0"] > steps

    players.freeze("main_0", "probe")
    probe = players.module("probe").state_dict()
    steps = players.env_steps()
    kill(players.learners.head)
    kill(players.learners.shards[0].replay)
    metrics = league_run.iterate()  # the runners find both dead, and the league goes on
    assert metrics["faults/restarts/policy_store"] == 1
    assert metrics["faults/restarts/league_replays"] == 1
    assert metrics["faults/restarts/match_runners"] == 0  # not blamed for the loss
    assert metrics["faults/restarts/league_learners"] == 1  # nor the learners (as before)
    assert all(players.env_steps()[pid] > n for pid, n in steps.items())  # all trained
    versions = ray.get(players.learners.head.versions.remote())
    assert {"probe", *steps} <= set(versions)
    for k, v in players.module("probe").state_dict().items():
        torch.testing.assert_close(v, probe[k], rtol=0, atol=0)

    kill(players.learners.head)
    with pytest.raises(RuntimeError, match="policy_store died; it was already restarted 1"):
        league_run.iterate()
    kill(players.learners.get("main_0")[0])
    with pytest.raises(RuntimeError, match="already restarted 1 times"):
        players.env_steps()


@pytest.mark.slow
def test_overlapped_learners_train_on_the_last_play_while_the_runners_play(ray_local, tmp_path):
    """overlap_learning: each update takes the samples the play before it left, while the
    runners play the next batch; a checkpoint first trains on what is left, a reset
    drops its learner's untaken samples, and a learner that died before its update is
    restarted and trains on what its replay holds."""
    from dataclasses import replace

    from distrl.league.train import start_league

    league_run = start_league(replace(CONFIG, overlap_learning=True, league_eval_interval=0),
                              RunConfig(env=GAME, logdir=str(tmp_path), progress=False,
                                        max_restarts=1))
    players = league_run.workers
    replay = players.learners.get("main_0")[1]
    try:
        first = league_run.iterate()
        assert not any(k.startswith("learner/") for k in first)  # nothing to take yet
        assert set(players.env_steps().values()) == {0}
        second = league_run.iterate()  # trains on the first play's samples
        trained = players.env_steps()["main_0"]
        assert trained == second["learner/main_0/samples"] > 0
        players.get_state()  # the second play's samples are trained before saving
        assert players.env_steps()["main_0"] > trained
        assert ray.get(replay.take.remote("main_0", 1)) is None
        league_run.iterate()  # its play leaves main_0 samples behind
        players.reset("main_0")  # and they go with the weights that played them
        assert ray.get(replay.take.remote("main_0", 1)) is None
        league_run.iterate()
        steps = players.env_steps()["main_0"]
        kill(players.learners.get("main_0")[0])
        third = league_run.iterate()  # the update sent to the dead learner is made again
        assert third["faults/restarts/league_learners"] == 1
        assert players.env_steps()["main_0"] > steps
    finally:
        league_run.close()


# alone: a timing bound
@pytest.mark.alone
def test_a_store_that_does_not_answer_stops_the_driver_within_the_store_timeout(
        ray_local, monkeypatch):
    """The driver's store calls wait STORE_TIMEOUT_S (120 s; 1 s here) and name the store,
    not the run's actor timeout (600 s) with a bare GetTimeoutError."""
    from types import SimpleNamespace

    from distrl.league.remote import RayWorkers
    from distrl.store import remote as store

    monkeypatch.setattr(store, "STORE_TIMEOUT_S", 1.0)
    head = store.head_store()
    busy = head.__ray_call__.remote(lambda self: time.sleep(6))  # the store answers nothing
    workers = RayWorkers.__new__(RayWorkers)  # only what _own reads
    workers.learners, workers.frozen, workers.spec = SimpleNamespace(head=head), {}, None
    workers.timeout = 600.0
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"policy store did not list 'snap' within 1 s"):
        workers._own("snap", np.zeros(4, np.float32))
    assert time.monotonic() - started < 5
    ray.get(busy)
    store.stop_head_store(head)


def test_a_learner_whose_constructor_raises_is_one_error_naming_it(ray_local):
    import gymnasium as gym

    from distrl.league.learners import DistributedLearners

    learners = DistributedLearners(LeagueConfig(), max_policies=2, cpus_per_learner=0.25)
    good = (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
    try:
        with pytest.raises(RuntimeError) as raised:  # started together, one fails
            learners.add_policies({"b": good,
                                   "a": (gym.spaces.Text(5), gym.spaces.Discrete(2))})
        message = str(raised.value)
        assert message.startswith("the learner of 'a' failed to start: ")
        assert message.endswith("wrap Dict/Tuple observations with "
                                "gymnasium.wrappers.FlattenObservation).")
        assert "\n" not in message
        assert learners.get("a") is None and learners.get("b") is None  # none kept
        learners.add_policies({"a": good, "b": good})  # and their slots are free
        assert ray.get(learners.get("b")[0].env_steps.remote()) == 0
        with pytest.raises(RuntimeError, match="learner shards are full"):
            learners.add_policy("c", *good)
        with pytest.raises(ValueError, match="'a' already has a learner"):
            learners.add_policies({"a": good})
        assert learners.get("c") is None and len(learners) == 2  # refused before a start
    finally:
        learners.stop()
