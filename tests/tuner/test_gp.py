"""The fast GP agrees with scikit-optimize's and with textbook conditioning."""

from __future__ import annotations

import numpy as np
import pytest
from skopt.learning import GaussianProcessRegressor
from skopt.learning.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from kernelfarm.tuner.strategies import gp as G


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.random((30, 4))
    y = np.sin(x @ np.array([3.0, 1.0, 0.5, 2.0]))
    return x, (y - y.mean()) / y.std()


def _components(x: np.ndarray) -> np.ndarray:
    diff = x[:, None, :] - x[None, :, :]
    return (diff * diff).reshape(-1, x.shape[1])


def test_log_likelihood_matches_scikit_optimize(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    hp = G.Hyperparameters(1.7, np.array([0.3, 0.9, 2.0, 0.5]), 1e-2)
    kernel = ConstantKernel(hp.amplitude) * Matern(length_scale=hp.lengths, nu=2.5) + WhiteKernel(hp.noise + G.JITTER)
    reference = GaussianProcessRegressor(kernel=kernel, optimizer=None, alpha=0.0, normalize_y=False).fit(x, y)
    theta = hp.to_theta()
    nlp, _ = G.negative_log_posterior(theta, _components(x), y)
    prior, _ = G._log_prior(theta)
    assert -(nlp + prior) == pytest.approx(reference.log_marginal_likelihood_value_, rel=1e-9)

    mean, std = reference.predict(x[:5] + 0.01, return_std=True)
    posterior = G.GaussianProcess(x, y, hp).pool(x[:5] + 0.01)
    np.testing.assert_allclose(posterior.mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(posterior.std, np.sqrt(std**2 - hp.noise - G.JITTER), rtol=1e-3, atol=1e-4)


def test_gradient_matches_finite_differences(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    theta = G.Hyperparameters(0.8, np.array([0.2, 0.7, 1.5, 3.0]), 3e-3).to_theta()
    _, grad = G.negative_log_posterior(theta, _components(x), y)
    eps = 1e-6
    numeric = [
        (
            G.negative_log_posterior(theta + e, _components(x), y)[0]
            - G.negative_log_posterior(theta - e, _components(x), y)[0]
        )
        / (2 * eps)
        for e in np.eye(len(theta)) * eps
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-5)


def test_fit_finds_the_relevant_features() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((40, 3))
    y = np.sin(6 * x[:, 0])  # only the first feature matters
    hp = G.fit_hyperparameters(x, (y - y.mean()) / y.std())
    assert hp.lengths[0] < hp.lengths[1] and hp.lengths[0] < hp.lengths[2]


def test_fantasy_conditioning_equals_refitting_with_the_believed_value(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    hp = G.Hyperparameters(1.0, np.full(4, 0.6), 1e-4)
    z = np.random.default_rng(1).random((12, 4))
    posterior = G.GaussianProcess(x, y, hp).pool(z)
    believed = [3, 7]
    means = posterior.mean.copy()
    for i in believed:
        posterior.condition(i)
    refit = G.GaussianProcess(np.vstack([x, z[believed]]), np.concatenate([y, means[believed]]), hp).pool(z)
    np.testing.assert_allclose(posterior.mean, refit.mean, atol=1e-6)
    np.testing.assert_allclose(posterior.var, refit.var, rtol=1e-3, atol=1e-6)


def test_a_fit_from_a_given_start_refines_it_and_never_leaves_the_bounds(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    components = _components(x)
    fitted = G.fit_hyperparameters(x, y)

    def cost(hp: G.Hyperparameters) -> float:
        return G.negative_log_posterior(hp.to_theta(), components, y)[0]

    rough = G.Hyperparameters(1.0, np.full(4, 5.0), 0.1)
    refined = G.fit_hyperparameters(x, y, maxiter=5, start=rough)
    assert cost(fitted) <= cost(refined) < cost(rough)  # a few steps improve on the start, short of the MAP
    outside = G.Hyperparameters(1e3, np.full(4, 1e-6), 1.0)  # every value out of its bounds: clipped first
    theta = G.fit_hyperparameters(x, y, maxiter=0, start=outside).to_theta()
    low, high = G.LENGTH_BOUNDS
    assert np.all((theta[1:-1] >= low - 1e-12) & (theta[1:-1] <= high + 1e-12))
    assert theta[0] <= G.AMPLITUDE_BOUNDS[1] + 1e-12 and theta[-1] <= G.NOISE_BOUNDS[1] + 1e-12
