"""Leduc poker: the main agent's exact NashConv over wall time, OpenSpiel's CFR+ in the
same run for reference (bench/_poker.py). Bar: median NashConv of the last 60 s <= 0.2
within 1,800 s (OpenSpiel's R-NaD reference: about 0.2 after 1M learner steps).

    python bench/league_leduc.py [--seconds 1800] [--seeds 0 1 2] [--moves N]

The same league as Kuhn's (pure self-play with magnetic mirror descent), with a wider
network for Leduc's 936 information states; counterfactual weighting
(Magnet.counterfactual: sequence-form MMD, which without samples descends faster than
on-policy weighting, bench/leduc_dynamics.py), with the magnet and entropy terms
weighted by 1 / (visits of the information state in the batch) rather than 1 / reach
(Magnet.regulariser="visits": bounded where 1 / reach is heavy-tailed); a state critic
(LeagueConfig.state_critic: an action-value network over both hands and the public card,
used as a control variate at every later node, so the advantages stay unbiased and lose
most of the cards' and the later moves' luck; 64 x 64: 20% more moves than 128 x 128,
and the policy ended alike); advantages in chips (standardising by the batch's spread,
which the critic shrinks, would weigh the policy term up against the magnet and the
bonus), so the magnet coefficient (0.7) and the entropy bonus (0.35 -> 0.105 over 23.0M
moves) are the exact dynamics' 0.2 and the earlier bench's 0.1 -> 0.03 times 3.5, the
Monte Carlo advantages' spread; magnet phases that lengthen by 10% each; poker's
undiscounted returns (gamma = 1); a learning rate decaying 1e-3 -> 2e-4 at 2.88M moves ->
2e-5 at 10.08M -> 5e-6 at 15.84M (the last step damps the policy's jumps between
evaluations); evaluations every 16 iterations; and the average policy over the last 16
evaluations. The games run on two Ray match runners (num_env_runners=2: both cores,
1.27x the moves of one process on this machine) and the learner updates on two torch
threads while they wait (1.13x more), so every schedule in moves (learning rate,
entropy bonus, magnet phases) is the one-process schedule it was tuned as, times 1.44:
the same schedule in wall time, with more samples in each phase. docs/league.md
says why each setting.
"""

from __future__ import annotations

from _poker import main

from distrl import LeagueConfig, LeagueRules, Magnet, ModelConfig

CONFIG = LeagueConfig(
    rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0,
                      self_play_prob=1.0, exploiter_check_prob=0.0),
    magnet=Magnet(coeff=0.7, update_steps=144_000, update_growth=1.1, counterfactual=True,
                  regulariser="visits"),
    model=ModelConfig(hiddens=(128, 128), vf_hiddens=(64, 64)), state_critic=True,
    gamma=1.0, lambda_=1.0,
    train_batch_size=4096, minibatch_size=1024, num_epochs=4,
    lr_schedule=((0, 1e-3), (2_880_000, 2e-4), (10_080_000, 2e-5), (15_840_000, 5e-6)),
    entropy_coeff=((0, 0.35), (23_040_000, 0.105)), advantage_normalization="none",
    use_kl_loss=False, num_envs=64, num_env_runners=2,
    league_eval_interval=16, league_eval_games=20, league_eval_average_window=16)

if __name__ == "__main__":
    main("leduc_poker", CONFIG, seconds=1800.0, levels=(1.0, 0.5, 0.2), cfr_seconds=30.0,
         moves=9_000_000, torch_threads=2)
