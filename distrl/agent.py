"""``distrl.PPO("CartPole-v1", lr=3e-4).learn(20_000)`` and its kin: one object per run
for those who want one (Stable-Baselines3's ``model.learn()``, RLlib's ``algo.train()``),
over the same train_* functions, checkpoints and resume. Nothing trains here that the
function would not: ``learn`` is the function's run, a later ``learn`` its exact resume.
"""

from __future__ import annotations

import dataclasses
import difflib
import shutil
from pathlib import Path
from typing import Any, ClassVar

from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.resume import resume_logdir, saved_configs
from distrl.registry import ALGORITHMS


class Agent:
    """A run of one algorithm: its configs, its logdir once it has trained, its result."""

    algo: ClassVar[str]
    """Its ALGORITHMS entry."""

    def __init__(self, env: Any = None, *, run: RunConfig | None = None, **settings: Any):
        """``env``: an env id or factory (RunConfig.env). ``settings``: the fields of the
        algorithm's config (``lr=3e-4``, ``model=ModelConfig(...)``) and of RunConfig
        (``logdir=``, ``seed=``, ``stop_return=``), by name; ``run`` a RunConfig to start
        from."""
        config_cls = ALGORITHMS[self.algo].config
        ours, runs = _names(config_cls), _names(RunConfig)
        _refuse_unknown(type(self).__name__, settings, ours | runs)
        self.config = config_cls(**{k: v for k, v in settings.items() if k in ours})
        given = {k: v for k, v in settings.items() if k in runs and k not in ours}
        if env is not None:
            given["env"] = env
        self.run = dataclasses.replace(run or RunConfig(), **given)
        self.logdir: Path | None = None
        self.result: dict[str, Any] = {}

    @property
    def env_steps(self) -> int:
        """Env steps trained so far (0 before the first learn)."""
        return int(self.result.get("env/steps_total", 0))

    def learn(self, env_steps: int) -> dict[str, Any]:
        """Train ``env_steps`` more env steps (or until the run's stop_return / max_time_s)
        and return the result, as its train_* function does. Called again, the run goes on
        from its checkpoint exactly as ``--resume`` does."""
        if env_steps <= 0:
            raise ValueError(f"`env_steps` ({env_steps}) must be > 0.")
        run = dataclasses.replace(self.run, max_env_steps=self.env_steps + env_steps)
        if self.logdir is not None:
            run = dataclasses.replace(run, logdir=str(self.logdir), resume=str(self.logdir))
        self.result = ALGORITHMS[self.algo].train()(self.config, run)
        self.logdir = resume_logdir(self.result["checkpoint"])
        return self.result

    def evaluate(self, episodes: int = 10, **kwargs: Any) -> Any:
        """distrl.evaluate of the run's last checkpoint: greedy returns, or a game run's
        win rates against a random player."""
        from distrl.games.scoring import evaluate

        return evaluate(self._trained(), episodes, **kwargs)

    @property
    def policy(self) -> Any:
        """distrl.load_policy of the run: ``policy.act(obs)`` acts as ``distrl eval``."""
        from distrl.policy import load_policy

        return load_policy(self._trained())

    def save(self, path: str | Path) -> Path:
        """A copy of the run folder (checkpoint, config.json, metrics) at ``path``, which
        must not exist: ``load(path)``, ``distrl eval path`` and ``--resume path`` read it."""
        path = Path(path)
        if path.exists():
            raise ValueError(f"{str(path)!r} exists: save to a new path.")
        shutil.copytree(self._trained(), path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Agent:
        """The run saved at ``path`` (a logdir or its checkpoint/), ready to evaluate, to
        act, or to learn on from where it stopped (in that folder)."""
        ckpt = Checkpoint(path)
        if ckpt.algo != cls.algo:
            raise ValueError(f"{str(path)!r} holds a {ckpt.algo!r} run: load it with "
                             f"distrl.{_CLASSES[ckpt.algo]}.load.")
        agent = cls.__new__(cls)
        agent.config, agent.run = saved_configs(ckpt, ALGORITHMS[cls.algo].config)
        agent.logdir = resume_logdir(path)
        agent.result = {"env/steps_total": ckpt.progress()["env_steps"],
                        "checkpoint": str(ckpt.path)}
        return agent

    def _trained(self) -> Path:
        if self.logdir is None:
            raise ValueError(f"this {type(self).__name__} has not trained yet: call "
                             ".learn(env_steps) first.")
        return self.logdir


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _refuse_unknown(who: str, settings: dict[str, Any], known: set[str]) -> None:
    for name in settings:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            raise TypeError(f"{who}() has no setting {name!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + "; it takes its config's fields and RunConfig's.")


def _agent(algo: str, name: str, what: str) -> type[Agent]:
    """The Agent class of one algorithm: ``what`` and its config's fields as keywords."""
    config = ALGORITHMS[algo].config.__name__
    return type(name, (Agent,), {"algo": algo, "__module__": __name__,
                                 "__doc__": f"{what} ({config}'s fields as keywords)."})


PPO = _agent("ppo", "PPO", "PPO")
APPO = _agent("appo", "APPO", "APPO")
DDPPO = _agent("ddppo", "DDPPO", "DD-PPO")
Apex = _agent("apex", "Apex", "Ape-X DQN")
League = _agent("league", "League", "A league on a game")
AlphaZero = _agent("alphazero", "AlphaZero", "AlphaZero")

_CLASSES = {c.algo: c.__name__ for c in (PPO, APPO, DDPPO, Apex, League, AlphaZero)}
