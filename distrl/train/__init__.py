"""One short driver per algorithm (train_ppo, train_ddppo, ...) on top of distrl.loop.

The modules are named after the algorithm, never after the public function: a public
name equal to a submodule's name is shadowed by the submodule once it is imported.
"""
