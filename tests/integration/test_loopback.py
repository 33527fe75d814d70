
"""A run's embedded Ray cluster listens on loopback only: nothing of it is reachable from
another machine."""

import ipaddress
import os
import time

import psutil
import pytest
import ray

from distrl.runtime.cluster import init_ray, release_ray

pytestmark = pytest.mark.ray

# The processes of the cluster that open ports of their own choosing (ray::IDLE: a
# worker), each seen listening before the check. The autoscaler's monitor.py and the
# dashboard's dashboard.py also open one each, at fixed ports (44217, 44227) that a
# cluster started earlier on this machine may hold: checked when there, not awaited.
# None is left out of the check: Ray moves every one of them to loopback.
SERVERS = ("gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent",
           "ray::IDLE")


def name(proc: psutil.Process) -> str:
    args = proc.cmdline()
    if args and args[0].startswith("ray::"):
        return args[0]
    script = next((a for a in args if a.endswith(".py")), args[0] if args else "?")
    return os.path.basename(script)


def listening(procs: list[psutil.Process]) -> set[tuple[str, int, str, int]]:
    """(process name, pid, ip, port) of each listening TCP socket of ``procs``."""
    found = set()
    for proc in procs:
        try:
            label = name(proc)
            conns = proc.net_connections(kind="inet")
        except psutil.Error:  # a worker that just ended
            continue
        found |= {(label, proc.pid, c.laddr.ip, c.laddr.port) for c in conns
                  if c.status == psutil.CONN_LISTEN}
    return found


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped  # ::ffff:127.0.0.1: Ray's C++ servers bind IPv6 sockets
    return addr.is_loopback


@ray.remote
def pid() -> int:
    return os.getpid()


def test_embedded_cluster_listens_on_loopback_only():
    if ray.is_initialized():  # this run's own cluster, not one a fixture left behind
        ray.shutdown()
    me = psutil.Process()
    before = listening([me])  # the driver's own sockets from before (pytest's, if any)
    init_ray(None)
    try:
        ray.get([pid.remote() for _ in range(2)])  # a worker, with its gRPC server
        # The agents and metrics servers come up in the background: wait until each
        # kind of process is seen listening.
        deadline = time.monotonic() + 60
        while True:
            socks = listening([me, *me.children(recursive=True)]) - before
            missing = [s for s in SERVERS if not any(n.startswith(s) for n, *_ in socks)]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert not missing, f"never seen listening: {missing}; seen: {sorted(socks)}"
        assert any(p == me.pid for _, p, *_ in socks), "the driver's gRPC server"
        outside = sorted(s for s in socks if not is_loopback(s[2]))
        assert not outside, f"listening beyond loopback: {outside}"
    finally:
        release_ray()
    assert not ray.is_initialized()
