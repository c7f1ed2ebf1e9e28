#!/usr/bin/env bash
# Everything behind issue 17's tables in one call on a machine with many cores (the device
# machine: 16 CPU cores): the full comparison (farm + every Kernel Tuner strategy, both modes,
# budget 200, 10 repeats), cross-GPU warm start on the real pairs, and the LLM-arm proposers.
# LANDSCAPES: folder of the 20 recordings; OUT: where the JSON reports go; JOBS: processes.
# Kernel Tuner must be importable (pip install -e '.[bench]', or its wheels on PYTHONPATH).
set -uo pipefail
cd "$(dirname "$0")"
: "${LANDSCAPES:?folder of Kernel Tuner cache files}" "${OUT:?output folder}"
JOBS=${JOBS:-16}
PY=${PY:-python3}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONWARNINGS=ignore
mkdir -p "$OUT"
SECONDS=0
timeout $(( ${DEADLINE:-200} + 120 )) $PY compare_all.py --landscapes "$LANDSCAPES" --budget 200 --repeats 10 \
    --farm bayes --farm genetic --farm random --jobs "$JOBS" --deadline "${DEADLINE:-200}" --out "$OUT" 2>&1 | grep -vi warn | tail -8
echo "comparison: ${SECONDS}s"; SECONDS=0
timeout 170 $PY warm_start_pairs.py --landscapes "$LANDSCAPES" --budget 50 --prior-trials 100 --prior-strategy random \
    --repeats 10 --jobs "$JOBS" --json "$OUT/warm_start_pairs.json" > "$OUT/warm_start_pairs.log" 2>&1
echo "warm start: ${SECONDS}s"; SECONDS=0
timeout 110 $PY llm_proposers.py --landscapes "$LANDSCAPES" --only convolution_RTX_2080_Ti --only convolution_milo_W6600 \
    --only dedispersion_MI250X --only gemm_RTX_2080_Ti --only pnpoly_RTX_Titan --budget 100 --repeats 10 \
    --jobs "$JOBS" --json "$OUT/llm_proposers.json" > "$OUT/llm_proposers.log" 2>&1
echo "llm proposers: ${SECONDS}s"
SECONDS=0
for prior in 0 300; do
  timeout 60 $PY ask_latency.py "$LANDSCAPES"/{gemm_RTX_3090,convolution_RTX_3090,dedispersion_A100}.json.gz \
      --batch 8 --sizes 500 --samples 7 --cpu 1 --prior "$prior" --json "$OUT/latency_prior_$prior.json" 2>&1 | tail -8
done
echo "latency: ${SECONDS}s"
