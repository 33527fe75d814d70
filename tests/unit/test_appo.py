"""APPO's pieces: the learner's view of a lagging fragment, the in-process sampler that
overlaps with learning, and a run that resumes with the fragments it had not trained on."""

import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from distrl.appo.config import APPOConfig
from distrl.appo.loss import learner_view, train_batch
from distrl.appo.sampler import ThreadSampler
from distrl.core.config import RunConfig
from distrl.core.returns import gae, vtrace
from distrl.models.config import ModelConfig
from distrl.models.filters import return_std, stats_from_json
from distrl.models.recurrent import actor_critic
from distrl.ppo.env_runner import EnvRunner
from distrl.store.policy_cache import FlatLayout, flatten_arrays
from tests.fakes import record_appo_batches


def runner(seed=0, num_envs=3):
    return EnvRunner("CartPole-v1", num_envs, ModelConfig(hiddens=(16,)), 0.99, 1.0, seed)


def test_learner_view_rescores_the_fragment_with_the_learners_weights():
    r = runner()
    frag = r.fragment(20)
    model = actor_critic(*r.spaces(), ModelConfig(hiddens=(16,)))
    view = learner_view(model, frag, torch.device("cpu"))
    T, N = frag.rewards.shape
    with torch.no_grad():
        inputs, v = model(torch.as_tensor(frag.obs.reshape(T * N, -1)))
        v_next = model(torch.as_tensor(frag.next_obs))[1]
        want = model.dist.log_prob(inputs, torch.as_tensor(frag.actions.reshape(-1)))
    np.testing.assert_allclose(view.logp, want.numpy().reshape(T, N), rtol=1e-5)
    np.testing.assert_allclose(view.dist_inputs, inputs.numpy().reshape(T, N, -1), rtol=1e-5)
    np.testing.assert_allclose(view.values, np.concatenate([v.numpy().reshape(T, N),
                                                            v_next.numpy()[None]]), rtol=1e-5)


@pytest.mark.parametrize("clip_around", ["sampler", "learner"])
def test_a_lagging_batch_is_clipped_around_the_chosen_policy_with_vtrace_advantages(
        clip_around):
    """Sampled by other weights: the surrogate's denominator and KL base are the
    sampler's policy or the learner's own before the update, as chosen; the advantages
    are V-trace's from the learner-over-sampler ratios either way (checked against
    core.returns.vtrace directly)."""
    r = runner(seed=5)
    frag = r.fragment(30)
    torch.manual_seed(1)
    learner = actor_critic(*r.spaces(), ModelConfig(hiddens=(16,)))
    cfg = APPOConfig(num_env_runners=0, num_envs_per_env_runner=3, train_batch_size=90,
                     minibatch_size=45, advantage_normalization="none", lambda_=0.9,
                     clip_around=clip_around)
    _, rollout = train_batch(learner, [frag], cfg, torch.device("cpu"))
    view = learner_view(learner, frag, torch.device("cpu"))
    v = frag.valid
    assert not np.allclose(view.logp[v], frag.logp[v], atol=1e-3)  # the weights differ
    base = view if clip_around == "learner" else frag
    np.testing.assert_allclose(rollout.logp, base.logp[v], rtol=1e-6)
    np.testing.assert_allclose(rollout.dist_inputs, base.dist_inputs[v], rtol=1e-6)
    targets, adv = vtrace(frag.rewards, view.values, frag.terminated, frag.truncated,
                          view.logp - frag.logp, 0.99, 0.9)
    np.testing.assert_allclose(rollout.advantages, adv[v], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rollout.value_targets, targets[v], rtol=1e-4, atol=1e-5)


def test_on_policy_batch_is_ppos_gae_batch_over_valid_rows():
    """With the sampler's own weights, V-trace (lambda 1, ratio 1) gives GAE(1)'s targets
    and advantages; reset rows never reach the batch."""
    r = runner(seed=1)
    frag = r.fragment(40)  # CartPole episodes end within 40 steps early on: reset rows
    assert not frag.valid.all()
    cfg = APPOConfig(num_env_runners=0, num_envs_per_env_runner=3, train_batch_size=120,
                     minibatch_size=60, advantage_normalization="none")
    _, rollout = train_batch(r.model, [frag], cfg, torch.device("cpu"))
    values = learner_view(r.model, frag, torch.device("cpu")).values
    adv, targets = gae(frag.rewards, values, frag.terminated, frag.truncated, 0.99, 1.0)
    np.testing.assert_allclose(rollout.advantages, adv[frag.valid], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rollout.value_targets, targets[frag.valid], rtol=1e-4, atol=1e-4)
    assert rollout.size == frag.samples == int(frag.valid.sum())
    np.testing.assert_array_equal(rollout.obs, frag.obs[frag.valid])


@pytest.mark.parametrize(("scale", "reward_std"), [(True, 4.0), (True, 0.05), (False, 4.0)])
def test_reward_scaling_is_the_learners_and_runners_send_raw_rewards(scale, reward_std):
    """With normalize_rewards, runners send the env's raw rewards and their discounted
    returns' statistics; the learner's V-trace sees rewards over its own std, clipped
    to +-10 (1 / 0.05 = 20 is clipped). Without it, the std is ignored."""
    r = EnvRunner("CartPole-v1", 3, ModelConfig(hiddens=(16,)), 0.99, 1.0, 4,
                  normalize_rewards=True)
    frag = r.fragment(40)
    assert np.all(frag.rewards[frag.valid] == 1.0)  # CartPole's own reward, unscaled
    assert frag.stats["returns"].count == frag.valid.sum()
    cfg = APPOConfig(num_env_runners=0, num_envs_per_env_runner=3, train_batch_size=120,
                     minibatch_size=60, advantage_normalization="none",
                     normalize_rewards=scale)
    _, rollout = train_batch(r.model, [frag], cfg, torch.device("cpu"), reward_std)
    values = learner_view(r.model, frag, torch.device("cpu")).values
    rewards = np.minimum(frag.rewards / reward_std, 10.0) if scale else frag.rewards
    adv, targets = gae(rewards, values, frag.terminated, frag.truncated, 0.99, 1.0)
    np.testing.assert_allclose(rollout.advantages, adv[frag.valid], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rollout.value_targets, targets[frag.valid], rtol=1e-4,
                               atol=1e-4)


def test_thread_sampler_bounds_its_queue_and_loses_no_fragment_on_pause():
    r = runner(seed=2, num_envs=2)
    sampler = ThreadSampler(r, 8, max_queued=2)
    weights = {k: v.numpy().copy() for k, v in r.model.state_dict().items()}
    sampler.publish(weights, 0)
    first = sampler.take(3)
    assert [f.weights_version for f in first] == [0, 0, 0]
    sampler.publish(weights, 5)
    time.sleep(0.5)  # ample time to sample dozens of 8-step fragments
    pending = sampler.pause()
    assert len(pending) == 2  # max_queued waiting, no more
    states = r.loop.get_state()  # paused: the runner is idle
    sampler.resume(pending)
    later = sampler.take(len(pending) + 2)
    assert later[: len(pending)] == pending  # the kept fragments come first, in order
    assert later[-1].weights_version == 5
    sampler.close()
    assert states is not None


SAMPLER_API = {"publish", "take", "pause", "resume", "metrics", "get_states", "set_states",
               "close"}


def test_the_in_process_sampler_offers_only_what_train_appo_asks():
    """No synchronous sample/launch/collect left over from PPO's runner groups."""
    assert {n for n in dir(ThreadSampler) if not n.startswith("_")} == SAMPLER_API


def test_published_weights_come_back_as_the_runners_state_dict():
    """What RaySampler hands the policy store (one flat float32 buffer) and what its
    runners load from it."""
    r = runner()
    weights = {k: v.numpy() + 0.5 for k, v in r.model.state_dict().items()}
    flat = flatten_arrays(weights)
    assert flat.dtype == np.float32 and flat.size == sum(w.size for w in weights.values())
    back = FlatLayout.of(r.model).arrays(flat)
    assert back.keys() == weights.keys()
    for k in weights:
        np.testing.assert_array_equal(back[k], weights[k])
    r.set_weights(back, 7)
    assert r.version == 7 and torch.equal(r.model.state_dict()["pi.0.weight"],
                                          torch.from_numpy(weights["pi.0.weight"]))
    with pytest.raises(ValueError, match="does not fit a layout"):
        FlatLayout.of(r.model).arrays(flat[1:])


def test_a_runner_error_reaches_the_learner():
    r = runner(seed=3)
    sampler = ThreadSampler(r, 8, max_queued=1)
    r.fragment = lambda *a, **k: (_ for _ in ()).throw(ValueError("env exploded"))
    sampler.publish({}, 0)
    with pytest.raises(ValueError, match="env exploded"):
        sampler.take(1)
    sampler.close()


def test_resume_trains_first_on_the_fragments_saved_with_the_checkpoint(tmp_path,
                                                                       monkeypatch):
    import distrl.appo.train as appo_train
    from distrl.core.checkpoint import Checkpoint

    cfg = APPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=64,
                     minibatch_size=32, max_queued_fragments=2, normalize_rewards=True,
                     model=ModelConfig(hiddens=(16,)))
    first = appo_train.train_appo(cfg, RunConfig(env="CartPole-v1", max_env_steps=640,
                                                 logdir=str(tmp_path), progress=False))
    ckpt = Checkpoint(first["checkpoint"])
    pending = ckpt.trusted("appo", "pending.pkl")["fragments"]
    assert pending  # sampled ahead while the last update ran
    returns = stats_from_json(ckpt.algo_state()["returns"])  # reward scaling's statistics
    assert 0 < returns.count <= first["env/steps_total"]  # the valid rows trained on
    trained = record_appo_batches(monkeypatch)
    resumed = appo_train.train_appo(cfg, RunConfig(
        resume=str(tmp_path), max_env_steps=first["env/steps_total"] + 1, progress=False))
    assert resumed["iteration"] == first["iteration"] + 1
    assert resumed["learner/reward_std"] == return_std(returns) > 1.0
    np.testing.assert_array_equal(trained[0].obs, pending[0].obs)
    np.testing.assert_array_equal(trained[0].actions, pending[0].actions)
    assert resumed["env/steps_total"] == first["env/steps_total"] + pending[0].env_steps


def test_tuned_pong_entry_builds_and_trains_one_update_on_envpool(tmp_path):
    """The entry as tuned (its conv net, knobs and env), on a tiny batch in process."""
    pytest.importorskip("envpool")
    from dataclasses import replace

    from distrl.appo.train import train_appo
    from distrl.tuned import tuned

    t = tuned("pong", "appo")
    assert t.for_runners(0).fragment_length() * 60 == t.config.train_batch_size
    assert t.config.fragment_length() * t.config.num_envs == t.config.train_batch_size
    config = replace(t.for_runners(0), num_envs_per_env_runner=2, rollout_fragment_length=16,
                     train_batch_size=32, minibatch_size=32)
    result = train_appo(config, RunConfig(env=t.env, max_env_steps=32, device="cpu",
                                          logdir=str(tmp_path), progress=False))
    assert result["iteration"] == 1 and result["env/steps_total"] == 32
    assert np.isfinite(result["learner/policy_loss"])


def test_tuned_hopper_entry_is_ppos_mujoco_recipe_with_learner_side_reward_scaling(tmp_path):
    """The entry takes every PPO knob of the PPO MuJoCo recipe, scales rewards at the
    learner, and trains on Hopper in process."""
    pytest.importorskip("mujoco")
    from dataclasses import fields, replace

    from distrl.appo.train import train_appo
    from distrl.ppo.config import PPOConfig
    from distrl.tuned import MUJOCO_PPO, tuned

    t = tuned("hopper", "appo")
    assert all(getattr(t.config, f.name) == getattr(MUJOCO_PPO, f.name)
               for f in fields(PPOConfig))
    assert t.config.normalize_rewards and t.config.max_queued_fragments == 1
    assert t.config.clip_around == "learner"
    config = replace(t.for_runners(0), train_batch_size=64, minibatch_size=32)
    result = train_appo(config, RunConfig(env=t.env, max_env_steps=128,
                                          logdir=str(tmp_path), progress=False))
    assert result["iteration"] == 2 and result["learner/reward_std"] > 1.0


def test_ppos_overlap_knob_is_refused_and_hidden_for_appo():
    with pytest.raises(ValueError, match="overlap is PPO's knob"):
        APPOConfig(overlap=True)
    out = subprocess.run([sys.executable, "-m", "distrl", "train", "appo", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--overlap" not in out and "--vtrace-clip-rho" in out
    assert "--recompute-advantages" not in out
