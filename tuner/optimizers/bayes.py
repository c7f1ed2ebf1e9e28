"""Bayesian optimization for kernel tuning: the farm's model-based strategy.

What makes it fit for a farm rather than a notebook:

- **Candidates, not a continuous box.** The acquisition is evaluated over the enumerated valid,
  unobserved configs (all of them, or a pool of the best configs' one-parameter neighbours plus a
  random sample when the space is large), so every proposal is a valid member and never a repeat.
- **Encodings that match kernels.** log2 for power-of-two parameters, rank for other numbers,
  one-hot for strings (encoding.py); the target is log(time), because kernel times differ by
  factors and a 2x slowdown matters the same at 1 ms as at 100 ms.
- **Failed configs teach it.** A second GP, fitted to failed-or-not labels, gives each candidate a
  probability of working; the acquisition is multiplied by it (constrained expected improvement).
  Without this, failing regions keep attracting proposals: a model fitted on the successful
  points only does not know they fail (ANCHORS.md: Kernel Tuner's BO then falls below random).
  ``failures="penalty"`` instead imputes the worst observed time; ``"ignore"`` is for ablations.
- **Diverse batches.** k free workers get k proposals from one posterior that is conditioned on
  each pick as a fantasized observation (kriging believer); pending trials in the history are
  conditioned on the same way, so successive coordinator steps do not re-propose their neighbourhood.
- **Fast enough to be rebuilt every step.** Hyperparameters are fitted on at most ``fit_max``
  observations (the best quarter plus a deterministic random sample), the posterior uses at most
  ``train_max`` observations, and the pool is capped, so an ask costs tens of milliseconds on one
  core at any history length (gp.py explains why not scikit-optimize's own GP).
- **Warm start.** Prior observations (other problem sizes / GPUs of the kernel) seed the initial
  design with their best configs and teach the feasibility model where no own observation exists.
- **Deterministic.** Everything random draws from ``self.rng()`` (seed and history length).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from core.space import Config
from tuner.optimizers.acquisition import acquisition
from tuner.optimizers.base import Optimizer
from tuner.optimizers.candidates import CandidateTable, candidate_table, configs_at
from tuner.optimizers.design import maximin
from tuner.optimizers.gp import GaussianProcess, Hyperparameters, fit_hyperparameters
from tuner.optimizers.observed import Observed, observe

FAILURE_MODES = ("feasibility", "penalty", "both", "ignore")


class BayesianOptimizer(Optimizer):
    """Options:
        n_init (int, 10): space-filling (or prior-seeded) proposals before the model takes over.
        acquisition (str, "ei"): "ei", "lcb" or "pi" (scikit-optimize's implementations).
        xi (float, 0.0): EI/PI exploration margin, in standard deviations of log time.
        failures (str, "feasibility"): how failed configs teach the model (see module docstring).
        pool (int, 4000): most candidates scored per ask.
        train_max (int, 256): most observations in the posterior.
        fit_max (int, 64): most observations used to fit hyperparameters.
        prior_init (int, 5): initial proposals taken from the best prior configs when warm-starting.
    """

    name = "bayes"

    def _option(self, key: str, default: Any) -> Any:
        return type(default)(self.options.get(key, default))

    def ask(self, n: int) -> list[Config]:
        table = candidate_table(self.space, self.context)
        observed = observe(table, self.space, self.history)
        free = np.ones(len(table), dtype=bool)
        free[observed.seen_rows] = False
        free_rows = np.flatnonzero(free)
        n = min(n, len(free_rows))
        if n <= 0:
            return []
        rng = self.rng()
        with threadpool_limits(1):  # small matrices: BLAS threads only add overhead and contention
            rows = self._propose(table, observed, free_rows, n, rng)
        return configs_at(self.space, table, rows)

    # ------------------------------------------------------------------------------ phases
    def _propose(
        self, table: CandidateTable, observed: Observed, free_rows: np.ndarray, n: int, rng: np.random.Generator
    ) -> list[int]:
        n_init = self._option("n_init", 10)
        placed = len(observed.seen_rows)
        chosen: list[int] = []
        init_slots = max(0, n_init - placed)
        if init_slots:
            chosen = self._initial(table, observed, free_rows, min(n, init_slots), rng)
        if len(chosen) < n:
            remaining = np.setdiff1d(free_rows, chosen, assume_unique=True)
            if len(observed.success_rows) >= 2:
                chosen += self._model_based(table, observed, remaining, n - len(chosen), chosen, rng)
            else:  # nothing to model yet (everything failed so far): keep spreading out
                placed_rows = np.concatenate([observed.seen_rows, np.array(chosen, dtype=np.int64)])
                chosen += maximin(table.features, remaining, placed_rows, n - len(chosen), rng)
        return chosen

    def _initial(
        self, table: CandidateTable, observed: Observed, free_rows: np.ndarray, n: int, rng: np.random.Generator
    ) -> list[int]:
        chosen = self._from_prior(table, observed, free_rows, n)
        remaining = np.setdiff1d(free_rows, chosen, assume_unique=True)
        placed = np.concatenate([observed.seen_rows, np.array(chosen, dtype=np.int64)])
        return chosen + maximin(table.features, remaining, placed, n - len(chosen), rng)

    def _from_prior(self, table: CandidateTable, observed: Observed, free_rows: np.ndarray, n: int) -> list[int]:
        """The best prior configs not yet tried here, up to ``prior_init`` in all."""
        if not self.prior:
            return []
        budget = min(n, self._option("prior_init", 5) - _count_prior_tried(table, self, observed))
        if budget <= 0:
            return []
        prior = observe(table, self.space, self.prior)
        order = prior.success_rows[np.argsort(prior.log_time, kind="stable")]
        free = set(free_rows.tolist())
        return [int(r) for r in order if int(r) in free][:budget]

    def _model_based(
        self,
        table: CandidateTable,
        observed: Observed,
        free_rows: np.ndarray,
        n: int,
        already: list[int],
        rng: np.random.Generator,
    ) -> list[int]:
        train_rows, y, best, measured = self._targets(observed, rng)
        x = table.features[train_rows]
        # Hyperparameters from measured times only: imputed penalties are not smooth data.
        fit_rows = np.flatnonzero(measured)[_subset(int(measured.sum()), self._option("fit_max", 64), y[measured], rng)]
        hp = fit_hyperparameters(x[fit_rows], _standardize(y[fit_rows]))
        gp = GaussianProcess(x, y, hp)

        pool = self._pool(table, observed, free_rows, rng, len(train_rows))
        fantasies = np.concatenate([observed.pending_rows, np.array(already, dtype=np.int64)])
        if self._option("condition_failures", False):
            fantasies = np.concatenate([observed.failed_rows[-self._option("train_max", 256) // 2 :], fantasies])
        posterior = gp.pool(table.features[np.concatenate([pool, fantasies])])
        for i in range(len(pool), len(pool) + len(fantasies)):
            posterior.condition(i)
        feasible = self._feasibility(table, observed, np.concatenate([pool, fantasies]), rng, hp)

        name = self._option("acquisition", "ei")
        xi = self._option("xi", 0.0)
        taken = np.zeros(len(pool) + len(fantasies), dtype=bool)
        taken[len(pool) :] = True
        chosen: list[int] = []
        for _ in range(min(n, len(pool))):
            score = acquisition(name, posterior.mean, posterior.std, best, xi=xi) * feasible
            if not np.any(score[~taken] > 0):  # EI underflow far from the incumbent: exploit the mean
                score = -posterior.mean + np.log(np.maximum(feasible, 1e-12))
            score[taken] = -np.inf
            i = int(np.argmax(score))
            taken[i] = True
            chosen.append(int(pool[i]))
            posterior.condition(i)
        return chosen

    # ------------------------------------------------------------------------------ pieces
    def _targets(
        self, observed: Observed, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
        """Training rows, standardized targets and the incumbent (standardized best)."""
        rows, y = observed.success_rows, observed.log_time
        n_success = len(rows)
        if self._option("failures", "feasibility") in ("penalty", "both") and len(observed.failed_rows):
            penalty = float(np.quantile(y, self._option("penalty_quantile", 1.0)))
            rows = np.concatenate([rows, observed.failed_rows])
            y = np.concatenate([y, np.full(len(observed.failed_rows), penalty)])
        keep = _subset(len(rows), self._option("train_max", 256), y, rng)
        rows, y = rows[keep], y[keep]
        z = _standardize(y)
        best = float(z[np.argmin(y)])
        return rows, z, best, keep < n_success

    def _pool(
        self,
        table: CandidateTable,
        observed: Observed,
        free_rows: np.ndarray,
        rng: np.random.Generator,
        n_train: int,
    ) -> np.ndarray:
        """Candidates to score: all free ones, or (when too many for the time budget: the cost is
        pool size x training size) the best configs' neighbours plus a random sample."""
        limit = min(self._option("pool", 4000), max(1000, self._option("pool_work", 600_000) // max(n_train, 1)))
        if len(free_rows) <= limit:
            return free_rows
        top = observed.success_rows[np.argsort(observed.log_time, kind="stable")[:10]]
        near = np.intersect1d(table.neighbours(top), free_rows)
        if len(near) > limit // 2:
            near = np.sort(rng.choice(near, limit // 2, replace=False))
        rest = np.setdiff1d(free_rows, near, assume_unique=True)
        sample = rng.choice(rest, min(len(rest), limit - len(near)), replace=False)
        return np.sort(np.concatenate([near, sample]))

    def _feasibility(
        self,
        table: CandidateTable,
        observed: Observed,
        rows: np.ndarray,
        rng: np.random.Generator,
        objective_hp: Hyperparameters,
    ) -> np.ndarray:
        """Probability that each row's config works (1 where failures do not shape the model)."""
        if self._option("failures", "feasibility") not in ("feasibility", "both"):
            return np.ones(len(rows))
        ok, bad = observed.success_rows, observed.failed_rows
        if self.prior:  # prior outcomes count where this job has no observation of its own
            prior = observe(table, self.space, self.prior)
            own = set(observed.seen_rows.tolist())
            ok = np.union1d(ok, [r for r in prior.success_rows.tolist() if r not in own])
            bad = np.union1d(bad, [r for r in prior.failed_rows.tolist() if r not in own])
            bad = np.setdiff1d(bad, ok)
        if len(bad) == 0 or len(ok) == 0:
            return np.ones(len(rows))
        labelled = np.concatenate([ok, bad]).astype(np.int64)
        label = np.concatenate([np.zeros(len(ok)), np.ones(len(bad))])
        keep = _subset(len(labelled), self._option("train_max", 256), -label, rng)
        labelled, label = labelled[keep], label[keep]
        rate = float(label.mean())
        target = label - rate
        fit_rows = _subset(len(labelled), self._option("fit_max", 64), -label, rng)
        x = table.features[labelled]
        if self._option("feasibility_fit", "own") == "own":
            hp = fit_hyperparameters(x[fit_rows], target[fit_rows])
        else:
            hp = objective_hp
        mean = GaussianProcess(x, target, hp).mean(table.features[rows])
        p_ok = np.clip(1.0 - (rate + mean), 0.01, 1.0)
        return p_ok ** self._option("feasibility_power", 1.0)


def _standardize(y: np.ndarray) -> np.ndarray:
    sd = float(y.std())
    return (y - y.mean()) / (sd if sd > 1e-12 else 1.0)


def _subset(size: int, limit: int, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of at most ``limit`` items: the best (lowest ``y``) quarter plus a random rest."""
    if size <= limit:
        return np.arange(size)
    order = np.argsort(y, kind="stable")
    best = order[: limit // 4]
    rest = rng.choice(order[limit // 4 :], limit - len(best), replace=False)
    return np.sort(np.concatenate([best, rest]))


def _count_prior_tried(table: CandidateTable, optimizer: Optimizer, observed: Observed) -> int:
    """How many of this job's observations are prior configs (already spent on the warm start)."""
    if not optimizer.prior:
        return 0
    prior_rows = set(observe(table, optimizer.space, optimizer.prior).success_rows.tolist())
    return sum(1 for r in observed.seen_rows.tolist() if r in prior_rows)
