"""DD-PPO on 2 Ray workers: identical replicas, preemption, recovery, errors, resume."""

import json
import time
from dataclasses import fields, replace

import numpy as np
import pytest
import torch

from distrl import evaluate
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.sampling import seed_for
from distrl.ddppo.config import DDPPOConfig
from distrl.ddppo.remote import DDPPOWorkerGroup
from distrl.ddppo.train import train_ddppo
from distrl.models.config import ModelConfig
from distrl.models.recurrent import actor_critic
from tests.fakes import (
    broken_in_one_process,
    counting,
    crash_in_learner_step,
    hang_once_in_one_process,
    slow_in_one_process,
)

pytestmark = pytest.mark.ray

SMALL = DDPPOConfig(num_workers=2, num_envs_per_worker=2, rollout_fragment_length=16,
                    minibatch_size=8, num_epochs=2, collective_timeout_s=20.0)
LSTM = replace(SMALL, model=ModelConfig(use_lstm=True, lstm_cell_size=8, max_seq_len=5))


def make_group(env, cfg=SMALL, run=None) -> DDPPOWorkerGroup:
    group = DDPPOWorkerGroup(lambda i, r: dict(env=env, config=cfg, seed=seed_for(0, i, r)), cfg,
                             run or RunConfig())
    torch.manual_seed(0)
    model = actor_critic(*group_spaces(env), cfg.model)
    group.set_learner_state({"model": model.state_dict(), "optimizer": None})
    return group


def group_spaces(env):
    from distrl.envs.make import env_spaces

    return env_spaces(env)


def learner_states(group) -> list[dict]:
    import ray

    return ray.get([a.learner_state.remote() for a in group.sup.actors])


def replica_weights(group) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in s["model"].items()} for s in learner_states(group)]


def adam_steps(state: dict) -> list[float]:
    return [float(s["step"]) for s in state["optimizer"]["state"].values()]


def assert_identical(weights: list[dict[str, np.ndarray]]) -> None:
    for k in weights[0]:
        for w in weights[1:]:
            assert np.array_equal(weights[0][k], w[k]), f"{k} differs between ranks"


@pytest.mark.parametrize("cfg", [SMALL, LSTM], ids=["feedforward", "lstm"])
def test_replicas_stay_bit_identical(ray_local, cfg):
    group = make_group("CartPole-v1", cfg)
    try:
        before = replica_weights(group)
        for i in range(4):
            results = group.run_round(i, i * 64, send_weights=True)
        after = replica_weights(group)
    finally:
        group.close()
    assert_identical(before)
    assert_identical(after)
    assert not np.array_equal(before[0]["pi.0.weight"], after[0]["pi.0.weight"])
    if cfg.model.use_lstm:
        assert not np.array_equal(before[0]["lstm.weight_hh_l0"], after[0]["lstm.weight_hh_l0"])
    assert [r.samples for r in results] == [32, 32]
    for k, v in results[0].weights.items():  # what the driver keeps in sync is rank 0's
        assert np.array_equal(v, after[0][k])


# alone: a timing bound
@pytest.mark.slow
@pytest.mark.alone
def test_straggler_is_preempted_and_round_time_bounded(ray_local, tmp_path):
    # One worker's envs sleep 50 ms per step: its 40-step fragment takes >= 2 s. With
    # threshold 0.5 it stops once the other has finished and it has 25% (10 steps).
    cfg = replace(SMALL, rollout_fragment_length=40, minibatch_size=20,
                  preemption_threshold=0.5, preemption_min_share=0.25)
    timings, samples = {}, {}
    for name, threshold in (("on", 0.5), ("off", 1.0)):
        (tmp_path / name).mkdir()
        env = slow_in_one_process(str(tmp_path / name), sleep_s=0.05)
        group = make_group(env, replace(cfg, preemption_threshold=threshold))
        try:
            group.run_round(0, 0, send_weights=False)  # warm-up: first forward passes etc.
            t0 = time.perf_counter()
            results = group.run_round(1, 160, send_weights=False)
            timings[name] = time.perf_counter() - t0
        finally:
            group.close()
        samples[name] = sorted(r.samples for r in results)
        preempted = sum(r.preempted_samples for r in results)
        assert preempted == 2 * 80 - sum(samples[name])
    assert samples["on"] == [20, 80]  # the straggler kept exactly its minimum share
    assert samples["off"] == [80, 80]
    assert timings["off"] >= 2.0
    assert timings["on"] < 0.6 * timings["off"], timings


def test_a_worker_killed_mid_update_is_replaced_and_survivors_roll_back(ray_local, tmp_path,
                                                                      capfd):
    # SMALL: 32 samples / 8 per minibatch x 2 epochs = 8 gradient steps per round. The
    # claiming worker dies at its 11th step (3rd of round 1), after the survivor has taken
    # 2 steps of that round: those must be undone before the round is taken again.
    group = make_group(crash_in_learner_step(str(tmp_path), at=11))
    try:
        results = [group.run_round(i, i * 64, send_weights=False) for i in range(4)]
        states = learner_states(group)
        restarts = list(group.sup.restarts)
    finally:
        group.close()
    assert sorted(restarts) == [0, 1]
    assert all(len(r) == 2 for r in results)
    assert_identical([{k: v.numpy() for k, v in s["model"].items()} for s in states])
    for state in states:  # 4 rounds x 8 steps: no step of the failed attempt survives
        assert adam_steps(state) == [32.0] * len(adam_steps(state))
    assert "replaced (restart 1/3)" in capfd.readouterr().out


# alone: a timing bound (the collective timeout)
@pytest.mark.alone
def test_a_hung_worker_is_named_and_replaced(ray_local, tmp_path, capfd):
    # One worker's env blocks at its 40th step (round 1); the survivor's collective fails
    # after 3 s, the hung worker is killed after 6 s and replaced, the round retaken.
    cfg = replace(SMALL, collective_timeout_s=3.0)
    group = make_group(hang_once_in_one_process(str(tmp_path), at=40), cfg,
                       RunConfig(actor_timeout_s=6.0))
    try:
        results = [group.run_round(i, i * 64, send_weights=False) for i in range(3)]
        metrics = group.metrics()
        weights = replica_weights(group)
    finally:
        group.close()
    assert metrics == {"faults/restarts/ddppo_workers": 1}
    assert all(len(r) == 2 for r in results)
    assert_identical(weights)
    assert "hung: no answer within 6 s; replaced" in capfd.readouterr().out


def test_worker_that_cannot_start_fails_fast_with_its_message(ray_local, tmp_path):
    t0 = time.perf_counter()
    # The env's own error, one line naming its file:line (EnvError), not the worker's.
    with pytest.raises(RuntimeError, match=r"raised RuntimeError: this env cannot start here "
                                           r"\(test\) at .*fakes\.py:\d+"):
        make_group(broken_in_one_process(str(tmp_path)))
    assert time.perf_counter() - t0 < SMALL.collective_timeout_s  # no wait for a timeout


def test_nan_from_an_env_is_raised_at_once(ray_local, tmp_path):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="non-finite observation"):
        train_ddppo(SMALL, RunConfig(env=counting(end=10_000, nan_at=5), logdir=str(tmp_path),
                                     progress=False, max_env_steps=1000))
    assert time.perf_counter() - t0 < SMALL.collective_timeout_s


def test_ddppo_has_no_reward_scaling_observation_filter_or_overlap():
    """What PPO's exact-resume tests also restore (tests/integration/test_exact_resume_scaled.py)
    DD-PPO has not: no reward scaling (its runners keep no running returns), no observation
    filter (refused: the workers would not merge its statistics), no overlap (each worker
    samples, then trains). If one is added, extend the resume test below."""
    names = {f.name for f in fields(DDPPOConfig)}
    assert "normalize_rewards" not in names and "overlap" not in names
    with pytest.raises(ValueError, match="observation_filter"):
        DDPPOConfig(model=ModelConfig(observation_filter="MeanStdFilter"))


@pytest.mark.parametrize("cfg", [SMALL, LSTM], ids=["feedforward", "lstm"])
def test_checkpoint_resumes_exactly_and_evaluates(ray_local, tmp_path, cfg):
    # A non-default env: the resumed run must take it from the checkpoint, not the default.
    # An LSTM's episodes in progress go on from their saved states.
    straight = train_ddppo(cfg, RunConfig(env="Acrobot-v1", logdir=str(tmp_path / "a"),
                                            max_env_steps=256, progress=False))
    train_ddppo(cfg, RunConfig(env="Acrobot-v1", logdir=str(tmp_path / "b"), max_env_steps=128,
                               progress=False))
    resumed = train_ddppo(cfg, RunConfig(resume=str(tmp_path / "b"), max_env_steps=256,
                                           progress=False))
    assert resumed["iteration"] == straight["iteration"] == 4
    assert resumed["env/steps_total"] == straight["env/steps_total"]
    a, b = (Checkpoint(tmp_path / d).tensors("policy", "weights.pt") for d in "ab")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # Rank 0's optimizer and each worker's two random streams (actions, minibatch order)
    # come back too: the next steps are the uninterrupted run's.
    oa, ob = (Checkpoint(tmp_path / d).learner_state()["optimizer"] for d in "ab")
    assert oa["param_groups"] == ob["param_groups"]
    assert oa["state"].keys() == ob["state"].keys() and oa["state"]
    differ = [f"{i}/{k}" for i, sa in oa["state"].items() for k, v in sa.items()
              if not torch.equal(v, ob["state"][i][k])]
    assert not differ, f"optimizer state {differ} differs after the resume"
    sa, sb = (Checkpoint(tmp_path / d).runner_states() for d in "ab")
    assert len(sa) == len(sb) == cfg.num_workers
    for (runner_a, shuffle_a), (runner_b, shuffle_b) in zip(sa, sb, strict=True):
        assert runner_a[2] is None  # no running returns: nothing to scale rewards with
        assert torch.equal(runner_a[1], runner_b[1])  # the worker's action sampler
        assert torch.equal(shuffle_a, shuffle_b)  # its minibatch order
    first = "pi_trunk.0.weight" if cfg.model.use_lstm else "pi.0.weight"
    assert a[first].shape[1] == 6  # Acrobot's observation
    rows = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    for key in ("ddppo/preempted_steps", "ddppo/allreduce_s", "ddppo/world_size",
                "env/episode_return_mean", "learner/policy_loss", "learner/batch_size",
                "faults/restarts/ddppo_workers"):
        assert key in rows[-1], key
    assert rows[-1]["ddppo/world_size"] == 2 and rows[-1]["learner/batch_size"] == 64
    assert len(evaluate(tmp_path / "b", episodes=3)) == 3


def test_the_store_is_on_loopback_and_unsigned_marks_are_ignored():
    import psutil
    import torch.distributed as dist
    from ray.util import get_node_ip_address

    from distrl.ddppo.remote import DDPPOWorker

    worker = DDPPOWorker("CartPole-v1", replace(SMALL, preemption_threshold=0.5), seed=1,
                         secret=b"k" * 32)
    # The sampler and the minibatch shuffler draw from different streams.
    assert worker.generator.initial_seed() != worker.runner.generator.initial_seed()
    ip, port = worker.open_store(2, loopback=True)
    try:
        listening = [c.laddr for c in psutil.net_connections("tcp")
                     if c.status == "LISTEN" and c.laddr.port == port]
        assert ip == "127.0.0.1" and [a.ip for a in listening] == ["127.0.0.1"]
        worker.rank, worker.world_size = 0, 2
        count = worker._preemption(index=7).count_finished
        stranger = dist.TCPStore(ip, port, 2, is_master=False)
        stranger.set("finished/7/1", "0" * 64 + " 1")  # another local user forging a mark
        assert count() == 0
        peer = DDPPOWorker.__new__(DDPPOWorker)  # a group member holding the secret
        peer.store, peer.secret = stranger, worker.secret
        peer._signed_set("finished/7/1", "1")
        assert count() == 1
        stranger.set("shm_path", "0" * 64 + " /tmp/elsewhere")
        with pytest.raises(Exception, match="forged value for 'shm_path'"):
            worker._signed_get("shm_path")
        # Ranks on several nodes: the node's own address, not every interface.
        ip, port = worker.open_store(2, loopback=False)
        listening = [c.laddr for c in psutil.net_connections("tcp")
                     if c.status == "LISTEN" and c.laddr.port == port]
        assert ip == get_node_ip_address() and [a.ip for a in listening] == [ip]
    finally:
        worker.leave()
