"""APPO's runners on Ray: requests stay in flight while the learner trains, weights
reach them through the policy store, a killed runner is replaced without losing a
fragment the learner was given, and a Ray run resumes with the fragments it had not
trained on."""

import time

import numpy as np
import pytest

from distrl.appo.config import APPOConfig
from distrl.appo.remote import RaySampler
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.sampling import seed_for
from distrl.models.config import ModelConfig
from distrl.ppo.env_runner import EnvRunner
from tests.fakes import record_appo_batches
from tests.integration.conftest import kill

pytestmark = pytest.mark.ray


def sampler(n=2, max_queued=2, steps_per_env=8):
    def kwargs(i, restart):
        return dict(env="CartPole-v1", num_envs=2, model=ModelConfig(hiddens=(16,)),
                    gamma=0.99, lambda_=1.0, seed=seed_for(0, i, restart))
    return RaySampler(kwargs, n, 1, RunConfig(), steps_per_env=steps_per_env,
                      max_queued=max_queued)


def weights():
    local = EnvRunner("CartPole-v1", 1, ModelConfig(hiddens=(16,)), 0.99, 1.0, 0)
    return {k: v.numpy().copy() for k, v in local.model.state_dict().items()}


def test_requests_stay_in_flight_up_to_the_bound_and_carry_new_weights(ray_local):
    s = sampler()
    try:
        s.publish(weights(), 0)
        assert len(s.inflight) == 4  # 2 runners x max_queued 2, before anything is taken
        assert {f.weights_version for f in s.take(4)} == {0}
        s.publish(weights(), 3)
        later = s.take(6)
        assert later[-1].weights_version == 3  # the newest weights reached the runners
        assert len(s.inflight) + len(s.ready) <= 4
    finally:
        s.close()


def test_a_request_queued_before_a_publish_acts_with_the_store_s_newest_weights(ray_local):
    s = sampler(n=1, max_queued=2, steps_per_env=1000)
    try:
        s.publish(weights(), 0)  # two requests queued on the one runner
        assert len(s.inflight) == 2
        newest = {k: v + 1.0 for k, v in weights().items()}
        s.publish(newest, 1)  # while the first fragment is sampled
        _, second = s.take(2)
        assert second.weights_version == 1  # queued with version 0, started with 1
        assert ray_local.get(s.store.head.versions.remote()) == {"appo": 1}
        (_, box, _), = ray_local.get(s.store.head.latest.remote(["appo"])).values()
        flat = ray_local.get(box[0])
        np.testing.assert_array_equal(flat[:8], newest["pi.0.weight"].ravel()[:8])
    finally:
        s.close()


def test_the_ray_sampler_offers_only_what_train_appo_asks():
    from tests.unit.test_appo import SAMPLER_API

    assert {n for n in dir(RaySampler) if not n.startswith("_")} == SAMPLER_API


def test_a_killed_runner_is_replaced_and_sampling_goes_on(ray_local):
    s = sampler()
    try:
        s.publish(weights(), 0)
        s.take(2)
        kill(s.sup.actors[0])
        frags = s.take(6)
        assert len(frags) == 6 and all(f.samples >= 16 for f in frags)
        assert s.sup.restarts == [1, 0]
        assert s.metrics() == {"faults/restarts/env_runners": 1,
                               "faults/restarts/policy_store": 0}
    finally:
        s.close()


def test_a_ray_run_resumes_with_its_pending_fragments(ray_local, tmp_path, monkeypatch):
    import distrl.appo.train as appo_train

    cfg = APPOConfig(num_env_runners=2, num_envs_per_env_runner=2, train_batch_size=64,
                     minibatch_size=32, model=ModelConfig(hiddens=(16,)))
    first = appo_train.train_appo(cfg, RunConfig(max_env_steps=1000, logdir=str(tmp_path),
                                                 progress=False))
    pending = Checkpoint(first["checkpoint"]).trusted("appo", "pending.pkl")["fragments"]
    assert len(pending) >= 1  # requests were in flight when the run stopped
    trained = record_appo_batches(monkeypatch)
    resumed = appo_train.train_appo(cfg, RunConfig(
        resume=str(tmp_path), max_env_steps=first["env/steps_total"] + 1, progress=False))
    assert resumed["iteration"] == first["iteration"] + 1
    for kept, used in zip(pending, trained, strict=False):  # the saved ones first, in order
        np.testing.assert_array_equal(used.obs, kept.obs)


def test_a_killed_store_is_rebuilt_with_the_newest_weights_and_runners_wait_for_it(ray_local):
    s = sampler()
    try:
        s.publish(weights(), 0)
        s.take(2)
        newest = {k: v + 1.0 for k, v in weights().items()}
        s.publish(newest, 1)
        kill(s.store.head)
        frags = s.take(8)  # more than were queued: runners start fragments on the dead store
        assert len(frags) == 8 and frags[-1].weights_version == 1
        assert s.metrics() == {"faults/restarts/env_runners": 0,
                               "faults/restarts/policy_store": 1}
        assert ray_local.get(s.store.head.versions.remote()) == {"appo": 1}
        (_, box, _), = ray_local.get(s.store.head.latest.remote(["appo"])).values()
        np.testing.assert_array_equal(ray_local.get(box[0])[:8],
                                      newest["pi.0.weight"].ravel()[:8])
        # A runner replaced while the store is dead starts on the rebuilt one.
        kill(s.store.head)
        kill(s.sup.actors[0])
        assert len(s.take(6)) == 6
        assert s.metrics() == {"faults/restarts/env_runners": 1,
                               "faults/restarts/policy_store": 2}
    finally:
        s.close()


def test_a_reader_whose_store_is_not_rebuilt_stops_with_one_line_within_its_wait(ray_local):
    from distrl.runtime.supervisor import Restarts
    from distrl.store.remote import PolicyReader, RunStore

    store = RunStore(Restarts("policy_store", 3))
    reader = PolicyReader(store.name, rebuild_wait_s=2.0)
    kill(store.head)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^the policy store 'distrl_policy_store_\w+' died "
                       r"and no new one answered within 2 s") as err:
        reader.newer("appo", -1)
    assert time.monotonic() - t0 < 10 and "\n" not in str(err.value)


# alone: kills the machine's ray::PolicyStore process by name
@pytest.mark.alone
def test_a_run_whose_store_process_is_killed_goes_on_to_its_time_limit(tmp_path):
    """The CLI run as a chaos run kills it: the store's process SIGKILLed after the first
    iteration. A clean run of this length reaches 500 (seeds 0-2)."""
    import json
    import subprocess
    import sys

    import psutil

    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    cmd = [sys.executable, "-m", "distrl", "train", "appo", "--tuned", "cartpole",
           "--stop-return", "None", "--num-env-runners", "2", "--seed", "0",
           "--max-time-s", "20", "--max-restarts", "1000", "--logdir", str(tmp_path / "run"),
           "--json", "--no-progress"]
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
        try:
            metrics = tmp_path / "run" / "metrics.jsonl"
            deadline = time.monotonic() + 120
            while not (metrics.is_file() and metrics.stat().st_size):
                assert time.monotonic() < deadline and proc.poll() is None, err.read_text()
                time.sleep(0.2)
            time.sleep(3)
            stores = [p for p in psutil.Process(proc.pid).children(recursive=True)
                      if (p.cmdline() or [""])[0].startswith("ray::PolicyStore")]
            assert len(stores) == 1
            stores[0].kill()
            rc = proc.wait(timeout=120)
        finally:
            proc.kill()
    assert rc == 0, err.read_text()[-3000:]
    result = json.loads(out.read_text().strip().splitlines()[-1])
    assert result["stopped_by"] == "max_time_s"
    assert result["faults/restarts/policy_store"] == 1
    assert result["faults/restarts/env_runners"] == 0  # the runners waited for the store
    assert result["env/episode_return_mean"] >= 450
    assert "distrl: the policy store died; rebuilt with the newest weights" in out.read_text()
