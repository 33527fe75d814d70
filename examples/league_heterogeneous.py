"""RLlib issue #21459's league on distrl: different spaces and models in one league, a new
challenger every iteration, and one policy store per node.

    python examples/league_heterogeneous.py [--iterations 10] [--runners 2]

A champion learns CartPole. Each iteration a new, frozen challenger joins: even ones play
CartPole, odd ones MountainCarContinuous (another observation space, a continuous action
space, so another model). The two agents of ChampionVsChallenger each play their own
single-agent env side by side, as in the issue's ExampleSwitchingEnv; the challenger's
env is whichever its policy plays, set up at reset from ``options["policies"]``.

What #21459 asked for and this shows:
- the new challenger plays from the next reset of each game, in the same iteration (the
  issue's runners switched only after the first episode of the next iteration);
- runners read every policy from their node's PolicyStore through zero-copy views, so a
  new challenger costs a runner no copy of its weights;
- only the champion trains (DistributedLearners); challengers are published frozen.
The last line is JSON: per iteration, the challenger, its env, the share of that
iteration's episodes it played, the champion's mean return and the store's size.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import gymnasium as gym
import numpy as np
import ray

from distrl.league.config import LeagueConfig
from distrl.league.learners import DistributedLearners
from distrl.league.remote import MatchRunner, MatchSetup
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.runtime.cluster import actor_class, init_ray
from distrl.store.policy_cache import PolicySpec, flatten_policy
from distrl.store.remote import publish

CARTPOLE, MOUNTAIN_CAR = "CartPole-v1", "MountainCarContinuous-v0"


def challenger_env(policy_id: str) -> str:
    """challenger_<k> plays CartPole for even k, MountainCarContinuous for odd k."""
    return CARTPOLE if int(policy_id.rsplit("_", 1)[1]) % 2 == 0 else MOUNTAIN_CAR


class ChampionVsChallenger:
    """Two agents, each in its own single-agent env (distrl's multi-agent protocol:
    PettingZoo's parallel API). The challenger's env follows its policy."""

    possible_agents = ("champion", "challenger")

    def __init__(self) -> None:
        self.envs = {"champion": gym.make(CARTPOLE)}
        self.pool = {CARTPOLE: gym.make(CARTPOLE), MOUNTAIN_CAR: gym.make(MOUNTAIN_CAR)}
        self.envs["challenger"] = self.pool[CARTPOLE]
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> gym.Space:
        return self.envs[agent].observation_space

    def action_space(self, agent: str) -> gym.Space:
        return self.envs[agent].action_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        challenger = (options or {}).get("policies", {}).get("challenger")
        self.envs["challenger"] = self.pool[challenger_env(challenger) if challenger
                                            else CARTPOLE]
        self.agents = list(self.possible_agents)
        obs = {a: env.reset(seed=None if seed is None else seed + k)[0]
               for k, (a, env) in enumerate(self.envs.items())}
        return obs, {a: {} for a in obs}

    def step(self, actions: dict[str, Any]) -> tuple:
        obs, rewards, terms, truncs = {}, {}, {}, {}
        for agent, action in actions.items():
            obs[agent], rewards[agent], terms[agent], truncs[agent], _ = (
                self.envs[agent].step(action))
        if any(terms.values()) or any(truncs.values()):
            self.agents = []  # the game ends when either env does (the rule)
        return obs, rewards, terms, truncs, {a: {} for a in obs}


def add_challenger(head: Any, k: int) -> str:
    """Publish challenger_<k>, an untrained frozen policy for its env's spaces."""
    env = gym.make(challenger_env(f"challenger_{k}"))
    model = ModelConfig()
    module = ActorCritic(env.observation_space, env.action_space, model)
    publish(head, f"challenger_{k}", flatten_policy(module),
            PolicySpec(env.observation_space, env.action_space, model))
    return f"challenger_{k}"


def main(iterations: int, runners: int, num_envs: int, samples: int) -> list[dict[str, Any]]:
    init_ray(None, runners * 0.5 + 0.5)
    config = LeagueConfig(lr=1e-3, minibatch_size=256, num_epochs=4, use_kl_loss=False)
    learners = DistributedLearners(config, max_policies=1, cpus_per_learner=0.5)
    cartpole = gym.make(CARTPOLE)
    learner = learners.add_policy("champion", cartpole.observation_space,
                                  cartpole.action_space)
    replay = learners.get("champion")[1]
    head = learners.head

    def mapping(challenger: str) -> dict[str, str]:
        return {"champion": "champion", "challenger": challenger}

    first = add_challenger(head, 1)
    setup = MatchSetup(ChampionVsChallenger, {}, num_envs, config.gamma, config.gae_lambda)
    actors = [ray.remote(num_cpus=0.5)(actor_class(MatchRunner)).remote(
        setup, 1000 * k, head, [mapping(first)]) for k in range(runners)]
    history = []
    try:
        for it in range(1, iterations + 1):
            challenger = first if it == 1 else add_challenger(head, it)
            plays = ray.get([a.play.remote([mapping(challenger)], {"champion": replay},
                                           samples // runners) for a in actors])
            results = [r for rs, _ in plays for r in rs]
            trained = ray.get(learner.train.remote(1))
            returns = [r.returns["champion"] for r in results]
            row = {"iteration": it, "challenger": challenger,
                   "challenger_env": challenger_env(challenger),
                   "episodes": len(results),
                   "new_challenger_share": float(np.mean(
                       [r.policies["challenger"] == challenger for r in results])),
                   "champion_return_mean": float(np.mean(returns)),
                   "champion_version": trained["version"],
                   "policies_in_store": len(ray.get(head.versions.remote()))}
            history.append(row)
            print(f"iteration {it}: {challenger} ({row['challenger_env']}) played "
                  f"{row['new_challenger_share']:.0%} of {len(results)} games; champion "
                  f"return {row['champion_return_mean']:.1f} (v{trained['version']}); "
                  f"{row['policies_in_store']} policies in the store", flush=True)
    finally:
        for a in actors:
            ray.kill(a)
        learners.stop()
    return history


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--runners", type=int, default=2)
    ap.add_argument("--num-envs", type=int, default=4, help="games per runner")
    ap.add_argument("--samples", type=int, default=2048,
                    help="champion moves per iteration")
    args = ap.parse_args()
    print(json.dumps(main(args.iterations, args.runners, args.num_envs, args.samples)))
