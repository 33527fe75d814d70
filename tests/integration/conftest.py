def kill(actor, timeout_s: float = 30.0) -> None:
    """ray.kill, then wait until the death is known: a call sent right after the kill can
    still be served (the store then held a version the test had killed the publisher to
    prevent)."""
    from distrl.runtime.supervisor import kill_and_wait

    assert not kill_and_wait([actor], timeout_s), (
        f"the killed actor still answers after {timeout_s:g} s")
