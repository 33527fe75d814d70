"""Ray plumbing every algorithm shares: cluster set-up (cluster.py), placement groups
(placement.py), the Supervisor that restarts actors (supervisor.py); it knows no
algorithm.

Ray is imported here and in each algorithm's ``remote.py`` (its actors: alphazero, apex,
appo, ddppo, league, ppo; the league's ``learners.py`` too, its DistributedLearners are
actors), in ``store/remote.py`` (the policy store actor) and in ``tune.py`` (Tune's
trainables), nowhere else: a run without Ray (``num_env_runners=0``) never imports it
(tests/integration/test_no_ray.py).
"""
