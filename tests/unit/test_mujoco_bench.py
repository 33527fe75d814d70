"""bench/ppo_mujoco.py's summary: medians over seeds, the time ratio per env step (so
that SB3 may run a shorter window), the return ratio only where both ran the same
steps, and the count of tasks at Tianshou's 1M figure; the entry a budget runs; the
runs its plot reads."""

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

import ppo_mujoco  # noqa: E402


def trial(system, env, seed, final, det, wall, steps):
    return {"system": system, "env": env, "seed": seed, "final_return": final,
            "det_eval": det, "wall_s": wall, "env_steps": steps, "steps_per_s": steps / wall}


def test_summary_takes_medians_and_compares_time_per_env_step():
    trials = [trial("distrl", "Walker2d-v5", 0, 3_000.0, 3_900.0, 400.0, 1_000_000),
              trial("distrl", "Walker2d-v5", 1, 3_700.0, 3_500.0, 500.0, 1_000_000),
              trial("distrl", "Walker2d-v5", 2, 3_600.0, 3_000.0, 450.0, 1_000_000),
              trial("sb3", "Walker2d-v5", 0, 900.0, 1_000.0, 200.0, 50_000),
              trial("distrl", "Ant-v5", 0, 4_000.0, 4_100.0, 600.0, 1_000_000),
              trial("sb3", "Ant-v5", 0, 3_000.0, 3_100.0, 1_200.0, 1_000_000)]
    out = ppo_mujoco.summary(trials, ["Walker2d-v5", "Ant-v5"], ("sb3", "distrl"))
    assert out["distrl_final_return_Walker2d-v5"] == 3_600.0
    assert out["distrl_det_eval_Walker2d-v5"] == 3_500.0
    assert out["distrl_wall_s_Walker2d-v5"] == 450.0
    # distrl: the median of 2,500 / 2,000 / 2,222 steps/s; SB3 250 steps/s.
    assert out["time_ratio_Walker2d-v5"] == pytest.approx(250 / (1_000_000 / 450))
    assert "return_ratio_Walker2d-v5" not in out  # SB3 ran 50k steps, distrl 1M
    assert out["return_ratio_Ant-v5"] == pytest.approx(4_000 / 3_000)
    assert out["time_ratio_Ant-v5"] == pytest.approx(0.5)
    # Tianshou at 1M: Walker2d 3,589 (3,600 reaches it, 3,500 does not), Ant 3,258.
    assert out["tasks_at_tianshou_final_return"] == 2
    assert out["tasks_at_tianshou_det_eval"] == 1


def test_set_replaces_top_level_and_model_fields():
    from distrl.tuned import tuned

    base = tuned("humanoid").config
    config = ppo_mujoco.overridden(base, {"recompute_advantages": True,
                                          "model.action_scaling": True, "model.hiddens": [8]})
    assert config.recompute_advantages and config.model.action_scaling
    assert tuple(config.model.hiddens) == (8,)
    assert config.model.log_std_init == base.model.log_std_init and config.lr == base.lr
    with pytest.raises(SystemExit, match="only model"):
        ppo_mujoco.overridden(base, {"lr_schedule.x": 1})


def test_hopper_runs_its_1m_entry_from_a_1m_budget():
    from distrl.tuned import tuned

    assert ppo_mujoco.entry_for("Hopper-v5", 300_000) == "hopper"
    assert ppo_mujoco.entry_for("Hopper-v5", 1_000_000) == "hopper_1m"
    assert ppo_mujoco.entry_for("Walker2d-v5", 1_000_000) == "walker2d"
    exact, recipe = tuned("hopper_1m"), tuned("walker2d")
    assert exact.config.advantage_normalization == "none"
    assert exact.config.recompute_advantages and not recipe.config.recompute_advantages
    assert (exact.num_envs, recipe.num_envs) == (8, 4)
    assert exact.config.model == recipe.config.model and exact.config.lr == recipe.config.lr


def test_a_trial_runs_its_entrys_env_config_and_vector_mode(monkeypatch):
    import distrl
    import distrl.core.evaluation
    from distrl.tuned import tuned

    runs = []

    def train(config, run):
        runs.append((config, run))
        return {"checkpoint": "x", "env/episode_return_mean": 1.0, "time/total_s": 1.0,
                "env/steps_total": 8}

    monkeypatch.setattr(distrl, "train_ppo", train)
    monkeypatch.setattr(distrl.core.evaluation, "run_episodes",
                        lambda *a, **k: type("Eps", (), {"returns": [2.0]}))
    monkeypatch.setattr(ppo_mujoco, "OUT", Path("/nonexistent/out"))
    ppo_mujoco.run_distrl("Humanoid-v5", 0, 8, 0)
    entry = tuned("humanoid")
    (config, run), = runs
    assert (run.vector_mode, run.env_config) == (entry.vector_mode, entry.env_config)
    assert config == entry.for_runners(0)


def test_a_variant_runs_in_a_folder_of_its_own():
    plain = ppo_mujoco.run_folder("Hopper-v5", 0, 1)
    assert plain.name == "ppo_Hopper-v5_0_1"
    variants = [ppo_mujoco.run_folder("Hopper-v5", 0, 1, entry="walker2d"),
                ppo_mujoco.run_folder("Hopper-v5", 0, 1, {"lr": 1e-4}),
                ppo_mujoco.run_folder("Hopper-v5", 0, 1, {"lr": 2e-4}),
                ppo_mujoco.run_folder("Hopper-v5", 0, 1, {"lr": 1e-4}, "walker2d")]
    assert len({plain, *variants}) == 5
    # The same fields named in another order are the same variant.
    assert (ppo_mujoco.run_folder("Hopper-v5", 0, 1, {"lr": 1e-4, "gamma": 0.9})
            == ppo_mujoco.run_folder("Hopper-v5", 0, 1, {"gamma": 0.9, "lr": 1e-4}))


def test_the_plot_reads_each_seeds_default_run_and_skips_variants(tmp_path):
    pytest.importorskip("matplotlib")
    import plot_ppo_mujoco

    row = {"env/steps_total": 2048, "env/episode_return_mean": 12.5, "time/total_s": 1.0}
    for seed, folder in ((1, ppo_mujoco.run_folder("Hopper-v5", 0, 1)),
                         (9, ppo_mujoco.run_folder("Hopper-v5", 0, 1, entry="walker2d")),
                         (9, ppo_mujoco.run_folder("Hopper-v5", 0, 1, {"lr": 1e-4}))):
        path = tmp_path / "runs" / folder.name / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({**row, "seed": seed}) + "\n")
    found = plot_ppo_mujoco.runs(tmp_path, "Hopper-v5")
    assert list(found) == [1] and found[1][0]["seed"] == 1
