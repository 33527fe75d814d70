"""The user's command line, run in a child process: nothing it starts (Ray, envs,
learner threads) stays in the pytest process."""

import json
import subprocess
import sys


def distrl_json(*args: str, timeout: float = 600) -> dict:
    """``python -m distrl ARGS``'s final JSON line (its --json report); a failed run
    fails the test with the end of its stderr."""
    out = subprocess.run([sys.executable, "-m", "distrl", *args], capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
