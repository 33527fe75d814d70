import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.models import encoders as nets
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.models.encoders import ConvEncoder
from distrl.models.q_network import QNetwork
from distrl.store.policy_cache import PolicyCache, PolicySpec, flatten_policy

torch.set_num_threads(1)
FRAMES = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)  # FrameStackObservation's Atari obs
BOX = gym.spaces.Box(-1, 1, (4,), np.float32)


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


def outputs(x):
    """A network's outputs as a tuple: (dist inputs, values) or (Q-values,)."""
    return x if isinstance(x, tuple) else (x,)


def frames(n=2, shape=(4, 84, 84)):
    return torch.randint(0, 256, (n, *shape), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(0))


def test_q_network_one_hot_encodes_discrete_obs_minus_start():
    torch.manual_seed(0)
    plain = QNetwork(gym.spaces.Discrete(3), gym.spaces.Discrete(2), ModelConfig(hiddens=(8,)))
    shifted = QNetwork(gym.spaces.Discrete(3, start=5), gym.spaces.Discrete(2),
                       ModelConfig(hiddens=(8,)))
    shifted.load_state_dict(plain.state_dict())
    torch.testing.assert_close(shifted(torch.tensor([5, 6, 7])), plain(torch.tensor([0, 1, 2])))


def test_q_network_dueling_combines_value_and_mean_centred_advantages():
    net = QNetwork(BOX, gym.spaces.Discrete(3), ModelConfig(hiddens=(8, 8), activation="relu"))
    obs = torch.randn(5, 4)
    h = torch.relu(net.hidden[1](torch.relu(net.hidden[0](obs))))
    a, v = net.advantage(h), net.value(h)
    torch.testing.assert_close(net(obs), v + a - a.mean(-1, keepdim=True))
    assert net.greedy(obs).tolist() == net(obs).argmax(-1).tolist()
    plain = QNetwork(BOX, gym.spaces.Discrete(3), ModelConfig(hiddens=(8,)), dueling=False)
    assert plain.value is None
    torch.testing.assert_close(plain(obs), plain.advantage(torch.tanh(plain.hidden[0](obs))))


def test_q_network_needs_discrete_actions_and_no_observation_filter():
    with pytest.raises(ValueError, match=r"DQN needs a Discrete action space.*PPO"):
        QNetwork(BOX, gym.spaces.Box(-1, 1, (2,)), ModelConfig())
    with pytest.raises(ValueError, match="NoFilter"):
        QNetwork(BOX, gym.spaces.Discrete(2), ModelConfig(observation_filter="MeanStdFilter"))


def test_image_observations_get_the_nature_conv_stack_by_default():
    net = QNetwork(FRAMES, gym.spaces.Discrete(6), ModelConfig(hiddens=(512,)))
    assert isinstance(net.encoder, ConvEncoder)
    assert [tuple(c.weight.shape) for c in net.encoder.convs] == [
        (32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3)]
    assert net.encoder.out_dim == 64 * 7 * 7  # 84 -> 20 -> 9 -> 7
    assert net.encoder(frames()).shape == (2, 64 * 7 * 7)
    assert net(frames()).shape == (2, 6)


def test_custom_conv_filters_and_grey_frames():
    cfg = ModelConfig(hiddens=(32,), conv_filters=((8, 8, 4), (8, 4, 2)))
    small = ActorCritic(FRAMES, gym.spaces.Discrete(6), cfg)
    assert small.encoder.out_dim == 8 * 9 * 9
    assert small.encoder(frames()).shape == (2, 8 * 9 * 9)
    dist_inputs, values = small(frames())
    assert dist_inputs.shape == (2, 6) and values.shape == (2,)
    grey = QNetwork(gym.spaces.Box(0, 255, (84, 84), np.uint8), gym.spaces.Discrete(3), cfg)
    assert grey.encoder.in_shape == (1, 84, 84) and grey(frames(shape=(84, 84))).shape == (2, 3)


def test_uint8_frames_are_scaled_like_float_frames_over_255():
    obs = frames()
    for net in (QNetwork(FRAMES, gym.spaces.Discrete(6), ModelConfig(hiddens=(16,))),
                ActorCritic(FRAMES, gym.spaces.Discrete(6), ModelConfig(hiddens=(16,)))):
        for got, want in zip(outputs(net(obs)), outputs(net(obs / 255.0)), strict=True):
            torch.testing.assert_close(got, want)


def test_conv_activation_is_applied_after_each_conv():
    space, obs = gym.spaces.Box(0, 255, (2, 12, 12), np.uint8), frames(4, (2, 12, 12))
    relu = ConvEncoder(space, ((4, 3, 1), (4, 3, 1)), "relu")
    tanh = ConvEncoder(space, ((4, 3, 1), (4, 3, 1)), "tanh")
    tanh.load_state_dict(relu.state_dict())
    x = obs / 255.0
    for enc, act in ((relu, torch.relu), (tanh, torch.tanh)):
        (c0, c1) = enc.convs
        torch.testing.assert_close(enc(obs), act(c1(act(c0(x)))).flatten(1))
    cfg = ModelConfig(conv_filters=((4, 3, 1),), conv_activation="tanh")
    assert QNetwork(space, gym.spaces.Discrete(2), cfg).encoder.activation is torch.tanh


def test_channel_last_images_are_transposed():
    last = ConvEncoder(gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), ((4, 8, 4),))
    first = ConvEncoder(gym.spaces.Box(0, 255, (3, 84, 84), np.uint8), ((4, 8, 4),))
    first.load_state_dict(last.state_dict())
    obs = frames(2, (84, 84, 3))
    assert last.channels_last and not first.channels_last
    torch.testing.assert_close(last(obs), first(obs.permute(0, 3, 1, 2)))


def test_given_conv_filters_encode_a_board_and_a_flat_box_stays_flat():
    """Connect four's (6, 7, 2) int8 planes: with conv_filters a 4x4 conv over the
    board (channel last, like an RGB frame: 3 x 4 positions), without them the MLP."""
    board = gym.spaces.Box(0, 1, (6, 7, 2), np.int8)
    conv = ActorCritic(board, gym.spaces.Discrete(7), ModelConfig(conv_filters=((8, 4, 1),)))
    assert conv.encoder is not None and conv.encoder.channels_last
    assert conv.encoder.out_dim == 8 * 3 * 4
    x = torch.randint(0, 2, (5, 6, 7, 2), dtype=torch.int8)
    manual = torch.relu(torch.nn.functional.conv2d(x.float().permute(0, 3, 1, 2),
                                                   conv.encoder.convs[0].weight,
                                                   conv.encoder.convs[0].bias))
    torch.testing.assert_close(conv.encoder(x), manual.flatten(1))
    assert ActorCritic(board, gym.spaces.Discrete(7), ModelConfig()).encoder is None
    assert ActorCritic(BOX, gym.spaces.Discrete(2),
                       ModelConfig(conv_filters=((8, 4, 1),))).encoder is None


def test_too_small_images_and_bad_conv_filters_are_refused():
    with pytest.raises(ValueError, match=r"too small for conv_filters.*smaller kernels"):
        ActorCritic(gym.spaces.Box(0, 255, (5, 5), np.uint8), gym.spaces.Discrete(2),
                    ModelConfig())
    with pytest.raises(ValueError, match="conv_filters"):
        ModelConfig(conv_filters=((32, 8),))


def test_flat_actor_critic_keeps_its_state_dict_names():
    net = ActorCritic(BOX, gym.spaces.Discrete(2), ModelConfig())
    assert net.encoder is None
    assert list(net.state_dict()) == [
        f"{g}.{i}.{p}" for g in ("pi", "vf") for i in range(3) for p in ("weight", "bias")]
    conv = ActorCritic(FRAMES, gym.spaces.Discrete(2), ModelConfig(hiddens=(8,)))
    assert list(conv.state_dict())[:6] == [
        f"encoder.convs.{i}.{p}" for i in range(3) for p in ("weight", "bias")]


@pytest.mark.parametrize("builder", ["actor_critic", "q_network", "dueling_q_network"])
@pytest.mark.parametrize("obs_space", [BOX, FRAMES], ids=["flat", "frames"])
def test_weights_from_params_replace_the_module_own(builder, obs_space):
    """The policy cache acts with one skeleton and read-only views of another policy's
    weights: the output must be that policy's, for flat and conv nets alike."""
    spec = PolicySpec(obs_space, gym.spaces.Discrete(3),
                      ModelConfig(hiddens=(16,), conv_filters=((8, 8, 4), (8, 3, 2))), builder)
    torch.manual_seed(1)
    policy = spec.build()
    obs = frames(3) if obs_space is FRAMES else torch.randn(3, 4)
    cached = PolicyCache().put("p", 1, spec, flatten_policy(policy))
    for got, want in zip(outputs(cached(obs)), outputs(policy(obs)), strict=True):
        torch.testing.assert_close(got, want)


def test_q_network_load_state_dict_with_assign_recaches_the_forward_parameters():
    q = QNetwork(BOX, gym.spaces.Discrete(2), ModelConfig(hiddens=(8,)))
    other = QNetwork(BOX, gym.spaces.Discrete(2), ModelConfig(hiddens=(8,)))
    q.load_state_dict(other.state_dict(), assign=True)  # new parameter objects: re-cached
    torch.testing.assert_close(q(torch.ones(1, 4)), other(torch.ones(1, 4)))
