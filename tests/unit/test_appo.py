"""APPO's pieces: the learner's view of a lagging fragment, the batch it trains on, and
the in-process sampler that overlaps with learning."""

import time

import numpy as np
import pytest
import torch

from distrl.appo.config import APPOConfig
from distrl.appo.loss import learner_view, train_batch
from distrl.appo.sampler import ThreadSampler
from distrl.core.returns import gae, vtrace
from distrl.models.config import ModelConfig
from distrl.models.recurrent import actor_critic
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.loss import clipped_surrogate
from distrl.store.policy_cache import FlatLayout, flatten_arrays


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
    sampler's policy or the learner's own before the update, as chosen; the targets
    and advantages are V-trace's from the learner-over-sampler ratios either way, the
    advantage unweighted when the surrogate's ratio to the sampler is the weight
    (checked against core.returns.vtrace directly)."""
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
                          view.logp - frag.logp, 0.99, 0.9,
                          clip_pg_rho=1.0 if clip_around == "learner" else None)
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


RHOS = np.array([0.25, 0.5, 1.0, 1.5, 3.0])


def _weights_on_log_pi(clip_around: str) -> np.ndarray:
    """The gradient of APPO's surrogate on log pi(a|x) at the update's first step, per
    unit of the TD error, for one-step episodes sampled with pi / mu = RHOS (hand-set
    sampler log-probs): the importance weight the loss applies."""
    r = runner(seed=2, num_envs=len(RHOS))
    frag = r.fragment(1)
    frag.valid[:], frag.terminated[:], frag.truncated[:] = True, True, False
    frag.rewards[:] = 1.0
    view = learner_view(r.model, frag, torch.device("cpu"))
    frag.logp = (view.logp - np.log(RHOS)).astype(np.float32)
    cfg = APPOConfig(num_env_runners=0, num_envs_per_env_runner=len(RHOS),
                     train_batch_size=len(RHOS), minibatch_size=len(RHOS),
                     rollout_fragment_length=1, advantage_normalization="none",
                     clip_around=clip_around)
    batch, _ = train_batch(r.model, [frag], cfg, torch.device("cpu"))
    logp = torch.tensor(view.logp[0], requires_grad=True)
    surrogate, _ = clipped_surrogate(logp, batch, cfg.clip_param)
    surrogate.sum().backward()
    td_error = 1.0 - view.values[0]  # r - V(x): every episode ends at its step
    return logp.grad.numpy() / td_error


def test_the_default_loss_weights_log_pi_once_as_impala():
    """IMPALA's policy gradient weighs grad log pi by min(rho_bar, rho); V-trace's
    advantage carries that weight, so a surrogate whose ratio is pi / mu again would
    apply rho * min(rho_bar, rho) (0.25 at rho 0.5; 0 at rho 1.5 once clipped)."""
    assert APPOConfig().clip_around == "learner"
    np.testing.assert_allclose(_weights_on_log_pi("learner"), np.minimum(1.0, RHOS),
                               rtol=1e-4)


def test_the_sampler_clipped_loss_weights_log_pi_by_its_clipped_ratio_alone():
    """clip_around="sampler": the ratio pi / mu is the one weight; PPO's clip zeroes it
    outside 1 +- clip_param (a positive advantage here: above 1 + clip_param)."""
    clip = APPOConfig().clip_param
    want = np.where(1 + clip >= RHOS, RHOS, 0.0)
    np.testing.assert_allclose(_weights_on_log_pi("sampler"), want, rtol=1e-4)
