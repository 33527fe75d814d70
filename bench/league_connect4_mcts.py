"""Connect four against search: train the tuned connect-four league for at most
``--train-s`` seconds (no early stop), then play its main agent greedily against a strength
ladder: the random player, its own oldest and newest snapshots, and OpenSpiel's MCTSBot
(one random rollout per leaf) with 50, 200 and 800 simulations a move, ``--games`` games
each (200: 100 per seat), every game opened with ``--opening-moves`` random moves (0 by default: the
bot's random rollouts already vary the games; distinct_games says how much).

    python bench/league_connect4_mcts.py [--train-s 1200] [--seed 0] [--set FIELD=JSON ...]
        [--ladder random mcts:50 mcts:200 mcts:800]

``--set`` replaces a field of the tuned LeagueConfig (a JSON value, e.g.
``--set entropy_coeff=0.003`` or ``--set 'model={"hiddens": [128, 128]}'``), for
experiments. Checkpoint and metrics go to bench/out/runs/<--name>_<seed>
(league_c4_mcts_<seed> by default). The last
line is JSON: win_rate_vs_mcts200 (the bar: >= 0.5) and the draw and loss rates, the same
for every rung, training seconds and the main agent's moves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "out"
LADDER = ("random", "mcts:50", "mcts:200", "mcts:800")


def configured(algo: str, overrides: list[str]) -> Any:
    from distrl.core.config import from_json
    from distrl.tuned import tuned

    config = tuned("connect_four", algo).config
    if algo == "league":
        config = dataclasses.replace(config, stop_win_rate=None)
    fields = {}
    for item in overrides:
        name, _, value = item.partition("=")
        fields[name] = json.loads(value)
    if not fields:
        return config
    # Through the config's JSON form, so nested dataclasses (model, rules) take dicts.
    saved = json.loads(json.dumps(dataclasses.asdict(config)))
    for name, value in fields.items():
        saved[name] = {**saved[name], **value} if isinstance(value, dict) else value
    return from_json(type(config), saved)


def train(algo: str, config: Any, seed: int, seconds: float, name: str,
          snapshot_every: int = 0) -> tuple[str, dict[str, Any]]:
    """Train for ``seconds``; with ``snapshot_every`` N, every N iterations a copy of the
    checkpoint without its replay goes to <logdir>/snapshots/<iteration> (for an Elo over
    training time: bench/league_elo.py)."""
    from distrl import Callbacks, RunConfig, train_alphazero, train_league

    logdir = OUT / f"runs/{name}_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)

    def snapshot(path: Path) -> None:
        iteration = json.loads((path / "manifest.json").read_text())["iteration"]
        shutil.copytree(path, logdir / f"snapshots/{iteration:06d}",
                        ignore=shutil.ignore_patterns("replay"), dirs_exist_ok=True)

    t = time.perf_counter()
    trainer = train_alphazero if algo == "alphazero" else train_league
    result = trainer(config, RunConfig(env="pettingzoo:connect_four_v3", seed=seed,
                                       max_env_steps=10**9, max_time_s=seconds,
                                       logdir=str(logdir), progress=False,
                                       checkpoint_every=snapshot_every),
                     callbacks=Callbacks(on_checkpoint=snapshot if snapshot_every else None))
    return result["checkpoint"], {"train_s": time.perf_counter() - t,
                                  "env_steps": result["env/steps_total"]}


def ladder(checkpoint: str, seed: int, opening_moves: int, games: int,
           bots: list[str]) -> dict[str, Any]:
    from distrl.core.checkpoint import Checkpoint
    from distrl.games.scoring import evaluate_league

    league = Checkpoint(checkpoint).json("progress", "progress.json")["algo"].get("league")
    players = league["players"] if league else []  # AlphaZero keeps no snapshots
    snaps = [p["id"] for p in players if p["parent"] == "main_0"]
    rungs = bots + ([snaps[0], snaps[-1]] if snaps else [])
    out: dict[str, Any] = {"snapshots": len(snaps)}
    for opponent in rungs:
        t = time.perf_counter()
        r = evaluate_league(checkpoint, "main_0", opponent, games, seed,
                            opening_moves=opening_moves)
        name = opponent.replace("mcts:", "mcts").replace("main_0@", "snapshot")
        out.update({f"win_rate_vs_{name}": r["win_rate"], f"draw_rate_vs_{name}": r["draw_rate"],
                    f"loss_rate_vs_{name}": r["loss_rate"],
                    f"distinct_games_vs_{name}": r["distinct_games"],
                    f"eval_s_vs_{name}": time.perf_counter() - t})
        print(json.dumps({"opponent": opponent, **r}), flush=True)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-s", type=float, default=1200.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--algo", choices=("league", "alphazero"), default="league",
                    help="the tuned connect-four league, or AlphaZero self-play with search")
    ap.add_argument("--opening-moves", type=int, default=0)
    ap.add_argument("--games", type=int, default=200, help="per rung, half in each seat")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=JSON")
    ap.add_argument("--name", default="league_c4_mcts", help="the run is runs/<name>_<seed>")
    ap.add_argument("--ladder", nargs="+", default=list(LADDER), help="the bots to play")
    args = ap.parse_args()
    config = configured(args.algo, args.set)
    checkpoint, trained = train(args.algo, config, args.seed, args.train_s, args.name)
    print(json.dumps({"trained": trained, "overrides": args.set}), flush=True)
    print(json.dumps({**ladder(checkpoint, args.seed, args.opening_moves, args.games,
                              args.ladder), **trained,
                      "seed": args.seed, "algo": args.algo, "overrides": args.set}))
