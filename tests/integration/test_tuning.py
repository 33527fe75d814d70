"""Ray Tune: a 2-trial sweep over PPO on CartPole finishes and reports distrl's metrics."""

import pytest

from distrl.tune import split_params, trainable

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_two_trial_sweep_reports_every_iteration(ray_local, tmp_path):
    tune = pytest.importorskip("ray.tune")
    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={"env": "CartPole-v1", "num_env_runners": 0, "num_envs_per_env_runner": 2,
                     "train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1,
                     "max_env_steps": 512, "checkpoint_every": 2, "progress": False,
                     "hiddens": [32, 32], "lr": tune.grid_search([1e-3, 3e-3])},
        tune_config=tune.TuneConfig(metric="env/episode_return_mean", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert sorted(r.config["lr"] for r in results) == [1e-3, 3e-3]
    for r in results:
        assert r.metrics["env/steps_total"] >= 512
        assert r.metrics["iteration"] == 4  # one report per iteration
        assert r.metrics["env/episode_return_mean"] > 0
        assert r.checkpoint is not None  # every 2nd iteration saved one
    assert results.get_best_result().metrics["env/episode_return_mean"] == max(
        r.metrics["env/episode_return_mean"] for r in results)


def test_unknown_parameters_list_the_valid_ones():
    config, run = split_params("ppo", {"lr": 0.01, "hiddens": [8], "seed": 3})
    assert config.lr == 0.01 and config.model.hiddens == (8,) and run.seed == 3
    with pytest.raises(ValueError, match=r"unknown parameter 'lr_typo' for ppo; valid: .*'lr'"):
        split_params("ppo", {"lr_typo": 1.0})
