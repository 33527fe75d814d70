"""Ape-X's config rules and its one-process mode (no Ray): train, checkpoint, resume."""

import subprocess
import sys

import pytest
import torch

from distrl import ApexConfig, ModelConfig, RunConfig, train_apex
from distrl.core.checkpoint import Checkpoint

SMALL = dict(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=25,
             learning_starts=200, capacity=5_000, train_batch_size=32,
             target_network_update_freq=300, min_time_s_per_reporting=0.0,
             min_sample_timesteps_per_reporting=250,
             model=ModelConfig(hiddens=(32,), activation="relu"))


def test_config_errors_say_what_to_change():
    with pytest.raises(ValueError, match=r"fewer than `train_batch_size` \(512\)\. Raise"):
        ApexConfig(capacity=1_000, num_replay_buffer_shards=4)
    with pytest.raises(ValueError, match=r"`training_intensity` .* must be > 0"):
        ApexConfig(training_intensity=0.0)
    with pytest.raises(ValueError, match="more than `capacity`"):
        ApexConfig(capacity=3, num_replay_buffer_shards=4, train_batch_size=1)
    for bad, match in ((dict(prioritized_replay_eps=-1.0), "prioritized_replay_eps"),
                       (dict(gamma=1.5), r"`gamma` \(1.5\) must lie in \[0, 1\]"),
                       (dict(prioritized_replay_beta=-3.0), "prioritized_replay_beta"),
                       (dict(learning_starts=-1), "learning_starts"),
                       (dict(grad_clip=0.0), "grad_clip")):
        with pytest.raises(ValueError, match=match):
            ApexConfig(**bad)
    with pytest.raises(ValueError, match="DQN needs a Discrete action space"):
        train_apex(ApexConfig(**SMALL), RunConfig(env="Pendulum-v1", max_env_steps=10,
                                                  progress=False))


def test_in_process_apex_never_imports_ray(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from distrl import ApexConfig, ModelConfig, RunConfig, train_apex\n"
        "r = train_apex(ApexConfig(num_workers=0, learning_starts=100, capacity=2000,\n"
        "                          train_batch_size=32, model=ModelConfig(hiddens=(16,))),\n"
        f"    RunConfig(max_env_steps=500, logdir={str(tmp_path)!r}, progress=False))\n"
        "assert r['learner/trained_total'] > 0, r\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_checkpoint_is_weights_only_and_resume_continues_the_learner(tmp_path):
    torch.set_num_threads(1)
    first = train_apex(ApexConfig(**SMALL), RunConfig(max_env_steps=1_000,
                                                      logdir=str(tmp_path), progress=False))
    ckpt = Checkpoint(first["checkpoint"])
    state = ckpt.tensors("learner", "state.pt")  # weights_only=True inside
    trained = int(state["counters"][0])
    assert trained == first["learner/trained_total"] > 0
    assert set(state["target"]) == set(ckpt.tensors("policy", "weights.pt"))
    # What a resume loads is what was saved: online and target nets, optimizer, counters.
    import gymnasium as gym
    import numpy as np

    from distrl.apex.roles import DQNLearner

    space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    restored = DQNLearner(space, gym.spaces.Discrete(2), ApexConfig(**SMALL),
                          torch.device("cpu"))
    restored.set_state({**state, "model": ckpt.tensors("policy", "weights.pt")})
    again = restored.get_state()
    for k, v in ckpt.tensors("policy", "weights.pt").items():
        assert torch.equal(again["model"][k], v)
    for k, v in state["target"].items():
        assert torch.equal(again["target"][k], v)
    saved_adam, got_adam = state["optimizer"]["state"], again["optimizer"]["state"]
    assert saved_adam and all(torch.equal(saved_adam[i]["exp_avg"], got_adam[i]["exp_avg"])
                              for i in saved_adam)
    assert torch.equal(again["counters"], state["counters"])
    resumed = train_apex(ApexConfig(**{**SMALL, "lr": 1e-5}), RunConfig(
        resume=first["checkpoint"], max_env_steps=2_000, progress=False))
    assert resumed["env/steps_total"] >= 2_000
    # The new lr trains and is saved; the Adam moments came from the checkpoint.
    after = Checkpoint(resumed["checkpoint"]).tensors("learner", "state.pt")
    assert [g["lr"] for g in after["optimizer"]["param_groups"]] == [1e-5]
    # The replay is not checkpointed: learning_starts is waited for again, then the
    # learner's counters go on from the checkpoint's.
    assert resumed["learner/trained_total"] > trained
    assert resumed["iteration"] > first["iteration"]


def test_the_run_stops_at_max_env_steps_not_at_a_reporting_period(tmp_path):
    config = ApexConfig(**{**SMALL, "min_sample_timesteps_per_reporting": 1_000,
                           "min_time_s_per_reporting": 5.0})
    out = train_apex(config, RunConfig(max_env_steps=100, logdir=str(tmp_path),
                                       progress=False))
    assert 100 <= out["env/steps_total"] <= 100 + 2 * 25  # one fragment of 2 envs over
    assert out["time/total_s"] < 5.0


def test_a_resumed_run_seeds_its_envs_anew():
    """The replay and the envs are not saved: a resume with the first run's seeds would
    play the first run's episodes again."""
    import gymnasium as gym
    import numpy as np

    from distrl.apex.roles import DQNLearner
    from distrl.apex.train import make_engine

    config = ApexConfig(**SMALL)
    space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    learner = DQNLearner(space, gym.spaces.Discrete(2), config, torch.device("cpu"))

    def first_obs(resumed_at):
        engine, _ = make_engine(config, RunConfig(), learner, space, resumed_at)
        obs = engine.actor.loop.obs.copy()
        engine.close()
        return obs

    np.testing.assert_array_equal(first_obs(0), first_obs(0))
    assert not np.array_equal(first_obs(0), first_obs(7))


def test_with_checkpoint_replay_a_resumed_run_continues_exactly(tmp_path):
    torch.set_num_threads(1)
    config = ApexConfig(**{**SMALL, "checkpoint_replay": True})
    straight = train_apex(config, RunConfig(max_env_steps=1_500, logdir=str(tmp_path / "a"),
                                            progress=False))
    train_apex(config, RunConfig(max_env_steps=750, logdir=str(tmp_path / "b"),
                                 progress=False))
    ckpt = Checkpoint(tmp_path / "b")
    assert ckpt.tensors("replay", "state.pt")["stored"] > 0  # weights_only=True inside
    resumed = train_apex(config, RunConfig(resume=str(tmp_path / "b"), max_env_steps=1_500,
                                           progress=False))
    assert resumed["iteration"] == straight["iteration"]
    assert resumed["learner/trained_total"] == straight["learner/trained_total"]
    a, b = (Checkpoint(tmp_path / d) for d in "ab")
    for part in ("policy", "learner"):
        name = "weights.pt" if part == "policy" else "state.pt"
        sa, sb = a.tensors(part, name), b.tensors(part, name)
        flat_a = {k: v for k, v in sa.items() if torch.is_tensor(v)}
        for k, v in flat_a.items():
            assert torch.equal(v, sb[k]), (part, k)
    ta, tb = a.tensors("learner", "state.pt")["target"], b.tensors("learner", "state.pt")["target"]
    assert all(torch.equal(ta[k], tb[k]) for k in ta)
