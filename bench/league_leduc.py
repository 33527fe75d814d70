"""Leduc poker: the main agent's exact NashConv over wall time, OpenSpiel's CFR+ in the
same run for reference (bench/_poker.py). Bar: median NashConv of the last 60 s <= 0.2
within 1,800 s (OpenSpiel's R-NaD reference: about 0.2 after 1M learner steps).

    python bench/league_leduc.py [--seconds 1800] [--seed 0]

The same league as Kuhn's (pure self-play with magnetic mirror descent), with a wider
network for Leduc's 936 information states, a stronger magnet whose phases lengthen by
10% each (a constant phase descends faster at first, then climbs back as the magnet
follows the policy's entropy down; docs/benchmarks.md has the trials), and a learning
rate at its floor from 3M moves.
"""

from __future__ import annotations

from _poker import main

from distrl import LeagueConfig, LeagueRules, Magnet, ModelConfig

CONFIG = LeagueConfig(
    rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0,
                      self_play_prob=1.0, exploiter_check_prob=0.0),
    magnet=Magnet(coeff=2.0, update_steps=200_000, update_growth=1.1),
    model=ModelConfig(hiddens=(128, 128)),
    train_batch_size=4096, minibatch_size=1024, num_epochs=4,
    lr_schedule=((0, 3e-4), (3_000_000, 3e-5)), use_kl_loss=False, num_envs=64,
    league_eval_interval=4, league_eval_games=20, league_eval_average_window=50)

if __name__ == "__main__":
    main("leduc_poker", CONFIG, seconds=1800.0, levels=(1.0, 0.5, 0.2), cfr_seconds=30.0)
