"""Every validation rule raises a ValueError that says what to change."""

from dataclasses import replace

import gymnasium as gym
import pytest

from distrl.core.config import RunConfig
from distrl.envs.make import check_env_id
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.models.encoders import check_spaces
from distrl.ppo.config import PPOConfig
from distrl.tuned import TUNED


@pytest.mark.parametrize("kwargs,match", [
    (dict(minibatch_size=512, train_batch_size=256), r"minibatch_size.*<= `train_batch_size`"),
    (dict(use_critic=False), "only a value function can estimate"),
    (dict(entropy_coeff=-0.01), r"entropy_coeff.*>= 0"),
    (dict(entropy_coeff=((0, 0.01), (100, -0.1))), r"entropy_coeff.*>= 0"),
    (dict(entropy_coeff=((0, 0.01, 3),)), r"\[timestep, value\] pair"),
    (dict(lr_schedule=((100, 1e-3), (50, 1e-4))), "strictly increasing"),
    (dict(lr_schedule=()), "empty"),
    (dict(train_batch_size=0), r"`train_batch_size` \(0\) must be > 0"),
    (dict(minibatch_size=-1), r"`minibatch_size` \(-1\) must be > 0"),
    (dict(num_epochs=0), r"`num_epochs` \(0\) must be > 0"),
    (dict(lr=0.0), r"`lr` \(0.0\) must be > 0"),
    (dict(clip_param=0.0), r"`clip_param`"),
    (dict(vf_clip_param=0.0), r"`vf_clip_param`.*or None"),
    (dict(gamma=1.5), r"`gamma`.*\[0, 1\]"),
    (dict(lambda_=-0.1), r"`lambda_`.*\[0, 1\]"),
    (dict(grad_clip=0.0), r"`grad_clip`.*None to disable"),
    (dict(kl_coeff=-1.0), "kl_coeff"),
    (dict(rollout_fragment_length=0), r"rollout_fragment_length.*'auto'"),
    (dict(num_env_runners=-1), "0 = sample in-process"),
    (dict(num_envs_per_env_runner=0), "num_envs_per_env_runner"),
    (dict(lr_schedule=((0, 1e-3), (100, 0.0))), r"`lr_schedule` value 0\.0 .*must be > 0"),
    (dict(lr_schedule=[[0, -1e-3]]), r"`lr_schedule` value -0\.001 .*must be > 0"),
    (dict(entropy_coeff=[0.01]), r"\[timestep, value\] pair"),
    (dict(lr_schedule=[[0, "big"]]), r"`lr_schedule` entry \[0, 'big'\].*numbers"),
])
def test_ppo_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PPOConfig(**kwargs)


def test_model_config_errors():
    with pytest.raises(ValueError, match=r"\(\) only with use_lstm"):
        ModelConfig(hiddens=())
    with pytest.raises(ValueError, match="hiddens"):
        ModelConfig(hiddens=(64, 0))
    with pytest.raises(ValueError, match="needs use_lstm"):
        ModelConfig(lstm_head_hiddens=(64,))
    with pytest.raises(ValueError, match="lstm_head_hiddens"):
        ModelConfig(use_lstm=True, lstm_head_hiddens=(0,))
    assert ModelConfig(use_lstm=True, hiddens=(), lstm_head_hiddens=(64,)).hiddens == ()


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_env_steps=0), "max_env_steps"),
    (dict(checkpoint_every=-2), "checkpoint_every"),
])
def test_run_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RunConfig(**kwargs)


def test_unknown_env_id_suggests_close_names():
    with pytest.raises(ValueError, match=r"env id 'CartPol-v1'.*Did you mean 'CartPole-v1'"):
        check_env_id("CartPol-v1")
    with pytest.raises(ValueError, match="not registered") as err:
        check_env_id("TotallyUnrelatedThing-v9")
    assert "Did you mean" not in str(err.value)
    check_env_id("CartPole-v1")  # no error


@pytest.mark.parametrize("obs,act,match", [
    (gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), gym.spaces.Discrete(2), "FlattenObservation"),
    (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2, 2)), "must be 1-D"),
    (gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiBinary(3), "Discrete or a 1-D Box"),
])
def test_space_mismatch_errors(obs, act, match):
    with pytest.raises(ValueError, match=match):
        check_spaces(obs, act)
    with pytest.raises(ValueError, match=match):
        ActorCritic(obs, act, ModelConfig())


def test_auto_fragment_length_fills_the_batch():
    cfg = PPOConfig(train_batch_size=1024, minibatch_size=256, num_env_runners=2,
                    num_envs_per_env_runner=8)
    assert cfg.fragment_length() == 64
    assert replace(cfg, num_env_runners=0, num_envs_per_env_runner=16).fragment_length() == 64
    assert replace(cfg, rollout_fragment_length=64).fragment_length() == 64


def test_auto_fragment_refuses_a_batch_the_envs_cannot_split_evenly():
    # ceil(2048 / 24) = 86 steps per env would silently sample 2064, not 2048.
    with pytest.raises(ValueError, match=r"multiple of .*3 x 8 = 24.*2040 or 2064"):
        PPOConfig(train_batch_size=2048, num_env_runners=3, num_envs_per_env_runner=8)
    with pytest.raises(ValueError, match=r"1 x 48 = 48.*train_batch_size=48"):  # none below
        PPOConfig(train_batch_size=32, minibatch_size=32, num_env_runners=0,
                  num_envs_per_env_runner=48)


def test_explicit_fragment_must_fill_the_batch_exactly():
    # 10 steps x 16 envs = 160 samples: train_batch_size (1024) was silently ignored.
    with pytest.raises(ValueError, match=r"10 x 2 x 8 = 160.*train_batch_size=160.*'auto'"):
        PPOConfig(train_batch_size=1024, rollout_fragment_length=10)
    with pytest.raises(ValueError, match=r"train_batch_size=160") as err:
        PPOConfig(train_batch_size=1000, rollout_fragment_length=10)
    assert "rollout_fragment_length=6" not in str(err.value)  # 1000 / 16 is no whole fragment
    cfg = PPOConfig(train_batch_size=160, rollout_fragment_length=10, minibatch_size=80)
    assert cfg.fragment_length() * 16 == cfg.train_batch_size


@pytest.mark.parametrize("name", sorted(TUNED))
@pytest.mark.parametrize("runners", [0, 1, 2, 4])
def test_tuned_entries_fill_their_batch_exactly(name, runners):
    cfg = TUNED[name].for_runners(runners)
    envs = max(runners, 1) * cfg.num_envs_per_env_runner
    assert cfg.fragment_length() * envs == cfg.train_batch_size


@pytest.mark.parametrize("field,as_list,as_tuple", [
    ("entropy_coeff", [[0, 0.01], [1e5, 0]], ((0.0, 0.01), (1e5, 0.0))),
    ("lr_schedule", [[0, 1e-3], [1e5, 1e-4]], ((0.0, 1e-3), (1e5, 1e-4))),
    ("lr_schedule", ([0, 1e-3], (1e5, 1e-4)), ((0.0, 1e-3), (1e5, 1e-4))),
])
def test_list_schedules_become_hashable_tuples(field, as_list, as_tuple):
    cfg = PPOConfig(**{field: as_list})
    assert getattr(cfg, field) == as_tuple
    assert all(type(v) is float for point in getattr(cfg, field) for v in point)
    assert cfg == PPOConfig(**{field: as_tuple})
    assert hash(cfg) == hash(PPOConfig(**{field: as_tuple}))
    at = cfg.entropy_coeff_at if field == "entropy_coeff" else cfg.lr_at
    assert at(50_000) == pytest.approx((as_tuple[0][1] + as_tuple[1][1]) / 2)


def _configs():
    """Every config dataclass a user builds, at its defaults."""
    from distrl.league.config import Magnet
    from distrl.registry import ALGORITHMS

    return [a.config() for a in ALGORITHMS.values()] + [RunConfig(), ModelConfig(), Magnet()]


def test_every_literal_field_refuses_a_value_outside_its_choices():
    """As the CLI does: from Python, RunConfig(stop_on="evall") trained as on "train"."""
    import dataclasses
    import typing

    checked = []
    for config in _configs():
        hints = typing.get_type_hints(type(config))
        for field in dataclasses.fields(config):
            if "Literal" not in str(hints[field.name]):
                continue
            with pytest.raises(ValueError, match=rf"^`{field.name}` \('no-such'\) must be one "
                               "of '"):
                replace(config, **{field.name: "no-such"})
            checked.append(f"{type(config).__name__}.{field.name}")
    assert {"RunConfig.stop_on", "RunConfig.vector_mode", "ModelConfig.activation",
            "PPOConfig.advantage_normalization", "APPOConfig.clip_around",
            "DDPPOConfig.backend", "Magnet.regulariser"} <= set(checked)
    with pytest.raises(ValueError, match=r"\(did you mean 'eval'\?\)\.$"):
        RunConfig(stop_on="evall")
    assert replace(PPOConfig(), rollout_fragment_length=128).rollout_fragment_length == 128
    assert ModelConfig(vf_activation=None).vf_activation is None
