"""Small deterministic envs and samples for tests."""

import time
from pathlib import Path

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """obs = [steps so far]; reward 1 per step; terminates after `end` steps.

    Wrap with TimeLimit to get truncations instead.
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, end: int = 3, nan_at: int | None = None, sleep_s: float = 0.0):
        self.end, self.nan_at, self.sleep_s = end, nan_at, sleep_s

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.t += 1
        obs = np.array([np.nan if self.t == self.nan_at else self.t], np.float32)
        return obs, 1.0, self.t >= self.end, False, {}


def counting(end=3, limit=None, nan_at=None, sleep_s=0.0):
    def make():
        env = CountingEnv(end, nan_at, sleep_s)
        return gym.wrappers.TimeLimit(env, limit) if limit else env
    return make


def claim(token_dir) -> bool:
    """True in exactly one process: the first to create ``token_dir``/claimed (O_EXCL)."""
    import os

    path = os.path.join(token_dir, "claimed")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        with open(path) as f:
            return f.read() == str(os.getpid())
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def slow_in_one_process(token_dir, sleep_s: float, end: int = 10_000):
    """Counting envs that sleep ``sleep_s`` per step in one worker process only."""
    def make():
        return CountingEnv(end, sleep_s=sleep_s if claim(token_dir) else 0.0)
    return make


def broken_in_one_process(token_dir):
    def make():
        if claim(token_dir):
            raise RuntimeError("this env cannot start here (test)")
        return CountingEnv(10_000)
    return make


class HangOnceEnv(CountingEnv):
    """Blocks for 10 minutes at step ``at`` (over all its episodes) in the one process that
    claims the token (a frozen simulator, a dead socket): only a timeout can notice it."""

    def __init__(self, token_dir, at: int):
        super().__init__(end=10_000)
        self.hang_at = at if claim(token_dir) else None
        self.steps_total = 0

    def step(self, action):
        self.steps_total += 1
        if self.steps_total == self.hang_at:
            time.sleep(600)
        return super().step(action)


def hang_once_in_one_process(token_dir, at: int):
    def make():
        return HangOnceEnv(token_dir, at)
    return make


def crash_in_learner_step(token_dir, at: int, end: int = 10_000):
    """Counting envs; in the one process that claims the token, the ``at``-th gradient
    step of that process's Learner kills the process before its all-reduce, so its
    peers have taken at-1 steps of that round when the group fails."""
    def make():
        from distrl.core.learner import Learner

        if claim(token_dir) and not hasattr(Learner, "crash_at"):
            import os

            original, calls = Learner.step, [0]
            Learner.crash_at = at

            def step(self, loss, n):
                calls[0] += 1
                if calls[0] == at:
                    os._exit(1)
                return original(self, loss, n)

            Learner.step = step
        return CountingEnv(end)
    return make


def random_rollout(n: int, seed: int = 0):
    """n samples of a 4-dim Box / Discrete(2) policy: random obs, actions, advantages and
    value targets, uniform sampling probabilities."""
    from distrl.core.types import Rollout

    rng = np.random.default_rng(seed)
    return Rollout(obs=rng.standard_normal((n, 4)).astype(np.float32),
                   actions=rng.integers(0, 2, n), logp=np.full(n, np.log(0.5), np.float32),
                   dist_inputs=np.zeros((n, 2), np.float32), values=np.zeros(n, np.float32),
                   advantages=rng.standard_normal(n).astype(np.float32),
                   value_targets=rng.standard_normal(n).astype(np.float32),
                   episode_returns=np.zeros(0), episode_lengths=np.zeros(0, np.int64),
                   env_steps=n, weights_version=0)


class WeightedRockPaperScissors:
    """One-shot rock-paper-scissors with PettingZoo's parallel API, where a win pays 1
    (rock over scissors), 2 (paper over rock) or 3 (scissors over paper): its one Nash
    equilibrium plays (1/2, 1/6, 1/3), against which every action earns 0."""

    PAYOFF = np.array([[0, -2, 1], [2, 0, -3], [-1, 3, 0]], np.float32)  # row vs column

    def __init__(self):
        self.possible_agents = ["player_0", "player_1"]

    def observation_space(self, agent):
        return gym.spaces.Box(0, 1, (1,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        r = float(self.PAYOFF[actions["player_0"], actions["player_1"]])
        self.agents = []
        done = dict.fromkeys(self.possible_agents, True)
        return ({a: np.zeros(1, np.float32) for a in self.possible_agents},
                {"player_0": r, "player_1": -r}, done,
                dict.fromkeys(self.possible_agents, False),
                {a: {} for a in self.possible_agents})

    def close(self):
        pass


class ShortWinLongDraw:
    """A two-seat game whose result ignores the moves: with probability 1/2 player_0 wins
    after 2 moves, otherwise the game is drawn after 30. Any policy wins 1/2 of its games
    as player_0 and none as player_1: a true win rate of 0.25 over both seats, which an
    evaluation that keeps the first games to finish over-counts (short games are wins)."""

    def __init__(self):
        self.possible_agents = ["player_0", "player_1"]
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return gym.spaces.Box(0, 1, (1,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.left, self.win = (2, True) if self.rng.random() < 0.5 else (30, False)
        return self._obs(), {a: {} for a in self.agents}

    def _obs(self):
        return {a: np.zeros(1, np.float32) for a in self.agents}

    def step(self, actions):
        self.left -= 1
        over = self.left == 0
        r = 1.0 if over and self.win else 0.0
        if over:
            self.agents = []
        return (self._obs(), {"player_0": r, "player_1": -r},
                dict.fromkeys(self.possible_agents, over),
                dict.fromkeys(self.possible_agents, False),
                {a: {} for a in self.possible_agents})

    def close(self):
        pass


def first_legal_move(obs, action_mask):
    """A bot for `--opponent tests.fakes:first_legal_move`."""
    return int(np.flatnonzero(action_mask)[0])


def record_appo_batches(monkeypatch) -> list:
    """The fragments train_appo's learner trains on, in order (train_batch wrapped)."""
    import distrl.appo.train as appo_train

    trained, real = [], appo_train.train_batch

    def recording(model, fragments, *args):
        trained.extend(fragments)
        return real(model, fragments, *args)

    monkeypatch.setattr(appo_train, "train_batch", recording)
    return trained


def quiet_run(logdir, **kw):
    """A tiny run's RunConfig: logs under ``logdir``, no progress display; ``kw`` the rest."""
    from distrl.core.config import RunConfig

    return RunConfig(**{"logdir": str(logdir), "progress": False, **kw})


# A user's own env module (tests/envmods/distrl_user_envs.py) and the line of its bug.
ENVMODS = Path(__file__).parent / "envmods"
USER_FILE = ENVMODS / "distrl_user_envs.py"
BUG_LINE = next(i for i, line in enumerate(USER_FILE.read_text().splitlines(), 1)
                if line.endswith("# BUG"))


def with_user_envs(monkeypatch) -> None:
    """The user's env module importable, and errors in their short (not --debug) form."""
    monkeypatch.syspath_prepend(str(ENVMODS))
    monkeypatch.delenv("DISTRL_DEBUG", raising=False)
