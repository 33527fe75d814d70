"""A league on Ray: MatchRunners play games through PolicyReader views of their
node's policy store, and RayWorkers (the league's Workers on Ray) drive them and
the DistributedLearners."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch

from distrl.core.sampling import seed_for
from distrl.games.games import make_multiagent_env
from distrl.games.matches import MatchLoop, MatchResult
from distrl.games.policies import RANDOM, RandomPolicy, outside_players
from distrl.league.learners import DistributedLearners
from distrl.runtime.cluster import check_resources, init_ray, release_ray
from distrl.runtime.supervisor import Restarts, Supervisor, cause, died, last_line
from distrl.store.policy_cache import FlatLayout, PolicySpec
from distrl.store.remote import PolicyReader, wait


@dataclass(frozen=True)
class MatchSetup:
    """What every MatchRunner of a run plays with."""

    game: Any
    """The game (RunConfig.env)."""
    env_config: dict[str, Any]
    """Its keyword arguments."""
    num_envs: int
    """Games a runner plays side by side."""
    gamma: float
    """Discount of the learning seats' returns."""
    lambda_: float
    """Their GAE lambda."""
    max_cached_policies: int = 64
    """Policies a runner keeps views of (LRU)."""
    max_seq_len: int = 20
    """Sequence length of recurrent policies' samples."""
    critic_states: bool = False
    """Learners with a state critic: every game node's critic state is recorded."""
    others_reach: bool = False
    """Magnet.counterfactual: each move's reach under the other players and chance."""
    bots: tuple[str, ...] = ()
    """Outside players by spec (mcts:N, module:callable) beside the random one."""

    @classmethod
    def of(cls, cfg: Any, run: Any) -> MatchSetup:
        """A league run's (LeagueConfig, RunConfig)."""
        return cls(run.env, run.env_config, cfg.num_envs, cfg.gamma, cfg.gae_lambda,
                   cfg.max_cached_policies, cfg.model.max_seq_len, cfg.state_critic,
                   cfg.magnet.counterfactual, cfg.rules.bots)


class MatchRunner:
    """Plays matches on Ray: a MatchLoop whose seats act through PolicyReader views of
    this node's policy store (a new opponent costs the runner no copy), seated from
    mappings the driver's league drew; learning seats' samples go to their shard's
    replay actor."""

    def __init__(self, setup: MatchSetup, seed: int, head: Any,
                 mappings: list[dict[str, str]]):
        self.setup = setup
        self.reader = PolicyReader(head, setup.max_cached_policies)
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)
        self.mappings, self.next = list(mappings), 0
        envs = [make_multiagent_env(setup.game, setup.env_config)
                for _ in range(setup.num_envs)]
        space = envs[0].action_space(envs[0].possible_agents[0])
        # Players that are not in the store: the random player (discrete games) and bots.
        n = int(space.n) if hasattr(space, "n") else None
        self.outside = outside_players(n, setup.bots, envs[0], seed)
        self.loop = MatchLoop(envs, self._choose, seed, setup.max_seq_len,
                              setup.critic_states, setup.others_reach)

    def _choose(self, env_index: int) -> dict[str, str]:
        """The next mapping the league drew; once they run out, one of them again at
        random (they are independent draws, so the mix stays the league's)."""
        if self.next < len(self.mappings):
            self.next += 1
            return self.mappings[self.next - 1]
        return self.mappings[int(self.rng.integers(len(self.mappings)))]

    def play(self, mappings: list[dict[str, str]], replays: dict[str, Any],
             min_samples: int) -> tuple[list[MatchResult], int]:
        """Seat new games from ``mappings`` (games under way keep theirs) with the
        newest published weights, play until the finished seats of the learners in
        ``replays`` hold min_samples moves, hand each learner's samples to its replay."""
        self.mappings, self.next = list(mappings), 0
        seated = {s.policy_id for seats in self.loop.seats for s in seats.values()}
        self.reader.refresh(sorted(({p for m in mappings for p in m.values()} | seated)
                                   - set(self.outside)))
        batch = self.loop.collect(self._policy, set(replays), min_samples, self.setup.gamma,
                                  self.setup.lambda_, self.generator)
        ray.get([replays[pid].add.remote(pid, r) for pid, r in batch.rollouts.items()])
        return batch.results, batch.env_steps

    def _policy(self, policy_id: str) -> Any:
        outside = self.outside.get(policy_id)
        return outside if outside is not None else self.reader.policy(policy_id)

    def rehome(self, head: Any) -> None:
        """Read from a rebuilt policy store (the old one's views are dropped)."""
        self.reader = PolicyReader(head, self.setup.max_cached_policies)

    def versions(self) -> dict[str, int]:
        """Version of each policy this runner acts with now."""
        return {pid: self.reader.cache.version(pid) for pid in self.reader.cache.ids()}


class RayWorkers:
    """A league's learners and games on Ray: ``num_env_runners`` MatchRunners (one
    Supervisor group) and DistributedLearners, which publish every version and every
    frozen snapshot to the policy store the runners read."""

    def __init__(self, cfg: Any, obs_space: gym.Space, act_space: gym.Space, run: Any,
                 choose: Callable[[], dict[str, str]]):
        ids = [pid for pid, _ in cfg.learner_ids()]
        init_ray(run.address, cfg.num_env_runners * cfg.num_cpus_per_env_runner
                 + len(ids) * cfg.num_cpus_per_learner)
        self.cfg, self.choose, self.ids = cfg, choose, ids
        self.timeout = run.actor_timeout_s
        # Counted as a Supervisor counts its own group: learners by policy id, the store
        # and replays by the names DistributedLearners.heal gives them.
        self.restarts = {group: Restarts(group, run.max_restarts)
                         for group in ("league_learners", "policy_store", "league_replays")}
        # Frozen snapshots' weights, put by this driver so that they outlive a lost store
        # (the store owns only what learners publish, and they can publish it again).
        self.frozen: dict[str, list[ray.ObjectRef]] = {}
        # What a restarted learner resumes from besides its published weights: its
        # trainer state as of the last checkpoint (or restore), and its newest env steps.
        self.trainer_states: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, int] = {}
        self.updating: dict[str, ray.ObjectRef] = {}  # overlap_learning: updates under way
        self.spec = PolicySpec(obs_space, act_space, cfg.model)
        check_resources({"GPU": cfg.num_gpus_for_learners,
                         "CPU": len(ids) * cfg.num_cpus_per_learner
                         + cfg.num_env_runners * cfg.num_cpus_per_env_runner},
                        f"{len(ids)} learners and {cfg.num_env_runners} env runners",
                        {"GPU": "--num-gpus-for-learners",
                         "CPU": "--num-cpus-per-learner or --num-env-runners"})
        self.learners = DistributedLearners(cfg, len(ids), cfg.num_learner_shards,
                                            cfg.num_gpus_for_learners, cfg.num_cpus_per_learner,
                                            run.seed, cfg.magnet, run.actor_timeout_s,
                                            run.num_torch_threads)
        try:  # a failed start leaves no learners, replays or store behind
            self.learners.add_policies({pid: (obs_space, act_space) for pid in ids})
            self.reader = PolicyReader(self.learners.head)
            self.random = RandomPolicy(int(act_space.n))
            self.runners = self._start_runners(run)
        except BaseException:
            self.learners.stop()
            release_ray()
            raise

    def _start_runners(self, run: Any) -> Supervisor:
        cfg = self.cfg
        setup = MatchSetup.of(cfg, run)

        def kwargs(index: int, restart: int) -> dict[str, Any]:
            return dict(setup=setup, seed=seed_for(run.seed, index, restart),
                        head=self.learners.head, mappings=self._draw(cfg.num_envs, self.ids))

        return Supervisor("match_runners", MatchRunner, kwargs, cfg.num_env_runners,
                          max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
                          resources={"num_cpus": cfg.num_cpus_per_env_runner},
                          placement_strategy=run.placement_strategy)

    def _get(self, refs: Any) -> Any:
        """Results of calls made outside _on_learners (a replay's drop, a restarted
        learner's set_state, objects), with the run's actor timeout: a hung one stops the
        run with an error instead of hanging it. Store calls wait STORE_TIMEOUT_S
        (store.remote.wait)."""
        return ray.get(refs, timeout=self.timeout)

    def _draw(self, n: int, learners: list[str]) -> list[dict[str, str]]:
        """n mappings, the learners taking turns, so that every runner seats each
        learner (each must reach its own batch)."""
        return [self.choose(learner=learners[k % len(learners)]) for k in range(n)]

    def play(self, learners: list[str], min_samples: int) -> tuple[list[MatchResult], int]:
        """Every runner plays its share; a runner that dies or hangs is replaced and its
        share retaken. With overlap_learning the learners first start their update on
        what the last play left in their replays; train() waits for it."""
        if self.cfg.overlap_learning:
            # An idle learner takes its samples as the call arrives, long before a runner
            # adds this play's (a late take would only add fresher samples to the update).
            self.updating = {pid: self.learners.get(pid)[0].train.remote(1)
                             for pid, _, _ in self.learners}
        share = -(-min_samples // self.cfg.num_env_runners)
        # Enough draws for games as short as 4 of a learner's moves.
        draws = self.cfg.num_envs + len(learners) * share // 4
        # Each call reads the replays anew: _heal may have replaced one. A runner that
        # lost a replay or the store plays again once they are back.
        out = self.runners.call_all(
            lambda i, a: a.play.remote(self._draw(draws, learners),
                                       {pid: self.learners.get(pid)[1] for pid in learners},
                                       share),
            heal=self._heal)
        results = [r for played, _ in out.values() for r in played]
        return results, sum(steps for _, steps in out.values())

    def _on_learners(self, call: Callable[[Any], Any], ids: list[str] | None = None,
                     pending: dict[str, ray.ObjectRef] | None = None) -> dict[str, Any]:
        """``call(learner)`` (a remote call) on each learner, all at once (or the calls
        already ``pending``); a learner that died or hung is restarted (_restart) and its
        call made again; one that lost its replay or the store makes it again once they
        are back (_heal)."""
        ids = [pid for pid, _, _ in self.learners] if ids is None else ids
        if pending is None:
            pending = {pid: call(self.learners.get(pid)[0]) for pid in ids}
        out: dict[str, Any] = {}
        while pending:
            retry = {}
            for pid, ref in pending.items():
                try:
                    out[pid] = ray.get(ref, timeout=self.timeout)
                except ray.exceptions.GetTimeoutError:
                    retry[pid] = call(self._restart(pid, f"hung ({self.timeout:g} s)"))
                except Exception as err:
                    if died(cause(err)) and not died(err) and self._heal():
                        retry[pid] = call(self.learners.get(pid)[0])
                    elif died(err) or died(cause(err)):
                        retry[pid] = call(self._restart(pid, f"died ({last_line(err)})"))
                    else:
                        raise cause(err) from None
            pending = retry
        return out

    def _restart(self, pid: str, why: str) -> Any:
        """A new learner for ``pid`` from the weights it last published (the store owns
        them) and its trainer state as of the last checkpoint: optimizer and KL
        coefficient; fresh ones before the first checkpoint. Samples it had taken for
        its update are lost; its replay's newer ones are not."""
        counter, what = self.restarts["league_learners"], f"league learner {pid} {why}"
        counter.count(pid, what, "restarted")
        self._heal()  # it may have died with its node's store or replay
        weights = self._weights([pid]).get(pid)
        if weights is None:
            raise RuntimeError(f"league learner {pid} {why}, and the policy store lost its "
                               "weights with it; resume from the checkpoint.")
        steps = self.steps.get(pid, 0)
        state = self.trainer_states.get(pid) or {
            "optimizer": None, "kl_coeff": self.cfg.kl_coeff, "magnet_at": steps,
            "magnet": weights if self.cfg.magnet.coeff > 0 else None}
        learner = self.learners.restart_policy(pid)
        self._get(learner.set_state.remote({**state, "model": weights,
                                            "env_steps": max(steps, state.get("env_steps", 0))}))
        counter.report(pid, what, "restarted from its last published weights")
        return learner

    def train(self) -> dict[str, dict[str, float]]:
        """Every learner trains on what its replay received, all at once (overlap_learning:
        the updates play() started, on the play before it)."""
        updating, self.updating = self.updating, {}
        out = self._on_learners(lambda learner: learner.train.remote(1),
                                pending=updating or None)
        return {pid: m for pid, m in out.items() if m is not None}

    def env_steps(self) -> dict[str, int]:
        self.steps = self._on_learners(lambda learner: learner.env_steps.remote())
        return dict(self.steps)

    def freeze(self, pid: str, snap: str) -> None:
        self._own(snap, FlatLayout.of(self.spec.build()).flatten(self._weights([pid])[pid]))

    def _own(self, pid: str, flat: np.ndarray) -> None:
        """Put a frozen policy's weights (this driver owns them) and list it in the store."""
        self.frozen[pid] = [ray.put(flat)]
        wait(self.learners.head.replicate.remote(pid, self.frozen[pid], self.spec),
             f"list {pid!r}")

    def _heal(self) -> bool:
        """Replace a lost policy store or replay actor (DistributedLearners.heal), list
        the frozen snapshots in a new store and point the runners and this driver at it;
        each gives up after max_restarts. True if anything was replaced."""
        lost = self.learners.heal()
        for what in lost:
            counter = self.restarts["policy_store" if what == "policy_store"
                                    else "league_replays"]
            counter.count(what, f"the league's {what} died", "restarted")
            counter.report(what, f"the league's {what} died", "restarted")
        if "policy_store" in lost:
            head = self.learners.head
            wait([head.replicate.remote(pid, ref, self.spec)
                  for pid, ref in self.frozen.items()], "list the frozen snapshots")
            self.reader = PolicyReader(head)
            self.runners.settle({i: a.rehome.remote(head)  # a dead one is replaced later
                                 for i, a in enumerate(self.runners.actors)})
        return bool(lost)

    def reset(self, pid: str) -> None:
        """Fresh weights (overlap_learning: the samples the old ones played that no update
        took yet are dropped)."""
        self._on_learners(lambda learner: learner.reset.remote(), [pid])
        if self.cfg.overlap_learning:
            self._heal()  # a replaced replay holds none
            self._get(self.learners.get(pid)[1].drop.remote(pid))

    def acting(self) -> StoreView:
        self._heal()
        self.reader.refresh(self.ids)  # the learners' newest versions
        return StoreView(self.reader, self.random)

    def module(self, pid: str) -> torch.nn.Module:
        module = self.spec.build()
        module.load_state_dict(self._weights([pid])[pid])
        return module

    def _weights(self, ids: list[str]) -> dict[str, dict[str, torch.Tensor]]:
        """State dicts (copies) of policies: frozen ones from this driver's objects,
        learners' as last published, from the store."""
        boxes = {pid: self.frozen[pid] for pid in ids if pid in self.frozen}
        learning = [pid for pid in ids if pid not in boxes]
        if learning:
            self._heal()
            entries = wait(self.learners.head.latest.remote(learning), "hand out weights")
            boxes.update({pid: box for pid, (_, box, _) in entries.items()})
        flats = self._get([box[0] for box in boxes.values()])
        layout = FlatLayout.of(self.spec.build())
        return {pid: {k: v.clone() for k, v in layout.views(flat).items()}
                for pid, flat in zip(boxes, flats, strict=True)}

    def metrics(self) -> dict[str, float]:
        return {**self.runners.metrics(),
                **{k: float(n) for c in self.restarts.values() for k, n in c.metrics().items()}}

    def get_state(self) -> dict[str, Any]:
        """Every policy's weights (snapshots from the store); the learners' optimizer,
        KL coefficient and steps. With overlap_learning the learners first train on the
        samples the last play left (or a resumed run would never learn from them)."""
        if self.cfg.overlap_learning:
            self.train()
        trainers = self._on_learners(lambda learner: learner.get_state.remote())
        weights = {pid: t.pop("model") for pid, t in trainers.items()}
        self.trainer_states = dict(trainers)
        return {"weights": {**weights, **self._weights(list(self.frozen))},
                "trainers": trainers}

    def set_state(self, saved: dict[str, Any]) -> None:
        """Learners load their state and republish; snapshots are published again."""
        futures = []
        for pid, weights in saved["weights"].items():
            found = self.learners.get(pid)
            if found is not None:
                self.trainer_states[pid] = saved["trainers"][pid]
                futures.append(found[0].set_state.remote({**saved["trainers"][pid],
                                                          "model": weights}))
            else:
                self._own(pid, FlatLayout.of(self.spec.build()).flatten(weights))
        self._get(futures)

    def games_state(self) -> list[bytes | None]:
        return []  # documented: a resumed league on Ray seats fresh games

    def set_games_state(self, states: list[bytes | None]) -> None:
        pass

    def close(self) -> None:
        self.runners.close()
        self.learners.stop()
        release_ray()


@dataclass
class StoreView:
    """Policies by id for evaluation in the driver: the store's, and the random player."""

    reader: PolicyReader
    random: RandomPolicy

    def __getitem__(self, policy_id: str) -> Any:
        return self.random if policy_id == RANDOM else self.reader.policy(policy_id)
