"""Every algorithm on a simulated three-node cluster (ray.cluster_utils on this box): a
head with no CPUs, where the driver runs, and two worker nodes. Placement is read from
Ray's own state API, never from distrl's bookkeeping. PPO and DD-PPO are deterministic,
so a run spread over two nodes must end with the same weights as one packed on one.
APPO is not (fragments arrive as they come): its runners on both nodes feed the learner,
each through its own node's policy store."""

from dataclasses import replace

import pytest
import torch

from distrl import (
    ApexConfig,
    APPOConfig,
    DDPPOConfig,
    LeagueConfig,
    LeagueRules,
    ModelConfig,
    PPOConfig,
    RunConfig,
    train_apex,
    train_appo,
    train_ddppo,
    train_league,
    train_ppo,
)
from distrl.core.checkpoint import Checkpoint
from tests.fakes import quiet_run

pytestmark = [pytest.mark.multinode, pytest.mark.ray, pytest.mark.slow]
ray = pytest.importorskip("ray")
TINY = ModelConfig(hiddens=(16,))


@pytest.fixture(scope="module")
def cluster():
    """(head node id, {worker node ids}); the driver is connected to the head."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    # The dashboard serves the state API. Port None: the first free one from 8265 (Ray's
    # fixed default fails when another test's cluster holds it); the state API finds it.
    c = Cluster(initialize_head=True,
                head_node_args={"num_cpus": 0, "include_dashboard": True, "dashboard_port": None})
    workers = {c.add_node(num_cpus=2).node_id for _ in range(2)}
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    torch.set_num_threads(1)
    yield c.head_node.node_id, workers
    ray.shutdown()
    c.shutdown()


def all_actors(**filters) -> list:
    """The actors of this test's cluster, as Ray's state API reports them. Its address is
    given: without it the state API takes the one /tmp/ray/ray_current_cluster names, which
    another test's cluster on the machine may have written or removed."""
    from ray.util.state import list_actors

    return list_actors(limit=10_000, address=ray.get_runtime_context().gcs_address, **filters)


def nodes_of(cls: str, before: set[str]) -> list[str]:
    """Nodes of the actors of class ``cls`` started since ``before`` (their ids), as Ray's
    state API reports them (dead ones included: a finished run has stopped its actors)."""
    actors = all_actors(filters=[("class_name", "=", cls)])
    return [a.node_id for a in actors if a.actor_id not in before]


def actor_ids() -> set[str]:
    return {a.actor_id for a in all_actors()}


def weights(result: dict) -> dict[str, torch.Tensor]:
    return Checkpoint(result["checkpoint"]).tensors("policy", "weights.pt")


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs between the two placements"


def placed_run(train, cls: str, config, strategy: str, tmp_path, **run):
    before = actor_ids()
    result = train(config, quiet_run(tmp_path / strategy, placement_strategy=strategy, **run))
    return result, nodes_of(cls, before)


def test_ppo_runners_spread_or_pack_and_learn_the_same(cluster, tmp_path):
    head, workers = cluster
    config = PPOConfig(num_env_runners=2, num_envs_per_env_runner=2, rollout_fragment_length=32,
                       train_batch_size=128, minibatch_size=32, num_epochs=2, model=TINY)
    spread, spread_nodes = placed_run(train_ppo, "EnvRunner", config, "SPREAD", tmp_path,
                                      max_env_steps=384, seed=3)
    packed, packed_nodes = placed_run(train_ppo, "EnvRunner", config, "STRICT_PACK", tmp_path,
                                      max_env_steps=384, seed=3)
    assert len(spread_nodes) == len(set(spread_nodes)) == 2 and set(spread_nodes) == workers
    assert len(packed_nodes) == 2 and len(set(packed_nodes)) == 1 and head not in packed_nodes
    assert spread["iteration"] == packed["iteration"] == 3
    assert spread["env/episode_return_mean"] == packed["env/episode_return_mean"]
    assert_same_weights(weights(spread), weights(packed))


def test_ddppo_ranks_on_two_nodes_rendezvous_and_match_one_node(cluster, tmp_path):
    head, workers = cluster
    config = DDPPOConfig(num_workers=2, num_envs_per_worker=2, rollout_fragment_length=16,
                         minibatch_size=8, num_epochs=2, model=TINY, collective_timeout_s=30.0)
    spread, spread_nodes = placed_run(train_ddppo, "DDPPOWorker", config, "STRICT_SPREAD",
                                      tmp_path, max_env_steps=192)
    packed, packed_nodes = placed_run(train_ddppo, "DDPPOWorker", config, "STRICT_PACK",
                                      tmp_path, max_env_steps=192)
    assert sorted(spread_nodes) == sorted(workers)  # rank 0 and rank 1 on different nodes
    assert len(set(packed_nodes)) == 1 and head not in packed_nodes
    assert spread["ddppo/world_size"] == packed["ddppo/world_size"] == 2
    assert spread["iteration"] == packed["iteration"] == 3
    assert_same_weights(weights(spread), weights(packed))


APEX = ApexConfig(num_workers=2, rollout_fragment_length=25, learning_starts=200,
                  capacity=10_000, num_replay_buffer_shards=2, train_batch_size=32,
                  target_network_update_freq=500, max_weight_sync_delay=100, model=TINY,
                  min_sample_timesteps_per_reporting=500)


def test_apex_shards_follow_the_learner_or_the_strategy(cluster, tmp_path):
    head, workers = cluster
    before = actor_ids()
    near = train_apex(APEX, RunConfig(logdir=str(tmp_path / "near"), progress=False,
                                      placement_strategy="SPREAD", max_env_steps=1_500))
    assert nodes_of("ReplayShard", before) == [head, head]  # the driver's node
    assert set(nodes_of("_RemoteActor", before)) == workers
    before = actor_ids()
    far = train_apex(replace(APEX, replay_buffer_shards_colocated_with_driver=False,
                             num_cpus_per_replay_shard=1.0),
                     RunConfig(logdir=str(tmp_path / "far"), progress=False,
                               placement_strategy="STRICT_SPREAD", max_env_steps=1_500))
    assert sorted(nodes_of("ReplayShard", before)) == sorted(workers)
    for result in (near, far):
        assert result["env/steps_total"] >= 1_500 and result["learner/trained_total"] > 0
        assert min(result["replay/sampled/0"], result["replay/sampled/1"]) > 0


def test_league_runs_with_one_policy_store_per_node(cluster, tmp_path):
    head, workers = cluster
    config = LeagueConfig(
        rules=LeagueRules(snapshot_steps=300), train_batch_size=128, minibatch_size=64,
        num_epochs=1, num_envs=4, league_eval_interval=0,  # placement only: no evaluation
        num_env_runners=2, num_cpus_per_learner=0.5, num_cpus_per_env_runner=0.5, model=TINY)
    result, runner_nodes = placed_run(train_league, "MatchRunner", config, "STRICT_SPREAD",
                                      tmp_path, env="pettingzoo:tictactoe_v3",
                                      max_env_steps=1_000)
    assert sorted(runner_nodes) == sorted(workers)
    stores = nodes_of("PolicyStore", set())
    assert len(stores) == len(set(stores)) and set(stores) == {head, *workers}
    assert result["env/steps_total"] >= 1_000 and result["league/num_policies"] >= 3


def test_appo_learns_from_runners_on_both_nodes_through_their_stores(cluster, tmp_path,
                                                                     monkeypatch):
    from distrl.appo.remote import RaySampler

    head, workers = cluster
    sources = []  # the actor id of each fragment handed to the learner
    real = RaySampler._handle

    def handle(self, ref):
        sources.append(self.sup.actors[self.inflight[ref][0]]._actor_id.hex())
        real(self, ref)

    monkeypatch.setattr(RaySampler, "_handle", handle)
    before = actor_ids()
    config = APPOConfig(num_env_runners=2, num_envs_per_env_runner=2,
                        rollout_fragment_length=32, train_batch_size=128, minibatch_size=64,
                        model=TINY)
    result, runner_nodes = placed_run(train_appo, "StoreRunner", config, "STRICT_SPREAD",
                                      tmp_path, max_env_steps=1_280)
    assert sorted(runner_nodes) == sorted(workers)
    node_of = {a.actor_id: a.node_id for a in all_actors()}
    fed = [node_of[s] for s in sources]
    assert {n: fed.count(n) >= 3 for n in workers} == dict.fromkeys(workers, True)
    stores = nodes_of("PolicyStore", before)  # the driver's, and one per runner node
    assert sorted(stores) == sorted({head, *workers})
    assert result["iteration"] >= 5 and result["env/steps_total"] >= 1_280
    assert 0 <= result["learner/policy_lag"] <= 4
