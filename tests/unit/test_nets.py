import gymnasium as gym
import torch

from distrl import nets
from distrl.nets import ActorCritic, ModelConfig


def test_discrete_obs_with_start_one_hot_encodes_obs_minus_start():
    torch.manual_seed(0)
    act = gym.spaces.Discrete(2)
    plain = ActorCritic(gym.spaces.Discrete(3), act, ModelConfig(hiddens=(8,)))
    shifted = ActorCritic(gym.spaces.Discrete(3, start=5), act, ModelConfig(hiddens=(8,)))
    shifted.load_state_dict(plain.state_dict())
    for got, want in zip(shifted(torch.tensor([5, 6, 7])), plain(torch.tensor([0, 1, 2])),
                         strict=True):
        torch.testing.assert_close(got, want)


def test_discrete_start_is_the_offset_of_index_zero():
    assert nets.discrete_start(gym.spaces.Discrete(3, start=-2)) == -2
    assert nets.discrete_start(gym.spaces.Discrete(3)) == 0
    assert nets.discrete_start(gym.spaces.Box(-1, 1, (2,))) == 0


def test_load_state_dict_with_assign_recaches_the_forward_parameters():
    spaces = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(-1, 1, (2,))
    torch.manual_seed(0)
    model = ActorCritic(*spaces, ModelConfig())
    torch.manual_seed(1)
    other = ActorCritic(*spaces, ModelConfig())
    with torch.no_grad():
        other.log_std.fill_(-0.5)
    obs = torch.randn(3, 4)
    model.load_state_dict(other.state_dict(), assign=True)
    for got, want in zip(model(obs), other(obs), strict=True):
        torch.testing.assert_close(got, want)
    # The plain copy path keeps working too.
    torch.manual_seed(2)
    third = ActorCritic(*spaces, ModelConfig())
    model.load_state_dict(third.state_dict())
    for got, want in zip(model(obs), third(obs), strict=True):
        torch.testing.assert_close(got, want)
