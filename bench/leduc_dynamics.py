"""The league's update on Leduc without samples: exact values, one table for both
players, to tell the update rule's limits from sampling noise (docs/league.md).

    python bench/leduc_dynamics.py [--iterations 3000] [--every 250] [--coeffs 2.0 0.5]

Each iteration is one step of what a league learner's PPO + magnet loss does in
expectation, per information state I of self-play: the mirror-descent step

    pi' ∝ (pi * magnet^(eta c) * exp(eta A / sigma))^(1 / (1 + eta c))

with A = Q(I, .) - V(I) under the current table (sigma: the batch's advantage scale),
the step eta proportional to I's self-play reach (on-policy samples: a state visited
twice as often moves twice as far), and the magnet moved to the policy on the bench's
schedule (Magnet.update_steps / update_growth, in iterations). Variants per visit of
I: ``on_policy`` weighs every term alike (the league without Magnet.counterfactual);
``dilated`` weighs only the magnet term, by E[1 / (others' and chance's reach)] over
I's histories; ``counterfactual`` is Magnet.counterfactual: the policy term by
1 / own reach, the magnet term by 1 / reach of the history; each weight over its batch
mean. The magnet's temperature at I is the ratio of the two weights: with the last two
it grows as the others make I rarer. ``--entropy`` adds the bench's entropy bonus (a KL
to uniform, weighted as the magnet term). JSON: NashConv every ``every`` iterations per
variant.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from distrl.games.games import import_extra
from distrl.games.nash import table_nash_conv


class Tree:
    """A two-player zero-sum game's histories as flat arrays: one edge per (node,
    outcome), with the edge's table row (-1 at chance) and chance probability."""

    def __init__(self, game: object):
        policy_lib = import_extra("open_spiel.python.policy", "open_spiel")
        lookup = policy_lib.TabularPolicy(game).state_lookup
        nodes, depth, edges, self.utility = [game.new_initial_state()], [0], [], {}
        for i, s in enumerate(iter(nodes)):  # grows as it goes: breadth first
            if s.is_terminal():
                self.utility[i] = s.returns()[0]
                continue
            chance = s.is_chance_node()
            outcomes = s.chance_outcomes() if chance else [(a, 1.0) for a in s.legal_actions()]
            row = -1 if chance else lookup[s.information_state_string()]
            for a, p in outcomes:
                nodes.append(s.child(a))
                depth.append(depth[i] + 1)
                edges.append((i, len(nodes) - 1, row, a if row >= 0 else 0, p,
                              -1 if chance else s.current_player()))
        e = np.array(edges, dtype=np.float64)
        self.parent, self.child, self.row, self.action = e[:, :4].astype(int).T
        self.prob, self.player = e[:, 4], e[:, 5].astype(int)
        self.depth, self.n = np.array(depth)[self.parent], len(nodes)
        rows, actions = len(lookup), game.num_distinct_actions()
        self.legal = np.zeros((rows, actions), bool)
        dec = self.row >= 0
        self.legal[self.row[dec], self.action[dec]] = True
        # One entry per decision node: its row and player.
        self.dnode, first = np.unique(self.parent[dec], return_index=True)
        self.drow, self.dplayer = self.row[dec][first], self.player[dec][first]

    def reach(self, table: np.ndarray, fixed: int | None = None) -> np.ndarray:
        """Probability of each node; player ``fixed``'s own actions count as 1."""
        dec = self.row >= 0
        w = np.where(dec, table[np.maximum(self.row, 0), self.action], self.prob)
        if fixed is not None:
            w = np.where(dec & (self.player == fixed), 1.0, w)
        reach = np.zeros(self.n)
        reach[0] = 1.0
        for d in range(self.depth.max() + 1):
            m = self.depth == d
            reach[self.child[m]] = reach[self.parent[m]] * w[m]
        return reach

    def q_values(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(self-play reach of each row, Q(row, a) for the row's player)."""
        reach = self.reach(table)
        dec = self.row >= 0
        w = np.where(dec, table[np.maximum(self.row, 0), self.action], self.prob)
        value = np.zeros(self.n)
        for k, u in self.utility.items():
            value[k] = u
        for d in range(self.depth.max(), -1, -1):  # player 0's value, bottom up
            m = self.depth == d
            acc = np.zeros(self.n)
            np.add.at(acc, self.parent[m], w[m] * value[self.child[m]])
            value[np.unique(self.parent[m])] = acc[np.unique(self.parent[m])]
        d = np.zeros(len(table))
        np.add.at(d, self.drow, reach[self.dnode])
        q = np.zeros(table.shape)
        sign = np.where(self.player[dec] == 0, 1.0, -1.0)
        np.add.at(q, (self.row[dec], self.action[dec]),
                  reach[self.parent[dec]] * sign * value[self.child[dec]])
        return d, q / np.maximum(d, 1e-300)[:, None]

    def others_reach(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the others' and chance's reach summed over its histories, and how
        many histories they reach."""
        ocr, count = np.zeros(len(table)), np.zeros(len(table))
        for me in (0, 1):
            others = self.reach(table, fixed=me)[self.dnode]
            mine = self.dplayer == me
            np.add.at(ocr, self.drow[mine], others[mine])
            np.add.at(count, self.drow[mine], (others[mine] > 0).astype(float))
        return ocr, count


def run(tree: Tree, game: object, variant: str, coeff: float, lr: float, first: int,
        growth: float, iterations: int, every: int, sigma: float,
        entropy: tuple[float, float, int] = (0.0, 0.0, 1)) -> list[float]:
    legal = tree.legal
    table = legal / np.maximum(legal.sum(1, keepdims=True), 1)
    magnet, next_update, phase, curve = table.copy(), first, float(first), []
    for t in range(1, iterations + 1):
        d, q = tree.q_values(table)
        adv = np.where(legal, q - (table * q).sum(1, keepdims=True), 0.0) / sigma
        ocr, count = tree.others_reach(table)
        own = d / np.maximum(ocr, 1e-300)
        # Per visit of a row: the policy term's weight (1, or 1 / own reach when
        # counterfactual) and the magnet's (1, or 1 / (own x others' reach) of the
        # history), each over its batch mean; their ratio is the row's temperature.
        pg = 1 / np.maximum(own, 1e-300) if variant == "counterfactual" else np.ones(len(d))
        reg = (count / np.maximum(d, 1e-300) if variant == "counterfactual"
               else count / np.maximum(ocr, 1e-300) if variant == "dilated" else np.ones(len(d)))
        pg, reg = pg / ((pg * d).sum() / d.sum()), reg / ((reg * d).sum() / d.sum())
        step = d * pg
        eta = (lr * step / step.max())[:, None]
        temperature = (reg / np.maximum(pg, 1e-300))[:, None]
        c = coeff * temperature
        # The entropy bonus is a KL to uniform, weighted as the magnet's term is; uniform's
        # log is one number per state, gone with the normalisation below.
        e = np.interp(t, (0, entropy[2]), entropy[:2]) * temperature
        logits = (np.log(np.maximum(table, 1e-300)) + eta * c * np.log(np.maximum(magnet, 1e-300))
                  + eta * adv) / (1 + eta * c + eta * e)
        logits = np.where(legal, logits - np.where(legal, logits, -np.inf).max(1, keepdims=True),
                          -np.inf)
        table = np.where(legal, np.exp(logits), 0.0)
        table /= np.maximum(table.sum(1, keepdims=True), 1e-300)
        if t >= next_update:
            magnet, phase = table.copy(), phase * growth
            next_update = t + round(phase)
        if t % every == 0:
            curve.append(round(table_nash_conv(game, np.where(legal, table, 0.0)), 4))
    return curve


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--game", default="leduc_poker")
    p.add_argument("--iterations", type=int, default=3000)
    p.add_argument("--every", type=int, default=250)
    p.add_argument("--coeffs", type=float, nargs="+", default=[2.0, 0.5])
    p.add_argument("--lr", type=float, default=3.0, help="step at the most reached state")
    p.add_argument("--first", type=int, default=24, help="first magnet phase, iterations "
                   "(the bench's 100k moves / 4,096 per batch)")
    p.add_argument("--growth", type=float, default=1.1)
    p.add_argument("--sigma", type=float, default=3.5, help="advantage scale, chips")
    p.add_argument("--entropy", type=float, nargs=2, default=(0.0, 0.0),
                   help="entropy bonus at the first and the --entropy-span-th iteration, "
                   "linear between (the bench: 0.1 0.03)")
    p.add_argument("--entropy-span", type=int, default=3906, help="iterations (the bench's "
                   "16M moves / 4,096)")
    args = p.parse_args()
    pyspiel = import_extra("pyspiel", "open_spiel")
    game = pyspiel.load_game(args.game)
    tree = Tree(game)
    out = {"game": args.game, "iterations": args.iterations, "every": args.every,
           "lr": args.lr, "first": args.first, "growth": args.growth,
           "entropy": args.entropy, "entropy_span": args.entropy_span}
    for variant in ("on_policy", "dilated", "counterfactual"):
        for coeff in args.coeffs:
            start = time.perf_counter()
            curve = run(tree, game, variant, coeff, args.lr, args.first, args.growth,
                        args.iterations, args.every, args.sigma,
                        (*args.entropy, args.entropy_span))
            out[f"{variant}_coeff_{coeff}"] = {"nash_conv": curve, "best": min(curve),
                                               "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
