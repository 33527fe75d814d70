"""Plots of a league run: Elo over training and the payoff table as a heat map, Elo
against the fixed ladder of bench/league_elo.py, and the poker NashConv curves of
bench/league_kuhn.py and bench/league_leduc.py.

    distrl train league --tuned connect_four --num-main-exploiters 1 \\
        --num-league-exploiters 1 --stop-win-rate None --max-env-steps 2000000 \\
        --max-time-s 240 --league-eval-games 40 --league-eval-member-games 20 \\
        --logdir bench/out/runs/league_c4_full
    python bench/league_kuhn.py; python bench/league_leduc.py; python bench/league_elo.py
    python bench/plot_league.py [bench/out/runs/league_c4_full]

Writes docs/img/league_elo.png, docs/img/league_payoff.png, docs/img/league_kuhn.png,
docs/img/league_leduc.png, docs/img/league_elo_ladder.png, and docs/img/alphazero_elo.png
from an AlphaZero run's bench/league_elo.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from _plot import pyplot, save

plt = pyplot()

HERE = Path(__file__).parent
IMG = HERE.parent / "docs" / "img"


def elo(run: Path) -> None:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    fig, ax = plt.subplots(figsize=(7, 4))
    ids = sorted({k[len("league/elo/"):] for r in rows for k in r if k.startswith("league/elo/")})
    for pid in ids:
        pts = [(r["env/steps_total"], r[f"league/elo/{pid}"]) for r in rows
               if f"league/elo/{pid}" in r]
        if "@" in pid:  # snapshots: a dot at their last rating
            ax.plot(*pts[-1], "o", color="gray", ms=3)
            continue
        ax.plot(*zip(*pts, strict=True), label=pid, lw=1.5)
    ax.set(xlabel="env steps", ylabel="Elo (evaluation games only)",
           title="League Elo on connect four (gray: frozen snapshots)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, IMG / "league_elo.png")


def payoff(run: Path) -> None:
    league = json.loads((run / "checkpoint" / "progress" / "progress.json").read_text())
    table = league["algo"]["league"]["payoff"]
    ids = sorted(table, key=lambda p: (p.split("@")[0], int(p.split("@")[1]) if "@" in p else 0))
    rates = np.full((len(ids), len(ids)), np.nan)
    for i, a in enumerate(ids):
        for j, b in enumerate(ids):
            w, d, g = table.get(a, {}).get(b, (0, 0, 0))
            if g >= 1:
                rates[i, j] = (w + 0.5 * d) / g
    fig, ax = plt.subplots(figsize=(1.2 + 0.35 * len(ids), 0.8 + 0.35 * len(ids)))
    im = ax.imshow(rates, cmap="RdBu", vmin=0, vmax=1)
    ax.set_xticks(range(len(ids)), ids, rotation=90, fontsize=7)
    ax.set_yticks(range(len(ids)), ids, fontsize=7)
    ax.set(title="Payoff table: row's win rate vs column\n(training games, decayed; "
                 "blank: < 1 game)")
    fig.colorbar(im, ax=ax, shrink=0.8)
    save(fig, IMG / "league_payoff.png")


def poker(game: str, goal: float) -> None:
    """NashConv over wall time of bench/league_kuhn.py or league_leduc.py (_poker.py)."""
    data = json.loads((HERE / f"out/league_{game}.json").read_text())
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(*zip(*data["policy"], strict=True), alpha=0.5,
            label="distrl league: main_0 (PPO, magnetic mirror descent)")
    if data["average"]:
        ax.plot(*zip(*data["average"], strict=True),
                label="distrl league: main_0's average over its last evaluations")
    ax.plot(*zip(*data["cfr"], strict=True), label="OpenSpiel CFR+ (average policy)")
    ax.axhline(goal, color="gray", ls="--", lw=1, label=f"goal {goal}")
    ax.set(xscale="log", yscale="log", xlabel="wall time (s)", ylabel="NashConv",
           title=f"{game}: exact NashConv over wall time")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, IMG / f"league_{game.split('_')[0]}.png")


def ladder_elo(name: str = "league_elo", image: str = "league_elo_ladder",
               xscale: str = "log") -> None:
    """Elo over training time against the fixed ladder of bench/league_elo.py (its
    out/<name>.json: a league's snapshots, or an AlphaZero run's kept checkpoints)."""
    data = json.loads((HERE / f"out/{name}.json").read_text())
    elo, train_s = data["elo"], data["train_s"]
    order = sorted(train_s, key=train_s.get)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([train_s[p] for p in order], [elo[p] for p in order], "o-",
            label="main agent: snapshots, then the final policy")
    colors = ("gray", "tab:green", "tab:orange", "tab:red")[: len(data["bots"])]
    for bot, color in zip(data["bots"], colors, strict=True):
        ax.axhline(elo[bot], color=color, ls="--", lw=1, label=bot.replace("mcts:", "MCTS "))
    ax.set(xscale=xscale, xlabel="training seconds", ylabel="Elo (random = 0)",
           title=f"Connect four: one Elo fit of {data['games_per_pairing']} games a pairing")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, IMG / f"{image}.png")


def main() -> None:
    run = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out/runs/league_c4_full"
    if run.exists():
        elo(run)
        payoff(run)
    if (HERE / "out/league_elo.json").exists():
        ladder_elo()
    if (HERE / "out/alphazero_elo.json").exists():
        ladder_elo("alphazero_elo", "alphazero_elo", "linear")
    for game, goal in (("kuhn_poker", 0.01), ("leduc_poker", 0.2)):
        if (HERE / f"out/league_{game}.json").exists():
            poker(game, goal)


if __name__ == "__main__":
    main()
