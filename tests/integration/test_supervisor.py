"""Supervisor: a replacement's process start is waited for, not charged to its first call;
call_all retries on replacements; Restarts counts every group alike."""

from __future__ import annotations

import os
import time

import pytest
import ray

from distrl.runtime.supervisor import Fault, Restarts, Supervisor, kill_and_wait
from tests.integration.conftest import kill

pytestmark = pytest.mark.ray


class SlowToRestart:
    """Starts at once the first time; a replacement takes 4 s more to start (torch, envs)."""

    def __init__(self, restart: int, fail_restarts: int = 0, delay_s: float = 4.0):
        if restart and restart <= fail_restarts:
            raise SystemExit(1)  # the process dies while starting
        if restart:
            time.sleep(delay_s)

    def ping(self) -> str:
        return "pong"


def group(make_kwargs, max_restarts: int = 2) -> Supervisor:
    return Supervisor("probes", SlowToRestart, make_kwargs, 2, max_restarts=max_restarts,
                      call_timeout_s=2.0, start_timeout_s=300.0, resources={"num_cpus": 0.1})


# alone: a timing bound
@pytest.mark.alone
def test_a_replacement_answers_its_first_call_within_the_call_timeout(ray_local):
    sup = group(lambda i, r: {"restart": r})
    try:
        new = sup.replace_all({1: Fault("hung: test", True)})
        assert new == {1: sup.actors[1]} and sup.restarts == [0, 1]
        done, faults = sup.settle({i: a.ping.remote() for i, a in enumerate(sup.actors)})
        assert faults == {} and done == {0: "pong", 1: "pong"}
    finally:
        sup.close()


def test_a_replacement_that_dies_while_starting_is_replaced_again(ray_local):
    sup = group(lambda i, r: {"restart": r, "fail_restarts": 1, "delay_s": 0.0})
    try:
        sup.replace(0, Fault("died: test", True))
        assert sup.restarts == [2, 0]
        assert ray_local.get(sup.actors[0].ping.remote(), timeout=5.0) == "pong"
    finally:
        sup.close()
    dead = group(lambda i, r: {"restart": r, "fail_restarts": 5}, max_restarts=2)
    try:
        with pytest.raises(RuntimeError, match=r"probes 1 died: .*already replaced 2 times"):
            dead.replace(1, Fault("died: test", True))
    finally:
        dead.close()


class DiesOnFirstCall:
    """Slot 0's first actor dies on its first call; every actor answers with its restart."""

    def __init__(self, slot: int, restart: int):
        self.dies = slot == 0 and restart == 0
        self.restart = restart

    def work(self, x: int) -> tuple[int, int]:
        if self.dies:
            os._exit(1)
        return x, self.restart

    def ask(self, peer) -> str:
        return ray.get(peer.ping.remote())


class Peer:
    def ping(self) -> str:
        return "pong"


class BrokenOnRestart:
    """Starts the first time; every replacement's constructor raises the same error with
    another number in it (a dead store's address, say)."""

    def __init__(self, restart: int):
        if restart:
            raise FileNotFoundError(f"/run/distrl/{restart}: the store this needs is gone")

    def ping(self) -> str:
        return "pong"


@pytest.mark.parametrize("max_restarts", [6, 1000])
def test_a_constructor_that_always_fails_stops_the_run_at_once_whatever_max_restarts(
        ray_local, max_restarts):
    sup = Supervisor("env_runners", BrokenOnRestart, lambda i, r: {"restart": r}, 1,
                     max_restarts=max_restarts, call_timeout_s=5.0,
                     resources={"num_cpus": 0.1})
    try:
        kill(sup.actors[0])
        t0 = time.monotonic()
        with pytest.raises(RuntimeError) as err:
            sup.call_all(lambda i, a: a.ping.remote())
        assert time.monotonic() - t0 < 30
        line = str(err.value)
        assert "\n" not in line and sup.restarts == [3]
        assert line.startswith("env_runners 0 its constructor raised FileNotFoundError: /run/"
                               "distrl/3: the store this needs is gone, 3 times in a row")
        assert "whatever max_restarts says" in line
    finally:
        sup.close()


def test_call_all_replaces_an_actor_that_dies_and_calls_its_replacement(ray_local):
    sup = Supervisor("probes", DiesOnFirstCall, lambda i, r: {"slot": i, "restart": r}, 2,
                     max_restarts=1, call_timeout_s=30.0, resources={"num_cpus": 0.1})
    try:
        assert sup.call_all(lambda i, a: a.work.remote(10 * i)) == {0: (0, 1), 1: (10, 0)}
        assert sup.restarts == [1, 0] and sup.metrics() == {"faults/restarts/probes": 1}
        assert sup.call_all(lambda i, a: a.work.remote(i), slots=[1]) == {1: (1, 0)}
    finally:
        sup.close()


class NeedsPeer:
    """Reads its peer (a store) as it starts: a dead one fails its constructor."""

    def __init__(self, peer):
        ray.get(peer.ping.remote(), timeout=10)

    def ask(self, peer) -> str:
        return ray.get(peer.ping.remote())


def test_a_peer_that_died_with_an_actor_is_healed_before_the_replacement_starts(ray_local):
    peer = ray.remote(num_cpus=0)(Peer)
    peers = [peer.remote()]
    sup = Supervisor("probes", NeedsPeer, lambda i, r: {"peer": peers[-1]}, 1,
                     max_restarts=1, call_timeout_s=30.0, resources={"num_cpus": 0.1})

    def heal() -> bool:
        try:
            ray.get(peers[-1].ping.remote(), timeout=10)
            return False
        except ray.exceptions.RayActorError:
            peers.append(peer.remote())
            return True

    try:
        kill(peers[0])
        kill(sup.actors[0])  # both die: the replacement must start on a live peer
        out = sup.call_all(lambda i, a: a.ask.remote(peers[-1]), heal=heal)
        assert out == {0: "pong"} and len(peers) == 2 and sup.restarts == [1]
    finally:
        sup.close()


def test_call_all_calls_again_as_it_is_an_actor_whose_peer_heal_replaced(ray_local):
    sup = Supervisor("probes", DiesOnFirstCall, lambda i, r: {"slot": 1, "restart": r}, 1,
                     max_restarts=1, call_timeout_s=30.0, resources={"num_cpus": 0.1})
    peer = ray.remote(num_cpus=0)(Peer)
    peers = [peer.remote()]
    kill(peers[0])

    def heal() -> bool:  # a new peer, read by the next call
        peers.append(peer.remote())
        return True

    try:
        out = sup.call_all(lambda i, a: a.ask.remote(peers[-1]), heal=heal)
        assert out == {0: "pong"} and len(peers) == 2 and sup.restarts == [0]
    finally:
        sup.close()


def test_restarts_count_each_key_up_to_max_restarts(capfd):
    counter = Restarts("league_learners", max_restarts=1)
    assert counter.count("a", "league learner a died", "restarted") == 1
    counter.report("a", "league learner a died", "restarted")
    assert "league learner a died; restarted (restart 1/1)" in capfd.readouterr().out
    assert counter.metrics() == {"faults/restarts/league_learners": 1}
    with pytest.raises(RuntimeError, match="a died; it was already restarted 1 times"):
        counter.count("a", "league learner a died", "restarted")


@ray.remote(num_cpus=0)
class Idle:
    def ping(self) -> int:
        return 1


@pytest.mark.slow
def test_kill_and_wait_returns_once_the_actors_are_dead(ray_local):
    """A call sent right after a bare ray.kill was served in 3 of 30 tries here: after
    kill_and_wait, none of 30 may be."""
    for _ in range(5):  # started 6 at a time: a process start is the cost here
        actors = [Idle.remote() for _ in range(6)]
        ray.get([actor.ping.remote() for actor in actors])
        for actor in actors:
            assert kill_and_wait([actor]) == []
            with pytest.raises(ray.exceptions.RayActorError):
                ray.get(actor.ping.remote(), timeout=10)
