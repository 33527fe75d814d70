"""Matches/s of one learner against 64 distinct opponents of its architecture vs against
one, on connect four: in process (LocalPolicy modules) and in a Ray MatchRunner acting
through its PolicyReader views of the node's policy store (the league's runner path).

64 games at once, the learner in one seat of each (player_0 in even games, player_1 in
odd ones), the opponent of game i is o<i mod D>; the learner learns (values, samples and
GAE, as in a league iteration) and everyone samples. Each measure is the median of
``--repeats`` timed collects of ``--matches`` finished games, D = 1 and D = 64
interleaved. Used by league_scale.py; alone:

    python bench/league_distinct.py [--matches 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

GAME = "pettingzoo:connect_four_v3"
GAMES = 64


def mapping(i: int, distinct: int) -> dict[str, str]:
    opponent = f"o{i % distinct}"
    return ({"player_0": "A", "player_1": opponent} if i % 2 == 0
            else {"player_0": opponent, "player_1": "A"})


def timed_collect(loop: Any, policy: Any, matches: int, generator: Any) -> float:
    """Matches/s of one collect of ``matches`` finished games (the learner learning)."""
    t = time.perf_counter()
    batch = loop.collect(policy, {"A"}, 0, 0.99, 0.95, generator, min_episodes=matches)
    return len(batch.results) / (time.perf_counter() - t)


def local_rates(distinct: int, matches: int, repeats: int) -> list[float]:
    import torch

    from distrl.games.games import make_multiagent_env, policy_obs_space
    from distrl.games.matches import MatchLoop
    from distrl.games.policies import LocalPolicy
    from distrl.models.config import ModelConfig
    from distrl.models.recurrent import actor_critic

    envs = [make_multiagent_env(GAME) for _ in range(GAMES)]
    obs = policy_obs_space(envs[0].observation_space("player_0"))
    act = envs[0].action_space("player_0")

    def net(seed: int) -> LocalPolicy:
        torch.manual_seed(seed)
        return LocalPolicy(actor_critic(obs, act, ModelConfig()).requires_grad_(False))

    policies = {"A": net(0)} | {f"o{k}": net(k + 1) for k in range(distinct)}
    loop = MatchLoop(envs, lambda i: mapping(i, distinct), seed=0)
    generator = torch.Generator().manual_seed(0)
    timed_collect(loop, policies.__getitem__, GAMES, generator)  # warm-up
    return [timed_collect(loop, policies.__getitem__, matches, generator)
            for _ in range(repeats)]


def ray_rates(distinct: int, matches: int, repeats: int) -> list[float]:
    """The same in a MatchRunner actor whose policies are views of the policy store."""
    import ray
    import torch

    from distrl.games.games import make_multiagent_env, policy_obs_space
    from distrl.league.remote import MatchRunner, MatchSetup
    from distrl.models.config import ModelConfig
    from distrl.models.recurrent import actor_critic
    from distrl.store.policy_cache import PolicySpec, flatten_policy
    from distrl.store.remote import head_store, publish, stop_head_store

    env = make_multiagent_env(GAME)
    obs = policy_obs_space(env.observation_space("player_0"))
    spec = PolicySpec(obs, env.action_space("player_0"), ModelConfig())
    head = head_store()
    for k, pid in enumerate(["A"] + [f"o{k}" for k in range(distinct)]):
        torch.manual_seed(k)
        publish(head, pid, flatten_policy(actor_critic(obs, spec.act_space, spec.model)), spec)
    # The league's default cache (LeagueConfig.max_cached_policies): with MatchRunner's
    # own default of 64, 65 policies evicted each other and cost a store round trip each.
    runner = ray.remote(num_cpus=1)(MatchRunner).remote(
        MatchSetup(GAME, {}, GAMES, 0.99, 0.95, max_cached_policies=1024), 0, head,
        [mapping(i, distinct) for i in range(GAMES)])

    def measure(self: Any, n: int) -> float:
        self.reader.refresh(["A"] + [f"o{k}" for k in range(distinct)])
        self.loop.choose = lambda i: mapping(i, distinct)
        return timed_collect(self.loop, self._policy, n, self.generator)

    ray.get(runner.__ray_call__.remote(measure, GAMES))  # warm-up
    rates = [ray.get(runner.__ray_call__.remote(measure, matches)) for _ in range(repeats)]
    ray.kill(runner)
    stop_head_store(head)
    return rates


def measure(matches: int = 1000, repeats: int = 5, with_ray: bool = True) -> dict:
    """The JSON fields league_scale.py reports: matches/s with 1 and 64 distinct
    opponents and their ratio, in process and (``with_ray``) in a Ray runner."""
    out: dict[str, Any] = {}
    kinds = [("local", local_rates)]
    if with_ray:
        from distrl.runtime.cluster import init_ray, release_ray

        init_ray(None, 2)
        kinds.append(("ray", ray_rates))
    try:
        for name, rates in kinds:
            one, many = [], []
            for _ in range(repeats):  # interleaved, one timed collect at a time
                one += rates(1, matches, 1)
                many += rates(64, matches, 1)
            suffix = "" if name == "local" else "_ray"
            out[f"matches_per_s_1_opponent{suffix}"] = statistics.median(one)
            out[f"matches_per_s_64_opponents{suffix}"] = statistics.median(many)
            out[f"distinct_opponents_ratio_64{suffix}"] = (statistics.median(many)
                                                           / statistics.median(one))
    finally:
        if with_ray:
            release_ray()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--matches", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    print(json.dumps(measure(args.matches, args.repeats, not args.no_ray)))
