"""Why the Bayesian optimizer has its own GP: scikit-optimize's GP vs tuner/strategies/gp.py.

Times, on one core, fitting a Matérn 5/2 ARD GP (11 features, like gemm) to n points and
predicting mean and std at 4,000 candidates, for scikit-optimize 0.10.2's
``GaussianProcessRegressor`` (its default optimizer, no restarts) and for the farm's GP (MAP fit
from the better of two starts; the optimizer fits at most 64 points per ask).

Usage: python benchmarks/strategies/gp_cost.py [--sizes 50,100,200]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from skopt.learning import GaussianProcessRegressor  # noqa: E402
from skopt.learning.gaussian_process.kernels import ConstantKernel, Matern  # noqa: E402

from kernelfarm.tuner.strategies import gp  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,100,200")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    rng = np.random.default_rng(0)
    dims = 11
    candidates = rng.random((4000, dims))
    table = Table(title="GP fit and predict (4,000 candidates), one core, ms", title_justify="left")
    for column in ("points", "skopt fit", "skopt predict", "farm fit", "farm predict"):
        table.add_column(column, justify="right")
    for n in (int(s) for s in args.sizes.split(",")):
        x = rng.random((n, dims))
        y = np.sin(x @ rng.random(dims) * 3) + 0.05 * rng.standard_normal(n)
        y = (y - y.mean()) / y.std()
        kernel = ConstantKernel(1.0, (0.01, 10)) * Matern(np.full(dims, 0.5), (0.05, 20), nu=2.5)
        reference = GaussianProcessRegressor(kernel=kernel, noise="gaussian", normalize_y=True, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            reference.fit(x, y)
            skopt_fit = time.perf_counter() - start
            start = time.perf_counter()
            reference.predict(candidates, return_std=True)
            skopt_predict = time.perf_counter() - start
        start = time.perf_counter()
        hp = gp.fit_hyperparameters(x, y)
        farm_fit = time.perf_counter() - start
        start = time.perf_counter()
        posterior = gp.GaussianProcess(x, y, hp).pool(candidates)
        _ = posterior.std
        farm_predict = time.perf_counter() - start
        table.add_row(str(n), *(f"{1000 * t:.0f}" for t in (skopt_fit, skopt_predict, farm_fit, farm_predict)))
    Console().print(table)


if __name__ == "__main__":
    main()
