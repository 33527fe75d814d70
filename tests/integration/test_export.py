"""`distrl export`: the TorchScript and ONNX files run in a fresh interpreter that never
imports distrl and pick load_policy's actions on 1,000 observations."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import distrl
from distrl.export import main
from tests.integration.test_load_policy import train_tiny

pytest.importorskip("onnxruntime")
pytest.importorskip("pettingzoo")

N = 1_000

# Runs the exported file on saved inputs; prints its actions and whether distrl was imported.
RUNNER = textwrap.dedent("""
    import json, sys
    import numpy as np
    fmt, path, inputs = sys.argv[1:]
    arrays = dict(np.load(inputs))
    if fmt == "torchscript":
        import torch
        module = torch.jit.load(path)
        names = [k for k in ("obs", "action_mask") if k in arrays]
        out = module(*[torch.as_tensor(arrays[k]) for k in names]).numpy()
    else:
        import onnxruntime
        session = onnxruntime.InferenceSession(path)
        out = session.run(None, arrays)[0]
    print(json.dumps({"actions": out.tolist(), "distrl": "distrl" in sys.modules}))
""")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    train_tiny(tmp, ("ppo", "pendulum", "apex", "league", "lstm"))
    return tmp


def _inputs(policy, rng):
    """1,000 observations (spread wide: the filter and clipping matter), and for a game
    random masks with at least one legal move."""
    space = policy.observation_space
    if space.dtype == np.int8:  # a board: planes of 0/1
        obs = rng.integers(0, 2, (N, *space.shape)).astype(np.int8)
        masks = rng.random((N, int(policy.action_space.n))) < 0.4
        masks[np.arange(N), rng.integers(0, masks.shape[1], N)] = True
        return {"obs": obs, "action_mask": masks}
    return {"obs": rng.normal(0.0, 3.0, (N, *space.shape)).astype(space.dtype)}


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
@pytest.mark.parametrize("name", ["ppo", "pendulum", "apex", "league"])
def test_the_exported_file_acts_as_load_policy_without_distrl(runs, tmp_path, name, fmt, capsys):
    out = tmp_path / f"policy.{fmt}"
    main([str(runs / name), "--format", fmt, "--out", str(out)])
    assert capsys.readouterr().out == f"wrote {out}\n"
    policy = distrl.load_policy(runs / name)
    arrays = _inputs(policy, np.random.default_rng(0))
    np.savez(tmp_path / "inputs.npz", **arrays)
    done = subprocess.run([sys.executable, "-c", RUNNER, fmt, str(out),
                           str(tmp_path / "inputs.npz")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["distrl"] is False
    expected = policy.act(arrays["obs"], action_mask=arrays.get("action_mask"))
    actions = np.asarray(got["actions"])
    assert actions.shape == expected.shape
    if name == "pendulum":
        np.testing.assert_allclose(actions, expected, rtol=1e-4, atol=1e-5)
        assert len(np.unique(expected)) > 10
    else:
        assert np.array_equal(actions, expected)
        assert len(np.unique(expected)) > 1


def test_default_path_and_a_recurrent_policy_refused_in_one_line(runs, capsys):
    main([str(runs / "ppo")])
    assert capsys.readouterr().out == f"wrote {runs / 'ppo' / 'policy.pt'}\n"
    assert (runs / "ppo" / "policy.pt").is_file()
    with pytest.raises(SystemExit, match=r"^distrl: error: a recurrent \(LSTM\) policy is not "
                                         r"exported: its action depends on a memory"):
        main([str(runs / "lstm"), "--format", "onnx"])
    assert not list((runs / "lstm").glob("*policy*"))
