"""A Gaussian process regressor sized for a stateless coordinator: ARD Matérn 5/2 + noise, MAP fit.

Why not scikit-optimize's ``GaussianProcessRegressor`` (it is the same model)? Measured on one
core with 11 features (benchmarks/strategies/gp_cost.py): its fit takes 82 ms at 50 points and
824 ms at 200, and ``predict`` with ``return_std`` 263 ms for 4,000 candidates at 200 points,
while the coordinator rebuilds the model on every step. This module computes the same log
marginal likelihood (tests/tuner/test_gp.py checks it against scikit-optimize's) with the
per-dimension distance tensor built once per fit, so one likelihood-and-gradient evaluation is a
few vectorized passes; hyperparameters get weak log-normal priors (MAP) because the first fits see
ten points in ten dimensions. ``PoolPosterior`` adds what batch proposals need: the posterior over
a candidate pool that can be conditioned on fantasized observations in O(n·m) per point.
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
    """Signal variance, one length scale per feature, noise variance (all in natural units)."""

    amplitude: float
    lengths: np.ndarray
    noise: float

    @classmethod
    def default(cls, dims: int) -> Hyperparameters:
        return cls(1.0, np.full(dims, 0.5), 1e-3)

    def to_theta(self) -> np.ndarray:
        return np.concatenate([[math.log(self.amplitude)], np.log(self.lengths), [math.log(self.noise)]])

    @classmethod
    def from_theta(cls, theta: np.ndarray) -> Hyperparameters:
        return cls(float(math.exp(theta[0])), np.exp(theta[1:-1]), float(math.exp(theta[-1])))


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
    """Matérn 5/2 covariance matrix between the rows of ``a`` and ``b``.

    ``fast`` evaluates the element-wise part in float32: ``np.exp`` costs ~8 ns per float64 on the
    farm's CPUs and ~1.5 ns per float32, and a cross-covariance needs no more than 1e-7 relative
    precision (the training matrix that gets factorized stays float64).
    """
    d2 = scaled_sqdist(a, b, hp.lengths)
    if fast:
        r32 = np.sqrt(d2.astype(np.float32))
        k32 = matern52(r32, out=r32)
        k32 *= np.float32(hp.amplitude)
        return k32.astype(np.float64)
    r = np.sqrt(d2, out=d2)
    k = matern52(r, out=r)
    k *= hp.amplitude
    return k


# ---------------------------------------------------------------------------------- fitting
def negative_log_posterior(
    theta: np.ndarray, components: np.ndarray, y: np.ndarray, length_prior: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood plus hyperprior, and its gradient in ``theta``.

    Args:
        theta: log amplitude, log length scales, log noise.
        components: (n*n, D) squared per-feature differences of the training inputs.
        y: standardized targets (n,).
        length_prior: per feature, the prior mean of its log length scale (default ``LENGTH_PRIOR``).
    """
    n = len(y)
    amplitude, noise = math.exp(theta[0]), math.exp(theta[-1])
    inv_l2 = np.exp(-2.0 * theta[1:-1])
    r = np.sqrt(components @ inv_l2).reshape(n, n)
    s = SQRT5 * r
    e = np.exp(-s)
    signal = amplitude * (1.0 + s + s * s / 3.0) * e
    k = signal + (noise + JITTER) * np.eye(n)
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
    grad[1:-1] = -0.5 * ((w * a).reshape(-1) @ components) * inv_l2
    grad[-1] = -0.5 * noise * float(np.trace(w))
    prior, prior_grad = _log_prior(theta, length_prior)
    return nll - prior, grad - prior_grad


def _log_prior(theta: np.ndarray, length_prior: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    lengths = np.full(len(theta) - 2, LENGTH_PRIOR[0]) if length_prior is None else length_prior
    means = np.concatenate([[AMPLITUDE_PRIOR[0]], lengths, [NOISE_PRIOR[0]]])
    sds = np.concatenate([[AMPLITUDE_PRIOR[1]], np.full(len(theta) - 2, LENGTH_PRIOR[1]), [NOISE_PRIOR[1]]])
    z = (theta - means) / sds
    return float(-0.5 * (z * z).sum()), -z / sds


def theta_bounds(dims: int) -> list[tuple[float, float]]:
    """Bounds of (log amplitude, ``dims`` log length scales, log noise)."""
    return [AMPLITUDE_BOUNDS, *([LENGTH_BOUNDS] * dims), NOISE_BOUNDS]


def squared_differences(x: np.ndarray) -> np.ndarray:
    """(n*n, D) squared per-feature differences of the rows of ``x``: the ``components`` the
    likelihood scales by the length scales."""
    diff = x[:, None, :] - x[None, :, :]
    return (diff * diff).reshape(-1, x.shape[1])


def fit_hyperparameters(
    x: np.ndarray,
    y: np.ndarray,
    maxiter: int = 60,
    length_prior: np.ndarray | None = None,
    start: Hyperparameters | None = None,
) -> Hyperparameters:
    """MAP hyperparameters for standardized targets ``y`` at inputs ``x`` (deterministic).

    The posterior is often bimodal with few points ("everything matters locally" vs "a few
    features matter smoothly"), so short and long length scales are both tried as starting
    points, and L-BFGS-B runs from the better one only: half the cost of two full restarts.
    ``start``: run from there instead (a nearby answer, refined in a few steps).
    """
    return fit_on_components(squared_differences(x), y, maxiter, length_prior, start)


def fit_on_components(
    components: np.ndarray,
    y: np.ndarray,
    maxiter: int = 60,
    length_prior: np.ndarray | None = None,
    start: Hyperparameters | None = None,
) -> Hyperparameters:
    """``fit_hyperparameters`` given the per-feature distance components directly (any (n*n, D)
    non-negative array, e.g. per-parameter mismatches for a Hamming distance)."""
    dims = components.shape[1]
    bounds = theta_bounds(dims)
    if start is not None:
        theta0 = np.clip(start.to_theta(), [b[0] for b in bounds], [b[1] for b in bounds])
    else:
        starts = []
        for length in (0.3, 1.5):
            lengths = np.full(dims, length)
            if length_prior is not None:  # features expected to matter less start where their prior is
                lengths = np.maximum(lengths, np.exp(length_prior))
            starts.append(Hyperparameters(1.0, lengths, 1e-2).to_theta())
        theta0 = min(starts, key=lambda theta: negative_log_posterior(theta, components, y, length_prior)[0])
    result = scipy.optimize.minimize(
        negative_log_posterior,
        theta0,
        args=(components, y, length_prior),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": maxiter},
    )
    return Hyperparameters.from_theta(np.asarray(result.x))


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
        self.var = np.maximum(gp.hp.amplitude - (self.v * self.v).sum(0), 1e-12)
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
