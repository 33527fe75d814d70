"""Supervisor: a replacement's process start is waited for, not charged to its first call."""

from __future__ import annotations

import time

import pytest

from distrl.runtime.supervisor import Fault, Supervisor


class SlowToRestart:
    """Starts at once the first time; a replacement takes 4 s more to start (torch, envs)."""

    def __init__(self, restart: int, fail_restarts: int = 0):
        if restart and restart <= fail_restarts:
            raise SystemExit(1)  # the process dies while starting
        if restart:
            time.sleep(4.0)

    def ping(self) -> str:
        return "pong"


def group(make_kwargs, max_restarts: int = 2) -> Supervisor:
    return Supervisor("probes", SlowToRestart, make_kwargs, 2, max_restarts=max_restarts,
                      call_timeout_s=2.0, start_timeout_s=300.0, resources={"num_cpus": 0.1})


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
    sup = group(lambda i, r: {"restart": r, "fail_restarts": 1})
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
