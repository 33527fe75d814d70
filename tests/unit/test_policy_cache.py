import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from distrl.models.actor_critic import ActorCritic
from distrl.models.builders import register_builder
from distrl.models.config import ModelConfig
from distrl.store.policy_cache import FlatLayout, PolicyCache, PolicySpec, flatten_policy

BOX = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
CARTPOLE = PolicySpec(BOX, gym.spaces.Discrete(2))
PENDULUM = PolicySpec(gym.spaces.Box(-1, 1, (3,), np.float32),
                      gym.spaces.Box(-2, 2, (1,), np.float32), ModelConfig(hiddens=(32,)))


class TinyLinear(nn.Module):
    """A stand-in for a Q-network: one Linear layer, weights read from ``params``."""

    def __init__(self, obs_space, act_space, model_config):
        super().__init__()
        self.fc = nn.Linear(obs_space.shape[0], act_space.n)

    def forward(self, obs, params=None):
        p = dict(self.fc.named_parameters(prefix="fc")) if params is None else params
        return F.linear(obs, p["fc.weight"], p["fc.bias"])


register_builder("test_linear", TinyLinear)
TINY = PolicySpec(BOX, gym.spaces.Discrete(2), builder="test_linear")


@pytest.mark.parametrize("spec", [
    CARTPOLE, PENDULUM,
    PolicySpec(BOX, gym.spaces.Discrete(3), ModelConfig(hiddens=(16, 8), vf_share_layers=True)),
])
def test_view_module_matches_a_module_with_copied_weights(spec):
    torch.manual_seed(0)
    source = spec.build()
    cache = PolicyCache()
    cached = cache.put("p", 1, spec, flatten_policy(source))
    copy = spec.build()
    copy.load_state_dict(source.state_dict())
    obs = torch.randn(7, spec.obs_space.shape[0])
    with torch.no_grad():
        for a, b in zip(cached(obs), copy(obs), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)  # alignment may change SIMD


def test_views_share_the_flat_buffer():
    flat = flatten_policy(CARTPOLE.build())
    flat.flags.writeable = False  # as Ray hands it out
    cached = PolicyCache().put("p", 1, CARTPOLE, flat)
    lo = flat.ctypes.data
    hi = lo + flat.nbytes
    for t in cached.params.values():
        assert lo <= t.const_data_ptr() < hi  # every parameter lies inside the one buffer
    writable = flatten_policy(CARTPOLE.build())
    cached = PolicyCache().put("q", 1, CARTPOLE, writable)
    before = cached(torch.ones(1, 4))[0].clone()
    writable[:] = 0.0  # the module sees the buffer change: nothing was copied
    assert not torch.equal(cached(torch.ones(1, 4))[0], before)
    torch.testing.assert_close(cached(torch.ones(1, 4))[0], torch.zeros(1, 2))


def test_version_logic():
    cache = PolicyCache()
    assert cache.version("a") == -1
    assert cache.stale({"a": 0, "b": 3}) == ["a", "b"]
    v1 = flatten_policy(CARTPOLE.build())
    cache.put("a", 2, CARTPOLE, v1)
    assert cache.stale({"a": 2}) == [] and cache.stale({"a": 3}) == ["a"]
    older = cache.put("a", 1, CARTPOLE, np.zeros_like(v1))  # late, older message: ignored
    assert older.version == 2 and older.flat is v1


def test_lru_eviction_and_shared_skeletons():
    cache = PolicyCache(max_cached_policies=2)
    flat = flatten_policy(CARTPOLE.build())
    a = cache.put("a", 1, CARTPOLE, flat)
    b = cache.put("b", 1, CARTPOLE, flat.copy())
    assert a.skeleton is b.skeleton  # one skeleton per architecture
    cache.get("a")  # a is now the most recently used
    cache.put("c", 1, PENDULUM, flatten_policy(PENDULUM.build()))
    assert "a" in cache and "c" in cache and "b" not in cache and len(cache) == 2
    assert cache.get("c").skeleton is not a.skeleton  # heterogeneous policies
    with pytest.raises(ValueError, match="max_cached_policies"):
        PolicyCache(0)


def test_layout_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="does not match its weights"):
        PolicyCache().put("p", 1, CARTPOLE, flatten_policy(PENDULUM.build()))


def test_layout_round_trip():
    model = ActorCritic(BOX, gym.spaces.Discrete(2), ModelConfig())
    layout = FlatLayout.of(model)
    assert layout.size == sum(p.numel() for p in model.parameters())
    views = layout.views(layout.flatten(model.state_dict()))
    for k, v in model.state_dict().items():
        torch.testing.assert_close(views[k], v)


def test_a_registered_builder_makes_the_skeleton():
    torch.manual_seed(0)
    source = TINY.build()
    cache = PolicyCache()
    cached = cache.put("q", 1, TINY, flatten_policy(source))
    assert isinstance(cached.skeleton, TinyLinear) and set(cached.params) == {"fc.weight",
                                                                              "fc.bias"}
    obs = torch.randn(5, 4)
    with torch.no_grad():
        torch.testing.assert_close(cached(obs), source(obs))
    # Same spaces and config as CARTPOLE, other builder: another skeleton.
    assert TINY.key() != CARTPOLE.key()
    assert cache.put("pi", 1, CARTPOLE, flatten_policy(CARTPOLE.build())).skeleton is not (
        cached.skeleton)


def test_unknown_builder_is_a_clear_error():
    with pytest.raises(ValueError, match=r"'nope'.*'actor_critic', 'dueling_q_network'"):
        PolicySpec(BOX, gym.spaces.Discrete(2), builder="nope")
    with pytest.raises(ValueError, match="already registered"):
        register_builder("actor_critic", TinyLinear)
    register_builder("test_linear", TinyLinear)  # the same builder again: a no-op


WRITES = {
    "add_": lambda t: t.add_(1.0),
    "zero_": lambda t: t.zero_(),
    "copy_": lambda t: t.copy_(torch.ones_like(t)),
    "setitem": lambda t: t.__setitem__(0, 2.0),
}


@pytest.mark.parametrize("mode", [torch.inference_mode, torch.no_grad, torch.enable_grad])
def test_views_refuse_in_place_writes(mode):
    flat = flatten_policy(CARTPOLE.build())
    flat.flags.writeable = False  # stands in for the array ray.get maps from shared memory
    before = flat.copy()
    cached = PolicyCache().put("p", 1, CARTPOLE, flat)
    expected = cached(torch.ones(3, 4))[0].detach().clone()
    with mode():
        for name, write in WRITES.items():
            for view in (cached.params["pi.0.weight"], cached.params["vf.1.bias"]):
                with pytest.raises(RuntimeError):
                    write(view)
                    pytest.fail(f"{name} wrote through a view")
        out = cached(torch.ones(3, 4))[0]  # acting still works in this mode
    np.testing.assert_array_equal(flat, before)
    torch.testing.assert_close(out, expected)
