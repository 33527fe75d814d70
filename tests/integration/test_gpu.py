"""GPU paths: the PPO, Ape-X and AlphaZero learners on CUDA, league learners on
fractional GPUs, DD-PPO over nccl. They run where torch sees CUDA devices and skip with
the reason elsewhere (this project's reference machine has none)."""

from dataclasses import replace

import pytest
import torch

from distrl import (
    AlphaZeroConfig,
    ApexConfig,
    DDPPOConfig,
    ModelConfig,
    PPOConfig,
    RunConfig,
    train_alphazero,
    train_apex,
    train_ddppo,
    train_league,
    train_ppo,
)
from distrl.core.checkpoint import Checkpoint

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: the GPU paths need one")
TWO_GPUS = pytest.mark.skipif(torch.cuda.device_count() < 2,
                              reason="nccl needs a GPU per rank: two GPUs")
TINY = ModelConfig(hiddens=(16,))


def cpu_weights(result: dict) -> dict[str, torch.Tensor]:
    """Saved weights are CPU tensors whatever device trained them (a checkpoint from a GPU
    run evaluates on a laptop)."""
    weights = Checkpoint(result["checkpoint"]).tensors("policy", "weights.pt")
    assert {t.device.type for t in weights.values()} == {"cpu"}
    assert all(torch.isfinite(t).all() for t in weights.values() if t.is_floating_point())
    return weights


def test_ppo_learner_trains_on_cuda(tmp_path):
    result = train_ppo(PPOConfig(num_env_runners=0, rollout_fragment_length=64,
                                 train_batch_size=512, minibatch_size=32, model=TINY),
                       RunConfig(device="cuda", max_env_steps=512, logdir=str(tmp_path),
                                 progress=False))
    assert result["env/steps_total"] >= 512
    cpu_weights(result)


def test_apex_learner_trains_on_cuda(tmp_path):
    config = ApexConfig(num_workers=0, learning_starts=200, capacity=5_000,
                        train_batch_size=32, model=TINY)
    result = train_apex(config, RunConfig(device="cuda", max_env_steps=1_000,
                                          logdir=str(tmp_path), progress=False))
    assert result["learner/trained_total"] > 0
    cpu_weights(result)


def test_alphazero_searches_and_learns_on_cuda_and_resumes_on_cpu(tmp_path):
    """In process, self-play's leaf batches go through the learner's CUDA network (CPU
    inputs would fail there); the checkpoint then resumes on the CPU."""
    pytest.importorskip("pyspiel")
    config = AlphaZeroConfig(num_games=8, num_simulations=8, learning_starts=64,
                             train_batch_size=32, moves_per_iteration=64, eval_interval=2,
                             eval_games=4, model=TINY)
    result = train_alphazero(config, RunConfig(env="openspiel:tic_tac_toe", device="cuda",
                                               max_env_steps=256, logdir=str(tmp_path / "a"),
                                               progress=False))
    assert result["iteration"] == 4 and "learner/value_loss" in result
    cpu_weights(result)
    resumed = train_alphazero(config, RunConfig(resume=result["checkpoint"], device="cpu",
                                                max_env_steps=320, logdir=str(tmp_path / "b"),
                                                progress=False))
    assert resumed["iteration"] == 5 and resumed["learner/value_loss"] >= 0


def test_league_state_critic_trains_on_cuda():
    """A league learner on CUDA with a state critic: the critic lives and trains on the
    device, the advantages it makes come back to the host, its saved state is on CPU."""
    pytest.importorskip("pyspiel")
    from distrl import LeagueConfig
    from distrl.games.games import make_multiagent_env, policy_obs_space
    from distrl.games.matches import MatchLoop
    from distrl.games.policies import RandomPolicy
    from distrl.league.trainer import LeagueTrainer

    envs = [make_multiagent_env("openspiel:kuhn_poker") for _ in range(4)]
    spaces = (policy_obs_space(envs[0].observation_space("player_0")),
              envs[0].action_space("player_0"))
    loop = MatchLoop(envs, lambda i: {"player_0": "A", "player_1": "A"}, seed=0,
                     critic_states=True)
    rollout = loop.collect({"A": RandomPolicy(2)}.__getitem__, {"A"}, 256, 1.0, 1.0
                           ).rollouts["A"]
    config = LeagueConfig(model=TINY, state_critic=True, minibatch_size=64,
                          num_epochs=2, gamma=1.0)
    trainer = LeagueTrainer(*spaces, config, device="cuda")
    metrics = trainer.update(rollout)
    metrics.update(trainer.update(rollout))
    assert next(trainer.critic.model.parameters()).is_cuda and metrics["critic_loss"] > 0
    saved = trainer.get_state()["critic"]["model"]
    assert {t.device.type for t in saved.values()} == {"cpu"}


def test_league_learners_share_one_gpu_on_ray(ray_local, tmp_path):
    from tests.integration.test_league_ray import CONFIG, GAME

    result = train_league(replace(CONFIG, num_gpus_for_learners=0.9),
                          RunConfig(env=GAME, logdir=str(tmp_path), progress=False,
                                    max_env_steps=1_000))
    assert result["env/steps_total"] >= 1_000 and result["league/num_policies"] >= 3


@TWO_GPUS
def test_ddppo_allreduces_over_nccl(ray_local, tmp_path):
    config = DDPPOConfig(num_workers=2, num_gpus_per_worker=1, backend="nccl",
                         num_envs_per_worker=2, rollout_fragment_length=16, minibatch_size=8,
                         model=TINY)
    result = train_ddppo(config, RunConfig(max_env_steps=128, logdir=str(tmp_path),
                                           progress=False))
    assert result["ddppo/world_size"] == 2
    cpu_weights(result)
