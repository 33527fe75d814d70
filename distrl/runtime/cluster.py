"""Joining or starting a Ray cluster, and what every remote class gets: ready(), one
torch thread, peak_rss_mb().
"""

from __future__ import annotations

import logging
import math
import os
import resource
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import ray
import torch
from ray._private import ray_constants

from distrl.envs.errors import EnvError

CONNECT_TIMEOUT_S = 5.0
SHUTDOWN_TIMEOUT_S = 30.0
"""The longest release_ray waits for ray.shutdown (see there)."""
AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
_started = False  # whether init_ray started (or joined) the Ray this process uses


def init_ray(address: str | None, cpus_needed: float = 0.0) -> float:
    """Join ``address`` (or $RAY_ADDRESS), else start an embedded local cluster of this
    run's own (never one already running on the machine) with at least ``cpus_needed``
    logical CPUs (more runners than cores then share the cores
    instead of waiting for ones that never come). Each run gets its own namespace, so
    named actors (the policy store) of two jobs on one cluster never meet.

    Returns the seconds it took, so start-up can be reported apart from training.
    """
    global _started
    if ray.is_initialized():
        return 0.0
    t0 = time.perf_counter()
    namespace = f"distrl-{uuid.uuid4().hex[:12]}"
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        _check_reachable(address)
        ray.init(address=address, namespace=namespace, log_to_driver=True)
        # The dashboard and `ray list actors` show jobs by namespace: say which is ours.
        print(f"distrl: joined the Ray cluster at {address}, namespace {namespace}", flush=True)
    else:  # "local": a cluster of our own even when another runs here (ray start, a notebook)
        cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed))
        with _quiet_token_notice(), _loopback_only(), _ctrl_c_noted() as interrupted:
            ray.init(address="local", num_cpus=cpus, namespace=namespace,
                     include_dashboard=False, log_to_driver=True)
        if interrupted:
            shutdown_within(SHUTDOWN_TIMEOUT_S)
            raise KeyboardInterrupt
    _started = True
    return time.perf_counter() - t0


def release_ray() -> None:
    """Shut Ray down when init_ray started (or joined) it, once a run's actors are
    stopped: a run leaves no cluster or connection behind. A Ray the caller initialized
    (a notebook's, a test's, a Tune trial's) stays up."""
    global _started
    if _started and ray.is_initialized():
        shutdown_within(SHUTDOWN_TIMEOUT_S)
    _started = False


def shutdown_within(timeout_s: float) -> bool:
    """ray.shutdown(), waited for at most ``timeout_s``; False if it did not return.
    Shutdown joins Ray's log thread, which blocks for good in a print to a stdout that
    nobody reads (a full pipe): the run must still end. The processes of an embedded
    cluster end with this one (Ray's own child processes watch their parent)."""
    done = threading.Thread(target=ray.shutdown, name="distrl-ray-shutdown", daemon=True)
    done.start()
    done.join(timeout_s)
    if done.is_alive():
        print(f"distrl: Ray did not shut down within {timeout_s:g} s (is this process's "
              "output read?); leaving it to end with this process", file=sys.stderr,
              flush=True)
        return False
    return True


def _loopback_only() -> Any:
    """The embedded cluster serves this machine only, so nothing of it need listen beyond
    loopback. Ray's processes (GCS, raylet and object manager, dashboard and runtime-env
    agents, metrics servers, workers' gRPC servers) bind every interface unless the node's
    address is loopback, and on Linux ray.init replaces a loopback address (even an
    explicit ``_node_ip_address``) with the machine's outside one unless Ray's multi-node
    mode is off: $RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, read once at ``import ray``, into
    the flag switched off here while ray.init runs. Joining a cluster never comes here."""
    return mock.patch.object(ray_constants, "ENABLE_RAY_CLUSTER", False)


@contextmanager
def _ctrl_c_noted() -> Iterator[list[int]]:
    """Ctrl-C while the cluster starts stops the command. Ray imports modules as it
    starts, and a KeyboardInterrupt raised in an import's callback is printed and dropped
    by Python ("Exception ignored in ..."), so the start went on: the signal is noted
    too, for init_ray to raise again once ray.init returns."""
    noted: list[int] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield noted  # a handler of the caller's (the training loop's) stays in charge
        return

    def handler(signum: int, frame: Any) -> None:
        noted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def _quiet_token_notice() -> Iterator[None]:
    """Ray (2.5x) turns token authentication on for every new local cluster and warns
    that it did, unless $RAY_AUTH_MODE is set. This cluster is the run's own and ends
    with it: the protection stays, the notice (nothing to act on) is dropped."""
    def notice(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled")

    logger = logging.getLogger(AUTH_LOGGER)
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def check_resources(needed: dict[str, float], what: str,
                    flags: dict[str, str] | None = None) -> None:
    """ValueError when the whole cluster has less of a resource than ``what`` needs
    (Ray would wait forever for it): one line naming the resource, what is there, and
    the flag to change (``flags``: resource -> flag)."""
    have = ray.cluster_resources()
    for name, amount in needed.items():
        if amount > have.get(name, 0.0) + 1e-9:
            flag = (flags or {}).get(name)
            change = f"lower {flag}" if flag else "ask for less"
            raise ValueError(f"{what} need {amount:g} {name}s but the Ray cluster has "
                             f"{have.get(name, 0.0):g}: {change}, or join a cluster that has "
                             "them (--address).")


def _check_reachable(address: str) -> None:
    """One line naming the address, instead of Ray retrying for minutes and then
    printing a traceback."""
    if "://" in address or ":" not in address:  # ray://, "auto", "local": Ray's own forms
        return
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as err:
        raise RuntimeError(
            f"cannot reach a Ray cluster at {address!r} ({err}). Pass the head node's "
            "host:port (`ray start --head` prints it; default port 6379), or leave "
            "--address and $RAY_ADDRESS unset to start a local cluster."
        ) from None


def actor_class(cls: type, torch_threads: int = 1) -> type:
    """``cls`` as the body of a Ray actor: torch limited to ``torch_threads`` (each actor
    gets about one CPU, and small nets run fastest on one thread), ``ready()`` for the
    Supervisor's start-up wait and ``peak_rss_mb()`` for memory benchmarks. The plain
    class stays free of Ray, for in-process use and unit tests."""

    class Actor(cls):
        def __init__(self, *args: Any, **kwargs: Any):
            torch.set_num_threads(torch_threads)
            self.env_error: EnvError | None = None
            try:
                super().__init__(*args, **kwargs)
            except EnvError as err:  # the user's env: ready() raises it as a call's error,
                self.env_error = err  # not as a dead actor (Ray logs its whole traceback)

        def ready(self) -> bool:
            if self.env_error is not None:
                raise self.env_error
            return True

        def peak_rss_mb(self) -> float:
            return peak_rss_mb()

    Actor.__name__, Actor.__qualname__ = cls.__name__, cls.__qualname__  # Ray's actor name
    Actor.__doc__ = cls.__doc__
    return Actor


def peak_rss_mb() -> float:
    """This process's peak resident memory (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
