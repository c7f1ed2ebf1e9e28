#!/usr/bin/env bash
# The full strategy comparison behind docs/benchmarks/STRATEGIES.md: the farm's strategies and
# Kernel Tuner 1.5.0's, on every landscape, with failed configs kept and removed.
# Needs the bench extra (pip install -e '.[bench]'). Writes JSON reports to $OUT.
#
#   LANDSCAPES=DIR benchmarks/strategies/run_comparison.sh     # OUT=benchmarks/strategies/results
#
# Repeats: 10 for every strategy except Kernel Tuner's Bayesian optimization (5 for its default
# "multi-ultrafast" method, 3 for "ei": ~0.2 s per evaluation on gemm), to keep the run near
# 20 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
LANDSCAPES=${LANDSCAPES:?set LANDSCAPES to a folder of Kernel Tuner cache files (e.g. the 20 shared recordings; kernels/recorded/ holds two)}
OUT=${OUT:-benchmarks/strategies/results}
PY=${PY:-.venv/bin/python}
JOBS=${JOBS:-2}
BUDGET=${BUDGET:-200}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
files=("$LANDSCAPES"/*.json.gz)
KT_FAST=(random_sample genetic_algorithm simulated_annealing diff_evo pso greedy_ils mls dual_annealing basinhopping firefly_algorithm)

for mode in keep drop; do
  flag=(); [[ $mode == keep ]] && flag=(--keep-failures)
  SECONDS=0
  $PY -m kernelfarm bench-strategies "${files[@]}" -s bayes -s genetic -s random \
      --budget "$BUDGET" --repeats 10 --seed 0 --jobs "$JOBS" "${flag[@]}" --json "$OUT/farm_$mode.json"
  echo "farm strategies ($mode): ${SECONDS}s"
  SECONDS=0
  $PY -m kernelfarm bench-strategies "${files[@]}" -s bayes --batch 8 \
      --budget "$BUDGET" --repeats 10 --seed 0 --jobs "$JOBS" "${flag[@]}" --json "$OUT/farm_${mode}_batch8.json"
  echo "bayes batch 8 ($mode): ${SECONDS}s"
  SECONDS=0
  kt=(); for s in "${KT_FAST[@]}"; do kt+=(--strategy "$s"); done
  $PY benchmarks/strategies/kernel_tuner_replay.py "${files[@]}" "${kt[@]}" \
      --budget "$BUDGET" --repeats 10 --seed 0 --jobs "$JOBS" "${flag[@]}" --json "$OUT/kt_$mode.json"
  $PY benchmarks/strategies/kernel_tuner_replay.py "${files[@]}" --strategy bayes_opt \
      --budget "$BUDGET" --repeats 5 --seed 0 --jobs "$JOBS" "${flag[@]}" --json "$OUT/kt_${mode}_bo.json"
  $PY benchmarks/strategies/kernel_tuner_replay.py "${files[@]}" --strategy bayes_opt:method=ei \
      --budget "$BUDGET" --repeats 3 --seed 0 --jobs "$JOBS" "${flag[@]}" --json "$OUT/kt_${mode}_bo_ei.json"
  echo "kernel tuner ($mode): ${SECONDS}s"
done
