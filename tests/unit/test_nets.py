import gymnasium as gym
import numpy as np
import pytest
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


def test_q_network_dueling_combines_value_and_mean_centred_advantages():
    from distrl.nets import QNetwork

    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    net = QNetwork(space, gym.spaces.Discrete(3), ModelConfig(hiddens=(8,), activation="relu"))
    obs = torch.randn(5, 4)
    h = torch.relu(net.hidden[0](obs))
    a, v = net.advantage(h), net.value(h)
    assert torch.allclose(net(obs), v + a - a.mean(-1, keepdim=True), atol=1e-6)
    assert net.greedy(obs).tolist() == net(obs).argmax(-1).tolist()
    plain = QNetwork(space, gym.spaces.Discrete(3), ModelConfig(hiddens=(8,)), dueling=False)
    assert plain.value is None and plain(obs).shape == (5, 3)


def test_q_network_needs_discrete_actions():
    from distrl.nets import QNetwork

    with pytest.raises(ValueError, match=r"DQN needs a Discrete action space.*PPO"):
        QNetwork(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(-1, 1, (2,)), ModelConfig())


def test_image_observations_get_the_nature_conv_stack_and_are_scaled():
    from distrl.nets import ConvEncoder, QNetwork

    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    net = QNetwork(frames, gym.spaces.Discrete(6), ModelConfig(hiddens=(512,)))
    assert isinstance(net.encoder, ConvEncoder)
    assert net.encoder.out_dim == 64 * 7 * 7  # Nature DQN: 84 -> 20 -> 9 -> 7
    obs = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    assert net(obs).shape == (2, 6)
    scaled = net.encoder.convs(obs.float() / 255.0)
    assert torch.allclose(net.encoder(obs), scaled)
    small = ActorCritic(frames, gym.spaces.Discrete(6),
                        ModelConfig(hiddens=(32,), conv_filters=((8, 8, 4), (8, 4, 2))))
    assert small.encoder.out_dim == 8 * 9 * 9
    dist_inputs, values = small(obs)
    assert dist_inputs.shape == (2, 6) and values.shape == (2,)


def test_channel_last_images_are_transposed():
    from distrl.nets import ConvEncoder

    enc = ConvEncoder(gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), ((4, 8, 4),))
    obs = torch.randint(0, 256, (2, 84, 84, 3), dtype=torch.uint8)
    expected = enc.convs(obs.permute(0, 3, 1, 2).float() / 255.0)
    assert torch.allclose(enc(obs), expected)


def test_flat_actor_critic_keeps_its_state_dict_names():
    net = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), ModelConfig())
    assert net.encoder is None
    assert sorted(net.state_dict()) == sorted(
        f"{g}.{i}.{p}" for g in ("pi", "vf") for i in range(3) for p in ("weight", "bias"))


def test_bad_conv_filters_are_refused():
    with pytest.raises(ValueError, match="conv_filters"):
        ModelConfig(conv_filters=((32, 8),))
