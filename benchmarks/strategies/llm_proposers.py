"""How an LLM arm's quality changes sample efficiency, on replay: bayes_llm with stand-in
proposers against plain bayes (failed configs kept).

The proposers answer the arm's ProposalRequest from the landscape itself, through the same
Proposer interface as the HTTP client (tuner/strategies/llm.py), so parsing is skipped but
validation, the arm's schedule and the batch mixing are the real ones:
- ``oracle``: the fastest configs of the landscape not yet measured (a perfect model);
- ``random``: valid configs drawn at random (a model that knows the space but not the kernel);
- ``adversarial``: the slowest or failing configs of the landscape, plus invalid ones (a model
  that is confidently wrong).
Reported per landscape and arm: mean fraction of the optimum at 100 evaluations, median
evaluations to 0.95, and the cost in evaluations to 0.95 relative to plain bayes.

Usage:
    python benchmarks/strategies/llm_proposers.py --landscapes LANDSCAPES [--only NAME ...] \
        [--budget 100] [--repeats 10] [--jobs 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from kernelfarm.core.landscape import Landscape, load_landscape
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.bayes_llm import LLMAssistedBayes
from kernelfarm.tuner.strategies.llm import ProposalRequest
from kernelfarm.tuner.strategy_benchmark.metrics import summarize
from kernelfarm.tuner.strategy_benchmark.replay import replay
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name

ARMS = ("bayes", "oracle", "random", "adversarial")


class ReplayedProposer:
    """A stand-in model that answers from the recorded landscape."""

    def __init__(self, kind: str, landscape: Landscape, seed: int) -> None:
        self.name = f"llm:{kind}"
        self.kind = kind
        self.rng = np.random.default_rng(seed)
        entries = landscape.entries
        ranked = sorted(entries, key=lambda k: t if (t := entries[k].mean_ms) is not None else math.inf)
        self.fastest = ranked
        self.slowest = ranked[::-1]  # failing configs (inf) first, then the slowest
        self.space = landscape.space

    def propose(self, request: ProposalRequest) -> list[Any]:
        seen = {self.space.key(c) for c, _ in request.best}
        if self.kind == "oracle":
            # the best unmeasured configs (the arm validates against the full history as well)
            return [
                self.space.config_from_key(k) for k in self.fastest[: request.n + request.observed] if k not in seen
            ]
        if self.kind == "random":
            picks = self.rng.choice(len(self.fastest), request.n, replace=False)
            return [self.space.config_from_key(self.fastest[int(i)]) for i in picks]
        junk = [{"not_a_parameter": 1}, "fastest config"]
        return junk + [self.space.config_from_key(k) for k in self.slowest[: request.n + request.observed]]


def _task(args: tuple[str, str, int, int]) -> list[float | None]:
    path, arm, budget, seed = args
    landscape = load_landscape(Path(path))
    if arm == "bayes":
        return replay(landscape, BayesianOptimizer, budget, seed).values
    proposer = ReplayedProposer(arm, landscape, 40_000 + seed)

    class Arm(LLMAssistedBayes):
        proposer_factory = staticmethod(lambda: proposer)

    return replay(landscape, Arm, budget, seed).values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--only", action="append")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    paths = [p for p in sorted(args.landscapes.glob("*.json*")) if not args.only or landscape_name(p) in args.only]
    tasks = [(str(p), arm, args.budget, r) for p in paths for arm in ARMS for r in range(args.repeats)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_task, tasks, chunksize=1))
    it = iter(results)
    report: dict[str, Any] = {"settings": {"budget": args.budget, "repeats": args.repeats, "keep_failures": True},
                              "landscapes": {}}  # fmt: skip
    for path in paths:
        landscape = load_landscape(path)
        optimum = min(r.mean_ms for r in landscape.entries.values() if r.mean_ms is not None)
        summaries = {arm: summarize([next(it) for _ in range(args.repeats)], optimum, args.budget) for arm in ARMS}
        entry = {arm: summary.as_dict() for arm, summary in summaries.items()}
        base = summaries["bayes"].n95_median
        for arm in ARMS:
            n95 = summaries[arm].n95_median
            entry[arm]["n95_cost_vs_bayes"] = None if base is None or n95 is None else n95 / base - 1
            print(
                landscape_name(path),
                arm,
                summaries[arm].frac_at["100"],
                n95,
                entry[arm]["n95_cost_vs_bayes"],
                flush=True,
            )
        report["landscapes"][landscape_name(path)] = entry
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
