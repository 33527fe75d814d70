"""bench/appo_vs_ppo.py's summary: medians over seeds per system, the wall-time ratios on
2 Ray runners and in process, and the learner's share of the time."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

import appo_vs_ppo  # noqa: E402


def trial(system, seed, train_s, steps, learn_share):
    return {"system": system, "seed": seed, "task": "cartpole", "threads": 1,
            "reached": True, "train_s": train_s, "env_steps": steps, "ray_start_s": 1.0,
            "learn_share": learn_share, "learn_s_per_100k_steps": train_s * learn_share
            / steps * 1e5}


def test_summary_takes_medians_and_ratios_per_system():
    times = {"ppo": (4.0, 6.0, 5.0), "appo": (9.0, 6.0, 7.0), "ppo_ray2": (5.0, 6.0, 8.0),
             "appo_ray2": (4.0, 9.0, 4.5), "ppo_overlap_ray2": (7.0, 6.0, 9.0)}
    trials = [trial(s, seed, t, 100_000 * (seed + 1), 0.5 + 0.1 * seed)
              for s, ts in times.items() for seed, t in enumerate(ts)]
    out = appo_vs_ppo.summary(trials)
    assert out["ppo_median_s"] == 5.0 and out["appo_median_s"] == 7.0
    assert out["appo_to_ppo_wall_time"] == pytest.approx(4.5 / 6.0)
    assert out["appo_to_ppo_wall_time_in_process"] == pytest.approx(7.0 / 5.0)
    assert out["ppo_overlap_to_ppo_wall_time"] == pytest.approx(7.0 / 6.0)
    assert out["ppo_median_env_steps"] == 200_000
    assert out["appo_median_learn_share"] == pytest.approx(0.6)
    # appo's seconds per 100k steps: 9 x 0.5 / 1, 6 x 0.6 / 2, 7 x 0.7 / 3 = 4.5, 1.8, 1.63
    assert out["appo_median_learn_s_per_100k_steps"] == pytest.approx(6.0 * 0.6 / 2)


@pytest.mark.parametrize("system, expected", [
    ("ppo", ("ppo", 0, False)), ("appo_ray2", ("appo", 2, False)),
    ("ppo_ray2", ("ppo", 2, False)), ("ppo_overlap_ray2", ("ppo", 2, True)),
])
def test_each_system_runs_its_algorithm_runners_and_overlap(system, expected, monkeypatch):
    calls = []

    def fake_run(task, algo, seed, runners, max_steps, logdir, overlap=False):
        calls.append((algo, runners, overlap))
        return {}

    monkeypatch.setattr(appo_vs_ppo, "run", fake_run)
    out = appo_vs_ppo.one(system, 0, "cartpole", 1000, 1)
    assert calls == [expected] and out["system"] == system
