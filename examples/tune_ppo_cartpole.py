"""A Ray Tune sweep over PPO's learning rate and batch size on CartPole-v1.

    python examples/tune_ppo_cartpole.py [--samples 1] [--max-env-steps 100000]

Each trial is one train_ppo run (in-process sampling, so trials run side by side, one CPU
each); Tune sees every iteration's metrics and keeps the checkpoints distrl saves.
"""

from __future__ import annotations

import argparse
import os

from distrl.tune import trainable


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--max-env-steps", type=int, default=100_000)
    args = ap.parse_args()
    # Token authentication, Ray's default for a new local cluster, set explicitly (before
    # Ray is imported): Ray then starts without its notice about it.
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray
    from ray import tune

    ray.init()
    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={
            "env": "CartPole-v1", "num_env_runners": 0, "num_envs_per_env_runner": 8,
            "stop_return": 475.0, "max_env_steps": args.max_env_steps,
            "checkpoint_every": 10, "progress": False, "use_kl_loss": False,
            "lr": tune.grid_search([1e-3, 3e-3]),
            "train_batch_size": tune.grid_search([512, 1024]),
            "minibatch_size": 256, "num_epochs": 6,
        },
        tune_config=tune.TuneConfig(metric="env/episode_return_mean", mode="max",
                                    num_samples=args.samples),
    )
    best = tuner.fit().get_best_result()
    print("best:", {k: best.config[k] for k in ("lr", "train_batch_size")},
          "return", best.metrics["env/episode_return_mean"],
          "after", best.metrics["env/steps_total"], "env steps")


if __name__ == "__main__":
    main()
