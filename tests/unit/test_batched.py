"""Opponents of one architecture act in one stacked forward (games.batched): the same
distribution inputs as each one's own forward, for modules and store views alike."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.games.batched import batch_key, stacked_forward
from distrl.games.policies import LocalPolicy
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.store.policy_cache import PolicyCache, PolicySpec, flatten_policy

OBS = gym.spaces.Box(-1, 1, (3, 4), np.float32)


BOARD = gym.spaces.Box(0, 1, (6, 7, 2), np.int8)  # connect four's planes, channel last
FRAMES = gym.spaces.Box(0, 255, (2, 12, 12), np.uint8)


def modules(k, act_space, obs_space=OBS, **model):
    cfg = ModelConfig(hiddens=(16, 8), **model)
    out = []
    for seed in range(k):
        torch.manual_seed(seed)
        module = ActorCritic(obs_space, act_space, cfg).requires_grad_(False)
        if module.log_std is not None:
            module.log_std.copy_(torch.randn(module.log_std.shape))
        out.append(module)
    return out


def observations(space, *shape):
    if space.dtype == np.float32:
        return torch.randn(*shape, *space.shape)
    return torch.randint(0, int(space.high.max()) + 1, (*shape, *space.shape),
                         dtype=torch.from_numpy(space.sample()).dtype)


@pytest.mark.parametrize(("obs_space", "act_space", "model"), [
    (OBS, gym.spaces.Discrete(5), {}),
    (OBS, gym.spaces.Box(-1, 1, (2,), np.float32), {"free_log_std": True}),
    (OBS, gym.spaces.Box(-1, 1, (2,), np.float32),
     {"vf_share_layers": True, "activation": "relu"}),
    (BOARD, gym.spaces.Discrete(7), {"conv_filters": ((4, 4, 1), (3, 2, 1))}),
    (FRAMES, gym.spaces.Discrete(3), {"conv_filters": ((4, 4, 2),), "vf_share_layers": True}),
], ids=["discrete", "gaussian_free_log_std", "shared_layers_relu", "board_conv", "frames_conv"])
def test_a_stacked_forward_equals_each_policy_s_own(obs_space, act_space, model):
    nets = modules(6, act_space, obs_space, **model)
    obs = observations(obs_space, 6, 3)  # 6 policies, 3 seats each
    own = torch.cat([net(obs[k], value=False)[0] for k, net in enumerate(nets)])
    policies = [LocalPolicy(net) for net in nets]
    assert len({batch_key(p) for p in policies}) == 1
    torch.testing.assert_close(stacked_forward(policies, obs), own)


def test_store_views_stack_without_a_copy_of_their_own():
    """Read-only views of the node's shared buffers (policy_cache) stack as they are."""
    nets = modules(4, gym.spaces.Discrete(5))
    spec = PolicySpec(OBS, gym.spaces.Discrete(5), ModelConfig(hiddens=(16, 8)))
    cache = PolicyCache()
    views = [cache.put(f"p{k}", 1, spec, flatten_policy(net)) for k, net in enumerate(nets)]
    obs = torch.randn(4, 2, *OBS.shape)
    own = torch.cat([net(obs[k], value=False)[0] for k, net in enumerate(nets)])
    assert len({batch_key(v) for v in views}) == 1
    torch.testing.assert_close(stacked_forward(views, obs), own)


def test_what_cannot_stack_acts_alone():
    one_hot = LocalPolicy(ActorCritic(gym.spaces.Discrete(4), gym.spaces.Discrete(3),
                                      ModelConfig()))
    small, large = (LocalPolicy(ActorCritic(OBS, gym.spaces.Discrete(5),
                                            ModelConfig(hiddens=h))) for h in ((8,), (16,)))
    assert batch_key(one_hot) is None
    assert batch_key(small) != batch_key(large)
