#!/usr/bin/env bash
# The rest of docs/benchmarks/STRATEGIES.md: ablations of the Bayesian optimizer's design choices,
# ask latency on one core, and the warm-start experiment. Writes JSON reports to $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
LANDSCAPES=${LANDSCAPES:?set LANDSCAPES to a folder of Kernel Tuner cache files (e.g. the 20 shared recordings; kernels/recorded/ holds two)}
OUT=${OUT:-benchmarks/strategies/results}
PY=${PY:-.venv/bin/python}
JOBS=${JOBS:-2}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
hard=("$LANDSCAPES"/convolution_RTX_3090.json.gz "$LANDSCAPES"/pnpoly_RTX_3090.json.gz "$LANDSCAPES"/gemm_RTX_3090.json.gz)

# Ablations (failed configs kept, budget 100): each row changes one default (n_init=10 is the default itself).
for variant in n_init=10 failures=ignore failures=feasibility failures=penalty transform=log; do
  $PY -m kernelfarm bench-strategies "${hard[@]}" -s bayes -o "bayes.$variant" --keep-failures \
      --budget 100 --repeats 10 --seed 0 --jobs "$JOBS" --json "$OUT/ablation_${variant/=/_}.json"
done

# Ask latency for a batch of 8 on one core.
$PY benchmarks/strategies/ask_latency.py "$LANDSCAPES"/*.json.gz --strategy bayes --batch 8 --json "$OUT/latency_bayes.json"

# Warm start: cold vs priors from similar, different and unrelated earlier jobs.
$PY benchmarks/strategies/warm_start.py "${hard[@]}" --budget 100 --repeats 10 --jobs "$JOBS" --json "$OUT/warm_start.json"

# Why the GP is our own: scikit-optimize's GP vs the farm's, fit and predict times on one core.
$PY benchmarks/strategies/gp_cost.py > "$OUT/gp_cost.txt"
