"""A Gaussian process regressor sized for a stateless coordinator: ARD Matérn 5/2 + noise, MAP fit,
optionally plus an additive Matérn 5/2 component (one 1-D kernel per feature, summed).

Why not scikit-optimize's ``GaussianProcessRegressor`` (it is the same model)? Measured on one
core with 11 features (benchmarks/strategies/gp_cost.py): its fit takes 82 ms at 50 points and
824 ms at 200, and ``predict`` with ``return_std`` 263 ms for 4,000 candidates at 200 points,
while the coordinator rebuilds the model on every step. This module computes the same log
marginal likelihood (tests/tuner/test_gp.py checks it against scikit-optimize's) with the
per-dimension distance tensor built once per fit, so one likelihood-and-gradient evaluation is a
few vectorized passes; hyperparameters get weak log-normal priors (MAP) because the first fits see
ten points in ten dimensions. ``PoolPosterior`` adds what batch proposals need: the posterior over
a candidate pool that can be conditioned on fantasized observations in O(n·m) per point.

**The additive component** (``Hyperparameters.additive_lengths``; ``fit_hyperparameters(additive=v)``,
v the prior median of its variance): the ARD kernel alone models every feature's effect jointly,
so with tens of points in ten dimensions its MAP fit either makes the features matter only locally
or smooths most of them away, and its ranking of the whole space is poor. On gemm_RTX_2080_Ti
after 40 evaluations of a default run, its predicted mean had a rank correlation of -0.03 to 0.43
with the true times over the space; with a sum of one-feature kernels beside it (main effects
shared across the whole space, the ARD part left for interactions) 0.44 to 0.61, and higher on
every one of 7 landscapes tried (issue 17, fourteenth session, docs/benchmarks/STRATEGIES.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

SQRT5 = math.sqrt(5.0)
JITTER = 1e-8

# Bounds and priors of the log hyperparameters (features in [0, 1], targets standardized).
LENGTH_BOUNDS = (math.log(0.02), math.log(20.0))
AMPLITUDE_BOUNDS = (math.log(0.05), math.log(20.0))
NOISE_BOUNDS = (math.log(1e-6), math.log(0.3))
LENGTH_PRIOR = (math.log(0.5), 1.0)  # (mean, sd) of log length scale
AMPLITUDE_PRIOR = (0.0, 1.0)
NOISE_PRIOR = (math.log(1e-3), 2.0)


@dataclass(frozen=True)
class Hyperparameters:
    """Signal variance, one length scale per feature, noise variance (all in natural units); with
    ``additive_lengths``, also the additive component's variance and its length scale per feature.

    ``theta`` (log scale, what the fit optimizes): amplitude, lengths, [additive, additive
    lengths,] noise."""

    amplitude: float
    lengths: np.ndarray
    noise: float
    additive: float = 0.0
    additive_lengths: np.ndarray | None = None

    @classmethod
    def default(cls, dims: int) -> Hyperparameters:
        return cls(1.0, np.full(dims, 0.5), 1e-3)

    @property
    def variance(self) -> float:
        """Prior variance of the latent function (both components; no noise)."""
        return self.amplitude + (self.additive if self.additive_lengths is not None else 0.0)

    def to_theta(self) -> np.ndarray:
        parts = [[math.log(self.amplitude)], np.log(self.lengths)]
        if self.additive_lengths is not None:
            parts += [[math.log(self.additive)], np.log(self.additive_lengths)]
        return np.concatenate([*parts, [math.log(self.noise)]])

    @classmethod
    def from_theta(cls, theta: np.ndarray, additive: bool = False) -> Hyperparameters:
        noise = float(math.exp(theta[-1]))
        if not additive:
            return cls(float(math.exp(theta[0])), np.exp(theta[1:-1]), noise)
        dims = (len(theta) - 3) // 2
        return cls(
            float(math.exp(theta[0])), np.exp(theta[1 : 1 + dims]), noise,
            float(math.exp(theta[1 + dims])), np.exp(theta[2 + dims : -1]),
        )  # fmt: skip

    def first_features(self, dims: int) -> Hyperparameters:
        """The same model on the first ``dims`` features only: the ARD part as if the others' length
        scales were infinite; the additive part's sum taken over the first ``dims`` features (a
        starting point for a refit, not an exact limit: an infinite 1-D length scale would leave a
        constant term behind)."""
        lengths = None if self.additive_lengths is None else self.additive_lengths[:dims]
        return Hyperparameters(self.amplitude, self.lengths[:dims], self.noise, self.additive, lengths)


def matern52(r: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Matérn 5/2 correlation of scaled distances ``r`` (unit amplitude); ``out=r`` reuses ``r``.

    Written as ``out=`` passes because this is the hot loop of every ask (a million entries).
    """
    s = np.multiply(r, SQRT5, out=out)
    e = np.negative(s)
    np.exp(e, out=e)
    k = np.multiply(s, 1.0 / 3.0)
    k += 1.0
    k *= s
    k += 1.0
    k *= e
    return k


def scaled_sqdist(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Squared distances between the rows of ``a`` and ``b`` after dividing features by ``lengths``."""
    sa, sb = a / lengths, b / lengths
    d2 = sa @ sb.T
    d2 *= -2.0
    d2 += (sa * sa).sum(1)[:, None]
    d2 += (sb * sb).sum(1)[None, :]
    return np.maximum(d2, 0.0, out=d2)


def covariance(a: np.ndarray, b: np.ndarray, hp: Hyperparameters, fast: bool = False) -> np.ndarray:
    """Matérn 5/2 covariance matrix between the rows of ``a`` and ``b`` (plus the additive
    component where ``hp`` has one).

    ``fast`` evaluates the element-wise part in float32: ``np.exp`` costs ~8 ns per float64 on the
    farm's CPUs and ~1.5 ns per float32, and a cross-covariance needs no more than 1e-7 relative
    precision (the training matrix that gets factorized stays float64).
    """
    d2 = scaled_sqdist(a, b, hp.lengths)
    if fast:
        r32 = np.sqrt(d2.astype(np.float32))
        k32 = matern52(r32, out=r32)
        k32 *= np.float32(hp.amplitude)
        k = k32.astype(np.float64)
    else:
        r = np.sqrt(d2, out=d2)
        k = matern52(r, out=r)
        k *= hp.amplitude
    if hp.additive_lengths is not None:
        k += additive_covariance(a, b, hp)
    return k


def additive_covariance(a: np.ndarray, b: np.ndarray, hp: Hyperparameters) -> np.ndarray:
    """The additive component: ``additive / D`` times the sum over features of a 1-D Matérn 5/2.

    Each feature holds a few distinct values (the encoded values of one parameter), so each 1-D
    kernel is a small table over the value pairs, and the sum over features is one matrix product
    of one-hot codes: A · blockdiag(tables) · Bᵀ costs m·n·(number of values) multiply-adds
    instead of m·n·D exponentials. A feature with many distinct values (not ours today) is
    computed directly."""
    assert hp.additive_lengths is not None
    dims = a.shape[1]
    left: list[np.ndarray] = []
    right: list[np.ndarray] = []
    direct = np.zeros((len(a), len(b)))
    for d in range(dims):
        values, codes = np.unique(np.concatenate([a[:, d], b[:, d]]), return_inverse=True)
        if len(values) > 64:
            direct += matern52(np.abs(a[:, d, None] - b[None, :, d]) / hp.additive_lengths[d])
            continue
        table = matern52(np.abs(values[:, None] - values[None, :]) / hp.additive_lengths[d])
        left.append(table[codes[: len(a)]])  # (m, V): row i holds k(a_i, value v)
        right.append(np.eye(len(values))[codes[len(a) :]])  # (n, V) one-hot
    if left:
        direct += np.hstack(left) @ np.hstack(right).T
    direct *= hp.additive / dims
    return direct


# ---------------------------------------------------------------------------------- fitting
def negative_log_posterior(
    theta: np.ndarray,
    components: np.ndarray,
    y: np.ndarray,
    length_prior: np.ndarray | None = None,
    additive: float = 0.0,
) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood plus hyperprior, and its gradient in ``theta``.

    Args:
        theta: log amplitude, log length scales, [log additive amplitude, its log length scales,]
            log noise (``Hyperparameters.to_theta``).
        components: (n*n, D) squared per-feature differences of the training inputs.
        y: standardized targets (n,).
        length_prior: per feature, the prior mean of its log length scale (default ``LENGTH_PRIOR``;
            the additive component's length scales share it).
        additive: above 0, ``theta`` has the additive component, and this is the prior median of
            its variance (the ARD part's is ``exp(AMPLITUDE_PRIOR[0])`` = 1).
    """
    n, dims = len(y), components.shape[1]
    amplitude, noise = math.exp(theta[0]), math.exp(theta[-1])
    inv_l2 = np.exp(-2.0 * theta[1 : 1 + dims])
    r = np.sqrt(components @ inv_l2).reshape(n, n)
    s = SQRT5 * r
    e = np.exp(-s)
    signal = amplitude * (1.0 + s + s * s / 3.0) * e
    k = signal + (noise + JITTER) * np.eye(n)
    if additive > 0:
        share = math.exp(theta[1 + dims]) / dims
        r2_add = components * np.exp(-2.0 * theta[2 + dims : -1])  # (n*n, D) per-feature r^2
        s_add = SQRT5 * np.sqrt(r2_add)
        e_add = np.exp(-s_add)
        additive_signal = share * ((1.0 + s_add + s_add * s_add / 3.0) * e_add).sum(1).reshape(n, n)
        k += additive_signal
    # LAPACK directly: the scipy.linalg wrappers' argument checks cost more than a 64x64 solve.
    chol, info = scipy.linalg.lapack.dpotrf(k, lower=1, clean=1)
    if info != 0:
        return 1e10, np.zeros_like(theta)
    alpha, _ = scipy.linalg.lapack.dpotrs(chol, y, lower=1)
    nll = 0.5 * float(y @ alpha) + float(np.log(np.diag(chol)).sum()) + 0.5 * n * math.log(2 * math.pi)
    k_inv, _ = scipy.linalg.lapack.dpotri(chol, lower=1)
    k_inv = np.tril(k_inv) + np.tril(k_inv, -1).T
    w = np.outer(alpha, alpha) - k_inv  # d(loglik)/dK
    grad = np.empty_like(theta)
    grad[0] = -0.5 * float((w * signal).sum())
    a = (5.0 / 3.0) * amplitude * (1.0 + s) * e
    grad[1 : 1 + dims] = -0.5 * ((w * a).reshape(-1) @ components) * inv_l2
    if additive > 0:
        grad[1 + dims] = -0.5 * float((w * additive_signal).sum())
        # d k_d / d log l_d = (5/3) (1 + s_d) e^(-s_d) r_d^2 for each feature's 1-D Matérn
        grad[2 + dims : -1] = -0.5 * (w.reshape(-1) @ ((5.0 / 3.0) * share * (1.0 + s_add) * e_add * r2_add))
    grad[-1] = -0.5 * noise * float(np.trace(w))
    prior, prior_grad = _log_prior(theta, length_prior, dims, additive)
    return nll - prior, grad - prior_grad


def _log_prior(
    theta: np.ndarray, length_prior: np.ndarray | None = None, dims: int | None = None, additive: float = 0.0
) -> tuple[float, np.ndarray]:
    dims = len(theta) - 2 if dims is None else dims
    lengths = np.full(dims, LENGTH_PRIOR[0]) if length_prior is None else length_prior
    means = [[AMPLITUDE_PRIOR[0]], lengths]
    sds = [[AMPLITUDE_PRIOR[1]], np.full(dims, LENGTH_PRIOR[1])]
    if additive > 0:  # the additive component: its variance around ``additive``, its lengths as the ARD's
        means += [[math.log(additive)], lengths]
        sds += sds
    means_all = np.concatenate([*means, [NOISE_PRIOR[0]]])
    sds_all = np.concatenate([*sds, [NOISE_PRIOR[1]]])
    z = (theta - means_all) / sds_all
    return float(-0.5 * (z * z).sum()), -z / sds_all


def fit_hyperparameters(
    x: np.ndarray,
    y: np.ndarray,
    maxiter: int = 60,
    length_prior: np.ndarray | None = None,
    start: Hyperparameters | None = None,
    additive: float = 0.0,
) -> Hyperparameters:
    """MAP hyperparameters for standardized targets ``y`` at inputs ``x`` (deterministic).

    The posterior is often bimodal with few points ("everything matters locally" vs "a few
    features matter smoothly"), so short and long length scales are both tried as starting
    points, and L-BFGS-B runs from the better one only: half the cost of two full restarts.
    ``start``: run from there instead (a nearby answer, refined in a few steps); with an additive
    component, ``additive`` must be its prior (as for the fit it came from). ``additive``: above 0,
    with the additive component (``negative_log_posterior``), which starts at its prior median.
    """
    dims = x.shape[1]
    diff = x[:, None, :] - x[None, :, :]
    components = (diff * diff).reshape(-1, dims)
    if start is not None and (start.additive_lengths is not None) != (additive > 0):
        raise ValueError("a start with an additive component needs its prior (additive > 0), and only it")
    length_bounds = [LENGTH_BOUNDS] * dims
    bounds = [AMPLITUDE_BOUNDS, *length_bounds]
    bounds += [AMPLITUDE_BOUNDS, *length_bounds] if additive > 0 else []
    bounds.append(NOISE_BOUNDS)
    if start is not None:
        theta0 = np.clip(start.to_theta(), [b[0] for b in bounds], [b[1] for b in bounds])
    else:
        starts = []
        for length in (0.3, 1.5):
            lengths = np.full(dims, length)
            if length_prior is not None:  # features expected to matter less start where their prior is
                lengths = np.maximum(lengths, np.exp(length_prior))
            if additive > 0:
                starts.append(Hyperparameters(1.0, lengths, 1e-2, additive, lengths).to_theta())
            else:
                starts.append(Hyperparameters(1.0, lengths, 1e-2).to_theta())
        theta0 = min(starts, key=lambda theta: negative_log_posterior(theta, components, y, length_prior, additive)[0])
    result = scipy.optimize.minimize(
        negative_log_posterior,
        theta0,
        args=(components, y, length_prior, additive),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": maxiter},
    )
    return Hyperparameters.from_theta(np.asarray(result.x), additive > 0)


def loo_log_predictive(x: np.ndarray, y: np.ndarray, hp: Hyperparameters) -> float:
    """Sum of the leave-one-out log predictive densities of ``y`` under the GP with ``hp``, in
    closed form from one factorization (Rasmussen & Williams, eq. 5.10-5.12): with K the
    covariance of the noisy targets, point i's left-out mean misses ``y_i`` by
    ``(K^-1 y)_i / (K^-1)_ii`` and its variance is ``1 / (K^-1)_ii``. A model comparison that
    needs no held-out data and, unlike the fitted marginal likelihood, does not reward a model
    whose extra length scales merely fit the points it was fitted on."""
    k = covariance(x, x, hp) + (hp.noise + JITTER) * np.eye(len(x))
    chol = scipy.linalg.cholesky(k, lower=True, check_finite=False)
    k_inv = scipy.linalg.cho_solve((chol, True), np.eye(len(x)), check_finite=False)
    d = np.maximum(np.diag(k_inv), 1e-300)
    miss = (k_inv @ y) / d
    return float(np.sum(0.5 * np.log(d) - 0.5 * miss * miss * d - 0.5 * math.log(2 * math.pi)))


# ---------------------------------------------------------------------------------- posterior
class GaussianProcess:
    """Posterior of a zero-mean GP on standardized targets with fixed hyperparameters."""

    def __init__(
        self, x: np.ndarray, y: np.ndarray, hp: Hyperparameters, extra_noise: np.ndarray | None = None
    ) -> None:
        """``extra_noise`` adds per-point noise variance (less trusted points, e.g. warm-start priors)."""
        self.x, self.y, self.hp = x, y, hp
        k = covariance(x, x, hp) + (hp.noise + JITTER) * np.eye(len(x))
        if extra_noise is not None:
            k[np.diag_indices_from(k)] += extra_noise
        self.chol = scipy.linalg.cholesky(k, lower=True, check_finite=False)
        self.alpha = scipy.linalg.cho_solve((self.chol, True), y, check_finite=False)

    def pool(self, z: np.ndarray) -> PoolPosterior:
        return PoolPosterior(self, z)

    def mean(self, z: np.ndarray) -> np.ndarray:
        """Posterior mean only: no triangular solve, a third of the cost of ``pool``."""
        return covariance(z, self.x, self.hp, fast=True) @ self.alpha


class PoolPosterior:
    """Posterior mean and variance over a fixed candidate pool, conditionable on fantasies.

    ``condition(i)`` adds a fantasized noise-free-ish observation at pool point ``i`` whose value
    is the posterior mean there (the "kriging believer"): the mean is unchanged and the variance
    shrinks around ``i``, so the next pick of a batch moves elsewhere unless ``i``'s neighbourhood
    is still clearly the best bet.
    """

    def __init__(self, gp: GaussianProcess, z: np.ndarray) -> None:
        self.gp, self.z = gp, z
        cross = covariance(z, gp.x, gp.hp, fast=True)  # (m, n)
        self.mean = cross @ gp.alpha
        self.v = scipy.linalg.solve_triangular(gp.chol, cross.T, lower=True, check_finite=False)
        self.var = np.maximum(gp.hp.variance - (self.v * self.v).sum(0), 1e-12)
        self._fantasies: list[np.ndarray] = []

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def condition(self, i: int) -> None:
        gp = self.gp
        prior = covariance(self.z, self.z[i : i + 1], gp.hp, fast=True)[:, 0]
        cov = prior - self.v.T @ self.v[:, i]
        for w in self._fantasies:
            cov -= w * w[i]
        w_new = cov / math.sqrt(max(cov[i], 0.0) + gp.hp.noise + JITTER)
        self.var = np.maximum(self.var - w_new * w_new, 1e-12)
        self._fantasies.append(w_new)
