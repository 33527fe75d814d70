"""examples/league_heterogeneous.py (RLlib #21459's league) runs as a user runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

pytest.importorskip("ray")

EXAMPLE = Path(__file__).parents[2] / "examples" / "league_heterogeneous.py"


def test_heterogeneous_league_swaps_challengers_within_the_iteration():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, str(EXAMPLE), "--iterations", "3", "--samples", "512"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r["challenger_env"] for r in rows] == [
        "MountainCarContinuous-v0", "CartPole-v1", "MountainCarContinuous-v0"]
    for r in rows:
        # The new challenger plays from the next reset of each game in its own iteration:
        # only the games under way (4 per runner, 2 runners) may finish with the old one.
        assert r["episodes"] - round(r["new_challenger_share"] * r["episodes"]) <= 8, r
        assert r["champion_version"] == r["iteration"]  # the champion trained each time
        assert r["policies_in_store"] == r["iteration"] + 1  # champion + every challenger
