"""The options of the ``bayes`` strategy (tuner/strategies/bayes.py), and of the model of ``bayes_llm``.

They live in core so that the API refuses a job whose options the strategy would refuse, with the
reason, before any coordinator sees it (the API does not import the tuner: tests/test_layering.py).
Module names in the docstrings below are those of tuner/strategies/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.strategy_options.reading import read_options

ACQUISITIONS = ("ei", "lcb", "pi")  # scikit-optimize's (acquisition.py)
FAILURE_MODES = ("both", "feasibility", "penalty", "ignore")
TRANSFORMS = ("copula", "log", "clip")

# Most null models the transfer gate may fit per ask (option gate_nulls).
MAX_GATE_NULLS = 64
# Largest values of the options that set what one ask computes: a GP's cubic cost in its points
# (train_max, fit_max, prior_fit_max) and the candidates it scores (pool, pool_work). Every job's asks
# share the coordinator's few processes, and the values were unbounded: with train_max, fit_max, pool
# and pool_work at 100,000 or more, one ask at 2,000 observations of gemm_RTX_3090 took 25.7 s on one
# core (65 ms by default), 13 times its 1.97 s at 500 (a GP's fit is cubic in its points). At these
# limits the same ask takes 1.9 s (docs/benchmarks/STRATEGIES.md, "Ask latency on one core"). Each is
# 4-33 times its default, except prior_fit_max: its default, 256, was chosen on the real pairs and is
# also its limit (it can be lowered, not raised), as it is the largest value the benchmarks used.
COST_LIMITS = {"train_max": 1024, "fit_max": 256, "prior_fit_max": 256, "pool": 100_000, "pool_work": 20_000_000}


@dataclass(frozen=True)
class BayesSettings:
    """The strategy's options (``job.strategy_options``), validated; defaults are the measured best.

    Attributes:
        n_init: space-filling (or prior-seeded) proposals before the model takes over.
        acquisition: "ei", "lcb" or "pi" (scikit-optimize's implementations).
        xi: EI/PI exploration margin in standard deviations of the warped target.
        failures: how failed configs teach the model: "both" (feasibility model and, in the
            objective model, a penalty equal to the worst observed time), "feasibility",
            "penalty", or "ignore" (ablation only).
        transform: output warping of log times: "copula" (normal scores of the ranks: robust to
            very slow configs, which otherwise dominate the fit), "log", or "clip" (log times
            above the median + 2 IQR clipped).
        feasibility_power: exponent on the probability of working (higher is more risk-averse; not
            negative: that would rank the configs likeliest to fail first; 0 ignores feasibility).
        pool: most candidates scored per ask.
        pool_work: pool x training-set size budget (bounds the cost at long histories); positive.
        train_max: most observations in the posterior.
        fit_max: most observations used to fit hyperparameters. These four and ``prior_fit_max``
            are at most ``COST_LIMITS``.
        prior_init: the best prior configs proposed first when warm-starting (in addition to
            the ``n_init`` space-filling ones, so a misleading prior costs only these). 1 and 6
            measured no better than 3 on the real pairs (nineteenth session).
        prior_noise: noise variance (in standard deviations of the warped target) with which
            prior observations enter the objective model; 0 keeps them out of it.
        transfer: warm start by transfer (transfer.py): a GP on the prior's per-source scores is
            the mean of the objective model, scaled by a factor learned from this job's trials.
        transfer_strength: pseudo-observations pulling that factor towards 1 (trust in the prior
            before the job's own trials say otherwise).
        n_init_warm: space-filling proposals (after the ``prior_init`` seeds) when a usable prior
            exists: the prior's model replaces most of the design. With ``gate_first`` the prior
            is admitted only after the job's own design has measured ``GATE_MIN`` (4) configs, so
            0 to 4 act alike; 6 makes warm start later by 0.4 evaluations on average (issue 17,
            nineteenth session, docs/benchmarks/STRATEGIES.md).
        transfer_gate: the prior is kept only while Kendall's tau between its prediction and the
            job's own measured times is at least this many standard errors above 0 (checked from
            ``transfer.GATE_MIN`` measurements on) and its ranking was positive on every prefix of
            the first ``transfer.STICKY_MAX``; negative: no gate, every prior is kept.
        gate_nulls: how the gate measures "above 0": against this many null models (the prior's
            GP refitted to its scores shuffled among its configs: transfer.calibrated_agreement),
            and then on *every* prefix of the first ``STICKY_MAX`` measurements; 0: against
            tau's analytic standard error, with only the sign checked on the prefixes (the gate
            before issue 17's third session).
        gate_admit: with null models, the agreement (in their standard deviations) at which the
            gate admits a prior it has been holding back (with ``gate_probe``: at which it probes
            it); below 0 it drops it (_prior_verdict). 0.5 with the probe: chosen by
            leave-one-family-out from 0 / 0.5 / 1 / 1.5 / 2 on the real pairs (issue 17, fourth
            session, docs/benchmarks/STRATEGIES.md); the third session's gate was 2.0 without it.
        gate_probe: with null models, a prior whose agreement reaches ``gate_admit`` is admitted
            only once its best config (the probe, proposed then) measures faster than every config
            the job measured before it; a probe that does not is hidden from the model and the
            prior dropped, so the job is the cold one, one evaluation later (_prior_verdict).
            Where the job's own design measured that config among the configs the gate judges
            first, it is not proposed again: it must beat every other of them, and it is never
            hidden (issue 17, thirteenth session).
            False: the prior is admitted at ``gate_admit`` itself (issue 17's third session).
        gate_first: with a gate, the prior waits for its verdict: the job's first ``GATE_MIN``
            measured configs are the cold job's space-filling design, and the prior's seeds and
            model come after them only if it passes (False: the seeds are proposed first, and
            the gate judges the prior on configs it chose itself).
        gate_drop: with null models, how far below them (in their standard deviations) a prefix's
            agreement may fall before the gate drops a prior it has not admitted yet (0: at the
            first prefix below them).
        gate_rescue: with ``gate_probe``, a prior whose ranking of the job's first configs falls
            below the null models is probed before it is dropped: it is admitted if its best
            config, then its second best, each measure faster than every config the job measured
            before the probe (_rescue_failed), and the prefix checks that follow an admission
            are skipped (its ranking of the job's design has already disagreed; past
            ``STICKY_MAX`` all measured configs are judged as for any admitted prior). A rescue
            that fails drops the prior and hides what it measured (the probe, and the second
            best config where that was the one to fail): the job is the cold one, one or two
            evaluations later.
            Why: the other GPUs of a family can agree on the best configs and disagree on the
            mediocre ones a space-filling design measures first (issue 17, convolution_milo_A4000:
            Spearman 0.14-0.48 over whole recordings; docs/benchmarks/STRATEGIES.md, tenth session).
        prior_consensus: above 0, the gate's probe is the prior's best config among those that
            two or more of its source GPUs measured among their best fraction ``prior_consensus``
            (transfer.PriorSummary.best; where there is none, or one source, the best by score):
            one GPU's best config may be that GPU's alone. 0: the best by score. The rescue's
            confirmation and the seeds stay the best by score: with those taken the same way,
            gemm_RTX_2080_Ti's warm start went from 6 to 16 evaluations (its two sources' agreed
            configs are at 0.79-0.85 there, their best by score at up to 1.0). 0.1: the all-in
            choice of leave-one-family-out on the real pairs, under both harm criteria; held out,
            convolution_milo (where it helps: MI250X 21 -> 5.5) keeps 0 (issue 17, eleventh
            session, docs/benchmarks/STRATEGIES.md).
        prior_fit_max: how many of the prior's points fit the hyperparameters of its model and of
            the null models (0: ``fit_max``, as the job's own model). 256: all the points of a
            prior of three 100-trial jobs, where ``fit_max`` (64) fitted its length scales on a
            quarter of them; leave-one-family-out's choice on the real pairs (issue 17, ninth
            session, docs/benchmarks/STRATEGIES.md). Fitted once per prior and process
            (transfer.prior_models), not at every ask: 0.3-0.7 s on one core at a job's first
            warm ask, against 0.06 s with 64.
        alignment: the encoding's alignment columns (encoding.py: "is a power of two" and the
            power of two dividing the value, for integer parameters that are not all powers of
            two) are always model features (False: ``alignment_select`` decides per ask).
        alignment_length: prior mean length scale of the alignment columns (0: the same prior as
            every other feature, log-normal around 0.5). 2.0 (long: the columns matter only where
            the data say so), with ``alignment_select``: leave-one-family-out's choice (issue 17,
            docs/benchmarks/STRATEGIES.md).
        design_alignment: the space-filling design spreads over the alignment columns too (by
            default it spreads over the plain columns: the parameters themselves).
        alignment_select: with ``alignment`` off, the objective model decides at every ask
            whether to use the alignment columns: it is fitted with them, and they are kept when
            that model's leave-one-out predictive density on the fitted points is higher than
            the model's without them (gp.loo_log_predictive). Why: the columns find the
            convolution_milo needles but cost pnpoly its early evaluations, where ten points in
            more dimensions let the fit find spurious structure in them; the data of the job,
            not a constant, say whether they matter. No effect where the space has no alignment
            columns. The feasibility model, the design and a prior's model keep the plain
            columns. On by default since issue 17's seventh session: leave-one-family-out picks
            it (docs/benchmarks/STRATEGIES.md).
        select_plain_steps: the model without the alignment columns that ``alignment_select``
            compares with: the fit with them, the columns dropped, then refined by at most this
            many L-BFGS steps (0: not refined); -1: a fit of its own from the generic starts
            (issue 17's fifth session: a second full fit per ask, 10-25 ms, which took the ask
            past its latency target on the device machine's cores). 5: leave-one-family-out's
            choice among 0, 5, 15 and -1 (seventh session).
        local_after: the local arm (local.py): once this many evaluations have passed without a
            better config, proposals also go to the incumbent's untried one-parameter neighbours
            (the model's pick among them); 0: off. 20 with ``local_every`` 2: leave-one-family-
            out's choice among (5, 4), (10, 4), (10, 8), (20, 2), (30, 2) (issue 17, seventh session).
        local_every: with the local arm on, one local step per this many evaluations without a
            better config.
        pool_hops: 2: where the space is too large to score every free config, the pool also
            holds the incumbent's two-parameter neighbours (up to a quarter of it), not only the
            best configs' one-parameter ones and a random sample (1). Off by default: it meets
            convolution_milo's targets but costs gemm, and leave-one-family-out keeps it off (issue
            17, eighth session, docs/benchmarks/STRATEGIES.md).
        pool_hops_after: with ``pool_hops`` 2, only once the incumbent has gone this many
            evaluations without a better config (0: from the first model-based ask).
        local_tolerance: a gain smaller than this fraction of the incumbent's time does not end
            the stall the local arm waits for (local.plateau_start); 0: any gain does. Off by
            default: with 30 seeds it helps pnpoly (+0.009 to +0.016 standardized score, paired)
            and nothing else, and leave-one-family-out with pnpoly held out keeps it off (issue
            17, twelfth session, docs/benchmarks/STRATEGIES.md).
        local_pairs: the local arm's moves also flip two two-valued parameters at once
            (candidates.switch_pairs), added to the pool for the arm alone: two switches can
            interact so that either flip alone is a cliff (convolution_milo_A4000: shared memory
            off is slow with read-only loads on, fast with them off). Off by default: with 100
            seeds it takes convolution_milo_A4000 from 0.966 to 0.984 of the optimum at 100
            evaluations and costs gemm_RTX_2080_Ti 0.005, and as the strategy of the prior's
            source jobs it makes gemm_RTX_3090's warm start later by 8.4 evaluations on average
            (issue 17, twelfth, thirteenth and seventeenth sessions, docs/benchmarks/STRATEGIES.md).
        local_pairs_cliff: with ``local_pairs``, a two-switch move only once both its single
            flips from the incumbent are measured (local.pair_moves): the pair is the way across
            a cliff, not a rival of single flips that pay. Off: it wins back one W6600 run of
            three (0.961), and warm start is about as with ``local_pairs`` (thirteenth session).
    """

    n_init: int = 10
    acquisition: str = "ei"
    xi: float = 0.0
    failures: str = "both"
    transform: str = "copula"
    feasibility_power: float = 1.0
    pool: int = 4000
    pool_work: int = 600_000
    train_max: int = 256
    fit_max: int = 64
    prior_init: int = 3
    prior_noise: float = 0.0
    transfer: bool = True
    transfer_strength: float = 2.0
    n_init_warm: int = 2
    transfer_gate: float = 1.0
    gate_nulls: int = 8
    gate_admit: float = 0.5
    gate_probe: bool = True
    gate_first: bool = True
    prior_fit_max: int = 256
    gate_drop: float = 0.0
    gate_rescue: bool = True
    prior_consensus: float = 0.1
    alignment: bool = False
    alignment_length: float = 2.0
    design_alignment: bool = False
    alignment_select: bool = True
    select_plain_steps: int = 5
    local_after: int = 20
    local_every: int = 2
    pool_hops: int = 1
    pool_hops_after: int = 0
    local_tolerance: float = 0.0
    local_pairs: bool = False
    local_pairs_cliff: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any], strategy: str = "bayes") -> BayesSettings:
        """``strategy``: the job's strategy, named in the errors (``bayes_llm`` reads these too).

        Raises:
            InvalidInput: on an unknown option, a value of the wrong type or out of range, or an unknown
                choice."""
        settings = read_options(cls, options, strategy)
        choices = {"failures": FAILURE_MODES, "transform": TRANSFORMS, "acquisition": ACQUISITIONS}
        for key, allowed in choices.items():
            if getattr(settings, key) not in allowed:
                raise InvalidInput(f"strategy option {key!r} must be one of {allowed}")
        sizes = (settings.pool, settings.train_max, settings.fit_max)
        warm = (
            settings.prior_init, settings.prior_noise, settings.transfer_strength, settings.n_init_warm,
            settings.gate_nulls, settings.alignment_length, settings.gate_admit, settings.local_after,
            settings.pool_hops_after, settings.prior_fit_max, settings.gate_drop,
        )  # fmt: skip
        if min(sizes) < 2 or settings.n_init < 1 or settings.local_every < 1 or min(warm) < 0:
            raise InvalidInput(
                "n_init, pool, train_max, fit_max, local_every must be positive; prior_*, "
                "transfer_strength, n_init_warm, gate_*, alignment_length, local_after, pool_hops_after not negative"
            )
        # A negative exponent turned the feasibility model around: p_ok ** -5 ranks the configs most
        # likely to fail first (a job sent it failed 19 of 25 trials, against 1-3 with the default).
        if settings.feasibility_power < 0:
            raise InvalidInput("strategy option 'feasibility_power' must not be negative (0: ignore feasibility)")
        if settings.pool_work < 1:
            raise InvalidInput("strategy option 'pool_work' must be positive")
        if not 0 <= settings.prior_consensus <= 1:  # also NaN
            raise InvalidInput("strategy option 'prior_consensus' must be a fraction from 0 to 1")
        if settings.pool_hops not in (1, 2):
            raise InvalidInput("strategy option 'pool_hops' must be 1 or 2")
        if not 0 <= settings.local_tolerance <= 1:  # also NaN
            raise InvalidInput("strategy option 'local_tolerance' must be a fraction from 0 to 1")
        if settings.select_plain_steps < -1:
            raise InvalidInput("strategy option 'select_plain_steps' must be -1 (a fit of its own) or more")
        for key, limit in COST_LIMITS.items():
            if getattr(settings, key) > limit:
                raise InvalidInput(f"strategy option {key!r} must be at most {limit:,} (it sets the cost of every ask)")
        # One null model has no spread to measure the prior against (transfer.calibrated_agreement_all
        # needs two), and every null model is a GP fit per ask: bounded so an option cannot stall the
        # coordinator.
        if settings.gate_nulls == 1 or settings.gate_nulls > MAX_GATE_NULLS:
            raise InvalidInput(f"strategy option 'gate_nulls' must be 0 or 2 to {MAX_GATE_NULLS}")
        return settings
