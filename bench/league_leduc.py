"""Leduc poker: the main agent's exact NashConv over wall time, OpenSpiel's CFR+ in the
same run for reference (bench/_poker.py). Bar: median NashConv of the last 60 s <= 0.2
within 1,800 s (OpenSpiel's R-NaD reference: about 0.2 after 1M learner steps).

    python bench/league_leduc.py [--seconds 1800] [--seed 0]

The same league as Kuhn's (pure self-play with magnetic mirror descent), with a wider
network for Leduc's 936 information states; counterfactual weighting
(Magnet.counterfactual: without samples it descends faster, 0.094 against 0.16 for
on-policy weighting after 3,500 iterations, bench/leduc_dynamics.py; from samples the
two land closer, 0.39 against 0.45) and a magnet coefficient of 0.5; magnet phases
that lengthen by 10% each (a constant phase descends faster at first, then climbs
back); poker's undiscounted Monte Carlo returns (gamma = lambda = 1); a learning rate 3x
larger at first (the policy moved too little per update) decaying to 1e-5; an entropy
bonus from 0.1 to 0.03 over 16M moves (without one, the counterfactual run stayed above
2; reaching 0.03 by 6M was worse from samples, though not without them); and
evaluations every 16 iterations (18% more moves in the same time than every 4).
docs/benchmarks.md has the trials.
"""

from __future__ import annotations

from _poker import main

from distrl import LeagueConfig, LeagueRules, Magnet, ModelConfig

CONFIG = LeagueConfig(
    rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0,
                      self_play_prob=1.0, exploiter_check_prob=0.0),
    magnet=Magnet(coeff=0.7, update_steps=100_000, update_growth=1.1, counterfactual=True),
    model=ModelConfig(hiddens=(128, 128), vf_hiddens=(64, 64), state_critic=True),
    gamma=1.0, lambda_=1.0,
    train_batch_size=4096, minibatch_size=1024, num_epochs=4,
    lr_schedule=((0, 1e-3), (3_000_000, 2e-4), (12_000_000, 2e-5)),
    entropy_coeff=((0, 0.35), (16_000_000, 0.105)), advantage_normalization="none",
    use_kl_loss=False, num_envs=64,
    league_eval_interval=16, league_eval_games=20, league_eval_average_window=96)

if __name__ == "__main__":
    main("leduc_poker", CONFIG, seconds=1800.0, levels=(1.0, 0.5, 0.2), cfr_seconds=30.0)
