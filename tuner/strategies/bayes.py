"""Bayesian optimization for kernel tuning: the farm's model-based strategy.

What makes it fit for a farm rather than a notebook:

- **Candidates, not a continuous box.** The acquisition is evaluated over the enumerated valid,
  unobserved configs (all of them, or a pool of the best configs' one-parameter neighbours plus a
  random sample when the space is large), so every proposal is a valid member and never a repeat.
- **Encodings that match kernels.** log2 for power-of-two parameters, rank for other numbers,
  one-hot for strings (encoding.py). The target is log(time), warped to the normal scores of its
  ranks ("copula"): kernel times are heavy-tailed (a bad config can be 30x slower), and without
  the warping those few configs set the GP's scale and length scales (docs/benchmarks/STRATEGIES.md,
  ablations: on gemm_RTX_3090, 56.5 evaluations to 0.95 of the optimum with log times, 32 with this).
- **Failed configs teach it, twice.** A second GP, fitted to failed-or-not labels, gives each
  candidate a probability of working that multiplies the acquisition (constrained expected
  improvement); and failed configs enter the objective model with the worst observed time, so
  the mean just past a failure boundary is not extrapolated from the fast configs beside it.
  Without this, failing regions keep attracting proposals: a model fitted on successful points only
  sees nothing wrong there. Hyperparameters are fitted on measured
  times only, since imputed penalties are not smooth data.
- **Diverse batches.** k free workers get k proposals from one posterior that is conditioned on
  each pick as a fantasized observation (kriging believer); pending trials in the history are
  conditioned on the same way, so successive coordinator steps do not re-propose their neighbourhood.
- **Fast enough to be rebuilt every step.** Hyperparameters are fitted on at most ``fit_max``
  observations (the best quarter plus a deterministic random sample), the posterior uses at most
  ``train_max`` observations, and the pool is capped, so an ask costs tens of milliseconds on one
  core at any history length (gp.py explains why not scikit-optimize's own GP).
- **Warm start.** A model of the prior (the same kernel and problem on other GPUs) is the mean of
  the job's model, scaled by what the job's own trials say (transfer.py); its best configs are
  proposed first and prior outcomes teach the feasibility model where the job has no observation
  of its own. The prior waits until the job has measured a few configs of its own cold design;
  a prior whose ranking of them does not agree with the job's (judged against null models: the
  prior refitted to its own scores shuffled) is dropped entirely, and the job is the cold one
  (transfer.py, the gate). One that agrees is probed: its best config is measured, and the prior
  admitted only if that config is the job's fastest so far; otherwise the probe is hidden and the
  job is the cold one, one evaluation later.
- **Alignment-aware encoding, chosen per ask.** The encoding has "is a power of two" columns for
  integer parameters that are not all powers of two (encoding.py): on GPUs their effect is often
  alignment, which a rank column alone shows to the GP as noise. They find the convolution_milo
  needles but cost pnpoly its early evaluations, so ``alignment_select`` (on) fits the objective
  model with them at every ask and keeps them only where they predict the fitted points better
  left-one-out than the model without them (docs/benchmarks/STRATEGIES.md, issue 17).
- **A local arm.** Once the incumbent has stopped improving, one proposal in ``local_every`` goes
  to its untried one-parameter neighbours (the acquisition's pick among them): the model-based
  search otherwise settles, now and then, one parameter away from a better config (local.py).
- **Deterministic.** Everything random draws from ``self.rng()`` (seed and history length).
"""

from __future__ import annotations

import math

import numpy as np
from threadpoolctl import threadpool_limits

from kernelfarm.core.space import Config
from kernelfarm.core.strategy_options.bayes import BayesSettings
from kernelfarm.tuner.strategies.acquisition import acquisition
from kernelfarm.tuner.strategies.base import Observation, Optimizer
from kernelfarm.tuner.strategies.candidates import CandidateTable, candidate_table, configs_at
from kernelfarm.tuner.strategies.design import maximin
from kernelfarm.tuner.strategies.gp import (
    LENGTH_PRIOR,
    GaussianProcess,
    Hyperparameters,
    PoolPosterior,
    fit_hyperparameters,
    loo_log_predictive,
)
from kernelfarm.tuner.strategies.local import incumbent_index, local_steps_due, pair_moves, stalled_evaluations
from kernelfarm.tuner.strategies.observed import Observed, observe_rows, table_rows
from kernelfarm.tuner.strategies.transfer import (
    GATE_MIN,
    STICKY_MAX,
    PriorModels,
    PriorSummary,
    calibrated_agreement,
    calibrated_agreement_all,
    first_success_positions,
    first_successes,
    learned_scale,
    prefix_agreement,
    prior_models,
    rank_agreement,
    summarize_prior,
)
from kernelfarm.tuner.strategies.warping import standardize, subset, warp

SUGGESTION_QUANTILE = 0.95


class BayesianOptimizer(Optimizer):
    """Options: see :class:`~kernelfarm.core.strategy_options.bayes.BayesSettings`."""

    name = "bayes"

    def configure(self) -> None:
        super().configure()
        self.settings = self.read_settings()
        # Configs suggested from outside the model (an LLM arm, bayes_llm.py), as table rows: each
        # is proposed only if the model ranks it among the top ``SUGGESTION_QUANTILE`` of its own
        # candidates, so a wrong suggester costs no evaluation. ``accepted``: those it proposed.
        self.suggestions: list[int] = []
        self.accepted: list[int] = []
        # set by ask: the gate dropped the prior (its ranking disagrees with the job's own trials)
        self.prior_dropped = False
        # set by ask: the prior shapes this ask's proposals (not dropped, not waiting for the gate)
        self.prior_used = False
        # set by ask: the gate proposes the prior's best config to confirm it (gate_probe)
        self.prior_probing = False
        # set by ask (alignment_select): the objective model used the alignment columns
        self.alignment_selected = False

    def read_settings(self) -> BayesSettings:
        """The model's settings, from ``self.options`` (bayes_llm reads its arm's beside them)."""
        return BayesSettings.from_options(self.options, self.name)

    def ask(self, n: int) -> list[Config]:
        table = candidate_table(self.space, self.context)
        self._x = table.model_features(self.settings.alignment)
        self._table_plain = table.plain_columns if table.plain_columns >= 0 else self._x.shape[1]
        # the space-filling design spreads over the parameters themselves (see encoding.py)
        self._design_x = table.model_features(self.settings.alignment and self.settings.design_alignment)
        rows = table_rows(table, self.space, self.history)
        with threadpool_limits(1):  # small matrices: BLAS threads only add overhead and contention
            summary = self._prior_summary(table)
            # fitted (or found in the per-process cache) once per ask: the gate and the model share it
            models = self._prior_models(table, summary) if summary is not None else None
            probe = self._probe_row(summary, models)
            if models is not None:
                # a rescued prior's second confirmation: its best config by score other than the
                # probe (the probe, with ``prior_consensus``, may be the second by score itself)
                confirm = None
                if summary is not None and self.settings.gate_rescue and probe is not None:
                    confirm = next(r for r in summary.best(2) if r != probe)
                verdict, hidden = self._prior_verdict(rows, models, probe, confirm)
            else:
                verdict, hidden = ("keep" if self.prior else "drop"), np.zeros(len(rows), dtype=bool)
            hidden = hidden | self._hidden_suggestions()
            self.prior_dropped = models is not None and verdict == "drop"
            self.prior_used = verdict == "keep"
            self.prior_probing = verdict == "probe"
            full_history = self.history
            try:
                # A probe that has not confirmed the prior (yet) is hidden: the job's model, design
                # and random draws are the cold job's, and only the probe's config is off limits.
                self.history = [o for o, h in zip(full_history, hidden.tolist(), strict=True) if not h]
                self._history_rows = rows[~hidden]
                observed = observe_rows(self.history, self._history_rows)
                free = np.ones(len(table), dtype=bool)
                free[observed.seen_rows] = False
                # the hidden probe stays among the free rows, so random draws over them are the
                # cold job's, but is never proposed again (nor, while it is proposed, twice)
                self._banned = np.unique(np.concatenate([rows[hidden], [probe] if verdict == "probe" else []]))
                self._banned = self._banned.astype(np.int64)
                free_rows = np.flatnonzero(free)
                n = min(n, len(free_rows) - int(np.isin(self._banned, free_rows).sum()) + (verdict == "probe"))
                if n <= 0:
                    return []
                rng = self.rng()
                chosen = [probe] if verdict == "probe" and probe is not None else []
                if len(chosen) < n:
                    used = verdict == "keep"
                    chosen += self._propose(
                        table, observed, free_rows, n - len(chosen), rng,
                        summary if used else None, models if used else None,
                    )  # fmt: skip
            finally:
                self.history = full_history
        return configs_at(self.space, table, chosen)

    def _hidden_suggestions(self) -> np.ndarray:
        """History entries the job hides from its model and random draws, like a failed probe:
        none here; the LLM arm (bayes_llm.py) hides its proposals that did not pay off."""
        return np.zeros(len(self.history), dtype=bool)

    # ------------------------------------------------------------------------------ phases
    def _propose(
        self,
        table: CandidateTable,
        observed: Observed,
        free_rows: np.ndarray,
        n: int,
        rng: np.random.Generator,
        summary: PriorSummary | None,
        models: PriorModels | None,
    ) -> list[int]:
        """``summary`` / ``models``: the prior when the gate admitted it; None: the cold job (no
        prior, or one dropped: the job's own trials disagree with it, or one waiting: the gate
        judges it on the cold job's own measurements first, so until it admits the prior the
        job's history is the cold job's, and a prior it never admits has cost nothing)."""
        seeds = summary.best(self.settings.prior_init) if summary is not None else []
        n_init = self.settings.n_init if summary is None else min(self.settings.n_init, self.settings.n_init_warm)
        seen = set(observed.seen_rows.tolist())
        seeds_left = [r for r in seeds if r not in seen]
        placed = len(seen) - (len(seeds) - len(seeds_left))  # design (and model) points, not seeds
        chosen: list[int] = []
        init_slots = len(seeds_left) + max(0, n_init - placed)
        if init_slots:
            chosen = self._initial(table, observed, free_rows, min(n, init_slots), seeds, rng)
        if len(chosen) < n:
            remaining = np.setdiff1d(free_rows, chosen, assume_unique=True)
            if len(observed.success_rows) >= 2:
                chosen += self._model_based(table, observed, remaining, n - len(chosen), chosen, rng, models)
            else:  # nothing to model yet (everything failed so far): keep spreading out
                placed_rows = np.concatenate([observed.seen_rows, np.array(chosen, dtype=np.int64)])
                chosen += maximin(self._design_x, remaining, placed_rows, n - len(chosen), rng, self._banned)
        return chosen

    def _initial(
        self,
        table: CandidateTable,
        observed: Observed,
        free_rows: np.ndarray,
        n: int,
        seeds: list[int],
        rng: np.random.Generator,
    ) -> list[int]:
        free = set(free_rows.tolist())
        chosen = [r for r in seeds if r in free][:n]
        remaining = np.setdiff1d(free_rows, chosen, assume_unique=True)
        placed = np.concatenate([observed.seen_rows, np.array(chosen, dtype=np.int64)])
        return chosen + maximin(self._design_x, remaining, placed, n - len(chosen), rng, self._banned)

    def _prior_rows(self, table: CandidateTable) -> np.ndarray:
        """Table rows of the prior's configs, looked up once per ask (the lookup is per config)."""
        cached = self.__dict__.get("_prior_rows_cache")
        if cached is None:
            cached = self.__dict__["_prior_rows_cache"] = table_rows(table, self.space, self.prior)
        return cached

    def _prior_models(self, table: CandidateTable, summary: PriorSummary) -> PriorModels:
        nulls = self.settings.gate_nulls if self.settings.transfer_gate >= 0 else 0
        fit_max = self.settings.prior_fit_max or self.settings.fit_max
        return prior_models(table, self._x, summary, nulls, self.settings.train_max, fit_max)

    def _probe_row(self, summary: PriorSummary | None, models: PriorModels | None) -> int | None:
        """The table row of the prior's best config when the gate probes (``gate_probe``, with a
        gate and null models), else None."""
        settings = self.settings
        if summary is None or models is None or not models.nulls or not settings.gate_probe:
            return None
        return None if settings.transfer_gate < 0 else summary.best(1, settings.prior_consensus)[0]

    def _judged_end(self, rows: np.ndarray) -> int:
        """How many history entries the gate judges the prior on first: those up to the job's
        ``GATE_MIN``-th measured config in the gate's own order (transfer.first_success_positions;
        all of them before then). Fixed once reached, as the gate's prefixes are. The job's own
        design chose them, so a probe config among them is the job's measurement, not the gate's
        (see _prior_verdict)."""
        at = first_success_positions(self.history, rows, GATE_MIN)
        return at[-1] + 1 if len(at) == GATE_MIN else len(self.history)

    def _prior_verdict(
        self, rows: np.ndarray, models: PriorModels, probe: int | None, confirm: int | None = None
    ) -> tuple[str, np.ndarray]:
        """The gate (transfer.py): "keep", "wait" (not judged yet: the job goes on as the cold one
        without being told the prior exists), "probe" (propose the prior's best config, the
        ``probe`` row, and otherwise wait) or "drop" (for this ask: past ``STICKY_MAX`` every ask
        judges all measured configs again, so a dropped prior can come back); and which history
        entries the job hides from itself (the probe, until it has confirmed the prior).
        ``rows``: each history entry's table row.

        With null models, a sequential test over the prefixes of the job's first ``STICKY_MAX``
        measured configs (``GATE_MIN`` on), each prefix's agreement z measured against the null
        models: below 0 (no better than an unrelated prior) drops the prior; at least
        ``gate_admit`` admits it; in between it waits, at no cost. With ``probe``, reaching
        ``gate_admit`` proposes the probe instead, and the prior is admitted only if the probe
        then measures faster than every config the job measured before it: one measurement that
        an unrelated prior passes with chance 1 / (k + 1) after k configs, where the prior's best
        config on another GPU of the same kernel is usually among the target's best few percent
        (docs/benchmarks/STRATEGIES.md, issue 17's fourth session). A probe that fails is hidden
        from the job for good: the prior is dropped and the job is the cold job, one evaluation
        later. Once admitted, a prefix below ``transfer_gate`` drops it, and past ``STICKY_MAX``
        all measured configs are checked at every ask. Never admitted within ``STICKY_MAX``:
        dropped. Why wait instead of deciding at ``GATE_MIN``: four configs give Kendall's tau
        seven possible values, and a shuffled prior reached z >= 1 there in 3 of 10 runs on
        pnpoly_RTX_3060_laptop, each costing the job (docs/benchmarks/STRATEGIES.md). Without
        null models (``gate_nulls`` 0): the gate before, tau's analytic standard error and only
        its sign on the prefixes.

        ``gate_first`` off: "wait" means "keep" (the prior is trusted until judged).

        ``gate_rescue`` (``confirm``: the prior's second best config): a prefix below the null
        models probes the prior instead of dropping it, and the probe, then ``confirm``, must each
        beat every config measured before the probe (:meth:`_rescue_failed`); what fails is hidden."""
        settings = self.settings
        shown = np.zeros(len(rows), dtype=bool)
        if settings.transfer_gate < 0:
            return "keep", shown
        undecided = "wait" if settings.gate_first else "keep"
        if not models.nulls:
            observed = observe_rows(self.history, rows)
            early, early_log = first_successes(self.history, rows, STICKY_MAX)
            if len(observed.success_rows) < GATE_MIN:
                return undecided, shown
            if np.any(prefix_agreement(models.prior.mean(self._x[early]), early_log, GATE_MIN) <= 0):
                return "drop", shown
            z = rank_agreement(models.prior.mean(self._x[observed.success_rows]), observed.log_time)
            return ("keep" if z >= settings.transfer_gate else "drop"), shown
        # The probe is hidden wherever the gate asked for it, or the cold job happened to propose
        # it after the gate's first prefix (rare: one config of the space); the gate then judges
        # it as if just measured. Where the job's own design measured it among the configs the
        # gate judges first (_judged_end: sources and job share much of their design), it is the
        # job's, never hidden, and must beat every other of those configs, not only the ones
        # before it: measured first, it had nothing to beat and any prior passed, and hidden
        # while the gate waited it took the job off the cold path (issue 17, thirteenth session:
        # pnpoly_RTX_3090 seed 24, an unrelated prior, 2 -> 38 evaluations to 0.95).
        at_probe = rows == probe if probe is not None else shown
        judged_end = self._judged_end(rows)
        own = at_probe.copy()
        own[judged_end:] = False
        hidden = at_probe & ~own
        visible = [o for o, h in zip(self.history, hidden.tolist(), strict=True) if not h]
        early, early_log = first_successes(visible, rows[~hidden], STICKY_MAX)
        admitted_at = None  # the prefix (its length) that admitted the prior
        rescue = False  # the ranking disagreed, and the probe decides (``gate_rescue``)
        for k, z in enumerate(self._agreement(models, early, early_log).tolist(), start=GATE_MIN):
            if z < -settings.gate_drop:
                if not (settings.gate_rescue and probe is not None):
                    return "drop", hidden
                rescue = True
                break
            if z >= settings.gate_admit:
                admitted_at = k
                break
        if admitted_at is None and not rescue:
            return ("drop" if len(early) >= STICKY_MAX else undecided), hidden
        if probe is not None:
            measured = np.flatnonzero(at_probe)
            if len(measured) == 0:
                return "probe", hidden
            first = int(measured[0])
            trial = self.history[first]
            if trial.pending:
                return "wait", hidden
            if own[first]:  # the job's own: judged against the rest of the gate's first prefix
                others = [o for i, o in enumerate(self.history[:judged_end]) if i != first]
                probe_at = judged_end - 1  # a confirmation measured among them stands alone
            else:
                others, probe_at = visible[: first - int(hidden[:first].sum())], first
            before = [o.value for o in others if o.value is not None and o.failure is None and not o.pending]
            if not _faster_than_all(trial, before):
                return "drop", hidden
            if rescue and confirm is not None:
                failed = self._rescue_failed(rows, probe_at, confirm, before)
                if failed is not None:
                    return "drop", hidden | (np.arange(len(rows)) == failed)
            # confirmed: the probe is a measurement like any other from here on, and the prefixes
            # that include it must agree as well
            hidden = shown
            early, early_log = first_successes(self.history, rows, STICKY_MAX)
            at = np.flatnonzero(early == probe)
            admitted_at = int(at[0]) if len(at) else len(early)
        if admitted_at is not None and not rescue:
            for k, z in enumerate(self._agreement(models, early, early_log).tolist(), start=GATE_MIN):
                if k > admitted_at and z < settings.transfer_gate:
                    return "drop", hidden
        observed = observe_rows(self.history, rows)
        if len(observed.success_rows) <= len(early):
            return "keep", hidden
        x = self._x[observed.success_rows]
        nulls = np.vstack([m.mean(x) for m in models.nulls])
        z_all = calibrated_agreement_all(models.prior.mean(x), nulls, observed.log_time)
        return ("keep" if z_all >= settings.transfer_gate else "drop"), hidden

    def _rescue_failed(self, rows: np.ndarray, probe_at: int, confirm: int, before: list[float]) -> int | None:
        """A rescued prior (``gate_rescue``) is confirmed twice: its second best config (the
        ``confirm`` row, the first seed proposed once it is admitted) must also measure faster
        than every config the job measured before the probe (at ``probe_at`` in the history; their
        times: ``before``). One
        fast config is chance for an unrelated prior 1 in k + 1 times after k configs; two in a
        row about 1 in (k + 1)(k + 2). Returns the history index of that config where it failed
        (it is then hidden with the probe: the job is the cold one, two evaluations later), else
        None (also while it is not measured yet: the prior is kept and proposes it; and where the
        cold job measured that config before the probe, which the probe then beat: hiding it
        would change the prefixes the gate has judged, so the probe's confirmation stands alone).

        Why hidden, not kept as the job's own measurements: kept, they sent the job elsewhere,
        and on gemm_RTX_3090 an unrelated prior then cost 6 evaluations to 0.95 on average, 22 of
        30 runs later than cold (issue 17, tenth session, docs/benchmarks/STRATEGIES.md)."""
        after = [i for i in np.flatnonzero(rows == confirm).tolist() if i > probe_at]
        if not after or self.history[after[0]].pending:
            return None
        return None if _faster_than_all(self.history[after[0]], before) else after[0]

    def _agreement(self, models: PriorModels, early: np.ndarray, early_log: np.ndarray) -> np.ndarray:
        """The gate's statistic on each prefix of the job's first measured configs (GATE_MIN on)."""
        x = self._x[early]
        nulls = np.vstack([m.mean(x) for m in models.nulls])
        return calibrated_agreement(models.prior.mean(x), nulls, early_log, GATE_MIN)

    def _prior_summary(self, table: CandidateTable) -> PriorSummary | None:
        """The prior's successes scored per source (None: no prior, or too little of it)."""
        if not self.prior:
            return None
        return summarize_prior(self.prior, self._prior_rows(table), self.settings.transform)

    def _model_based(
        self,
        table: CandidateTable,
        observed: Observed,
        free_rows: np.ndarray,
        n: int,
        already: list[int],
        rng: np.random.Generator,
        models: PriorModels | None = None,
    ) -> list[int]:
        train_rows, y, best, measured = self._targets(observed, rng)
        x = self._x[train_rows]
        pool = self._pool(table, observed, free_rows, rng, len(train_rows))
        suggested = np.array([r for r in self.suggestions if r not in set(already)], dtype=np.int64)
        suggested = suggested[np.isin(suggested, free_rows)]
        pool = np.union1d(pool, suggested)
        extra = self._local_extra(table, pool, free_rows)
        pool = np.union1d(pool, extra)
        fantasies = np.concatenate([observed.pending_rows, np.array(already, dtype=np.int64)])
        scored = np.concatenate([pool, fantasies])
        offset = np.zeros(len(scored))
        if models is not None and self.settings.transfer:
            # The prior's model as the mean, scaled by what this job's own measured times say.
            prior_gp = models.prior
            prior_train, prior_scored = prior_gp.mean(x), prior_gp.mean(self._x[scored])
            a, b = learned_scale(prior_train[measured], y[measured], self.settings.transfer_strength)
            y = y - (a + b * prior_train)
            offset = a + b * prior_scored
        # Hyperparameters from measured times only: imputed penalties are not smooth data.
        fit_rows = np.flatnonzero(measured)[subset(int(measured.sum()), self.settings.fit_max, y[measured], rng)]
        features, x, hp = self._fit_objective(table, train_rows, fit_rows, y, x)
        prior_rows, prior_y = self._prior_targets(table, observed, rng)
        # Not ``extra`` (the local arm's rows, used below): reusing that name made every model-based
        # ask treat table row 0 (and the row numbered prior_noise) as the local arm's alone, so the
        # model never proposed it and a small space ended "exhausted" with it never measured.
        noise = np.concatenate([np.zeros(len(y)), np.full(len(prior_y), self.settings.prior_noise)])
        x = np.vstack([x, features[prior_rows]])
        gp = GaussianProcess(x, np.concatenate([y, prior_y]), hp, extra_noise=noise)

        posterior = gp.pool(features[scored])
        for i in range(len(pool), len(pool) + len(fantasies)):
            posterior.condition(i)
        feasible = self._feasibility(table, observed, np.concatenate([pool, fantasies]), rng)

        name = self.settings.acquisition
        xi = self.settings.xi
        taken = np.zeros(len(pool) + len(fantasies), dtype=bool)
        taken[len(pool) :] = True
        taken[: len(pool)] = np.isin(pool, self._banned)
        chosen: list[int] = []
        if len(suggested):
            mean = posterior.mean + offset
            score = acquisition(name, mean, posterior.std, best, xi=xi) * feasible
            bar = float(np.quantile(score[~taken & ~np.isin(scored, extra)], SUGGESTION_QUANTILE))
            for i in np.searchsorted(pool, suggested).tolist():
                if len(chosen) < n and score[i] >= bar and score[i] > 0:
                    taken[i] = True
                    chosen.append(int(pool[i]))
                    self.accepted.append(int(pool[i]))
                    posterior.condition(i)
        chosen += self._local_picks(table, pool, posterior, offset, feasible, best, taken, n - len(chosen))
        taken[: len(pool)] |= np.isin(pool, extra)  # rows added for the local arm are its alone
        for _ in range(min(n - len(chosen), int((~taken).sum()))):
            i = self._best_open(posterior, offset, feasible, best, ~taken)
            taken[i] = True
            chosen.append(int(pool[i]))
            posterior.condition(i)
        return chosen

    def _best_open(
        self, posterior: PoolPosterior, offset: np.ndarray, feasible: np.ndarray, best: float, open_: np.ndarray
    ) -> int:
        """The pool index among ``open_`` the acquisition ranks first (the first of equals)."""
        mean = posterior.mean + offset
        score = acquisition(self.settings.acquisition, mean, posterior.std, best, xi=self.settings.xi) * feasible
        if not np.any(score[open_] > 0):  # EI underflow far from the incumbent: exploit the mean
            score = -mean + np.log(np.maximum(feasible, 1e-12))
        where = np.flatnonzero(open_)
        return int(where[np.argmax(score[where])])

    # ------------------------------------------------------------------------------ pieces
    def _local_extra(self, table: CandidateTable, pool: np.ndarray, free_rows: np.ndarray) -> np.ndarray:
        """With ``local_pairs``: the incumbent's free two-switch moves the pool lacks (a few rows;
        a large space's random sample rarely holds them), for the local arm alone."""
        if not self.settings.local_pairs:
            return np.zeros(0, dtype=np.int64)
        where = incumbent_index(self.history)
        if where is None or self._history_rows[where] < 0:
            return np.zeros(0, dtype=np.int64)
        moves = pair_moves(table, self.history, self._history_rows, where, self.settings.local_pairs_cliff)
        return np.setdiff1d(moves[np.isin(moves, free_rows)], pool)

    def _local_picks(
        self,
        table: CandidateTable,
        pool: np.ndarray,
        posterior: PoolPosterior,
        offset: np.ndarray,
        feasible: np.ndarray,
        best: float,
        taken: np.ndarray,
        n: int,
    ) -> list[int]:
        """The local arm's proposals (local.py): the incumbent's neighbours the acquisition ranks
        highest, as many as are due; each conditions the posterior like any other pick. Updates
        ``taken``."""
        settings = self.settings
        due, near = local_steps_due(
            table, self.history, self._history_rows,
            settings.local_after, settings.local_every, settings.local_tolerance, settings.local_pairs,
            settings.local_pairs_cliff,
        )  # fmt: skip
        local = np.zeros(len(taken), dtype=bool)
        local[: len(pool)] = np.isin(pool, near)
        chosen: list[int] = []
        for _ in range(min(due, n)):
            open_ = local & ~taken
            if not open_.any():
                break
            i = self._best_open(posterior, offset, feasible, best, open_)
            taken[i] = True
            chosen.append(int(pool[i]))
            posterior.condition(i)
        return chosen

    def _fit_objective(
        self,
        table: CandidateTable,
        train_rows: np.ndarray,
        fit_rows: np.ndarray,
        y: np.ndarray,
        x: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, Hyperparameters]:
        """The objective model's features, training inputs and hyperparameters: the plain ones
        (``x``: the training inputs on ``self._x``), or (``alignment_select``) those with the
        alignment columns when they predict the fitted points better left-one-out.

        Why not a fit per feature set (``select_plain_steps`` -1, issue 17's fifth session): the
        plain model is the fitted one with the alignment columns removed (their length scales
        taken to infinity), refined in ``select_plain_steps`` L-BFGS steps, so the comparison asks
        "does dropping the columns cost predictive density?" for one fit and a few steps per ask,
        which keeps the ask within its latency target (issue 17's seventh session,
        docs/benchmarks/STRATEGIES.md)."""
        self.alignment_selected = False
        target = standardize(y[fit_rows])
        full = table.features
        if not self.settings.alignment_select or self._x.shape[1] >= full.shape[1]:
            return self._x, x, fit_hyperparameters(x[fit_rows], target, length_prior=self._length_prior())
        x_full = full[train_rows]
        hp_full = fit_hyperparameters(x_full[fit_rows], target, length_prior=self._length_prior(full.shape[1]))
        steps = self.settings.select_plain_steps
        if steps < 0:
            hp = fit_hyperparameters(x[fit_rows], target, length_prior=self._length_prior())
        else:
            hp = Hyperparameters(hp_full.amplitude, hp_full.lengths[: x.shape[1]], hp_full.noise)
            if steps:
                hp = fit_hyperparameters(x[fit_rows], target, steps, self._length_prior(), start=hp)
        if loo_log_predictive(x_full[fit_rows], target, hp_full) <= loo_log_predictive(x[fit_rows], target, hp):
            return self._x, x, hp
        self.alignment_selected = True
        return full, x_full, hp_full

    def _length_prior(self, dims: int | None = None) -> np.ndarray | None:
        """Prior means of the log length scales: the alignment columns' at ``alignment_length``
        (long: a column that matters on few kernels should not cost the others, whose early fits
        on ten points in more dimensions would otherwise find spurious structure in it).
        ``dims``: the number of features (default: the model's, ``self._x``)."""
        plain = self._table_plain
        dims = self._x.shape[1] if dims is None else dims
        if dims <= plain or self.settings.alignment_length <= 0:
            return None
        prior = np.full(dims, LENGTH_PRIOR[0])
        prior[plain:] = math.log(self.settings.alignment_length)
        return prior

    def _targets(
        self, observed: Observed, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
        """Training rows, standardized targets and the incumbent (standardized best)."""
        rows, y = observed.success_rows, observed.log_time
        n_success = len(rows)
        if self.settings.failures in ("penalty", "both") and len(observed.failed_rows):
            penalty = float(y.max())
            rows = np.concatenate([rows, observed.failed_rows])
            y = np.concatenate([y, np.full(len(observed.failed_rows), penalty)])
        keep = subset(len(rows), self.settings.train_max, y, rng)
        rows, y = rows[keep], y[keep]
        z = standardize(warp(y, self.settings.transform))
        best = float(z[np.argmin(y)])
        return rows, z, best, keep < n_success

    def _prior_targets(
        self, table: CandidateTable, observed: Observed, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Prior successes this job has not observed, warped on their own scale (another problem
        size or GPU has other times; only their ranking is assumed to carry over)."""
        if not self.prior_used or self.settings.prior_noise <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        prior = observe_rows(self.prior, self._prior_rows(table))
        fresh = ~np.isin(prior.success_rows, observed.seen_rows)
        rows, y = prior.success_rows[fresh], prior.log_time[fresh]
        if len(rows) < 2:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        keep = subset(len(rows), self.settings.train_max // 2, y, rng)
        return rows[keep], standardize(warp(y[keep], self.settings.transform))

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
        limit = min(self.settings.pool, max(1000, self.settings.pool_work // max(n_train, 1)))
        if len(free_rows) <= limit:
            return free_rows
        top = observed.success_rows[np.argsort(observed.log_time, kind="stable")[:10]]
        free = np.zeros(len(table), dtype=bool)  # masks, not set operations: spaces reach 1e6 configs
        free[free_rows] = True
        near = table.neighbours(top)
        near = near[free[near]]
        if len(near) > limit // 2:
            near = np.sort(rng.choice(near, limit // 2, replace=False))
        free[near] = False
        if self.settings.pool_hops > 1 and stalled_evaluations(self.history) >= self.settings.pool_hops_after:
            # The incumbent's two-parameter moves: on a large space a random sample of the rest
            # holds almost none of them, so neither the model nor the local arm could propose one
            # (the stalled runs of issue 17's seventh session ended two parameters from a config
            # within 0.97 of the optimum).
            first = table.neighbours(top[:1])
            second = np.setdiff1d(table.neighbours(first), first)
            second = second[free[second]]
            if len(second) > limit // 4:
                second = np.sort(rng.choice(second, limit // 4, replace=False))
            free[second] = False
            near = np.concatenate([near, second])
        rest = np.flatnonzero(free)
        sample = rng.choice(rest, min(len(rest), limit - len(near)), replace=False)
        return np.sort(np.concatenate([near, sample]))

    def _feasibility(
        self,
        table: CandidateTable,
        observed: Observed,
        rows: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Probability that each row's config works (1 where failures do not shape the model)."""
        if self.settings.failures not in ("feasibility", "both"):
            return np.ones(len(rows))
        ok, bad = observed.success_rows, observed.failed_rows
        if self.prior_used:  # prior outcomes count where the job has no observation
            prior = observe_rows(self.prior, self._prior_rows(table))
            own = set(observed.seen_rows.tolist())
            ok = np.union1d(ok, [r for r in prior.success_rows.tolist() if r not in own])
            bad = np.union1d(bad, [r for r in prior.failed_rows.tolist() if r not in own])
            bad = np.setdiff1d(bad, ok)
        if len(bad) == 0 or len(ok) == 0:
            return np.ones(len(rows))
        labelled = np.concatenate([ok, bad]).astype(np.int64)
        label = np.concatenate([np.zeros(len(ok)), np.ones(len(bad))])
        keep = subset(len(labelled), self.settings.train_max, -label, rng)
        labelled, label = labelled[keep], label[keep]
        rate = float(label.mean())
        target = label - rate
        fit_rows = subset(len(labelled), self.settings.fit_max, -label, rng)
        x = self._x[labelled]
        hp = fit_hyperparameters(x[fit_rows], target[fit_rows], length_prior=self._length_prior())
        mean = GaussianProcess(x, target, hp).mean(self._x[rows])
        p_ok = np.clip(1.0 - (rate + mean), 0.01, 1.0)
        return p_ok**self.settings.feasibility_power


def _faster_than_all(trial: Observation, before: list[float]) -> bool:
    """The gate's probe test: ``trial`` measured, and faster than every time in ``before``."""
    return trial.failure is None and trial.value is not None and (not before or trial.value < min(before))
