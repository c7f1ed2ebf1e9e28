#!/usr/bin/env bash
# issue 19 on the GPU machine: the whole profile -> tune -> swap loop for GPT-2 small, then the
# Llama-shaped model, each through `kernelfarm profile-model` against a fresh embedded farm (PostgreSQL
# and Redis from the wheels, API, coordinator, one triton worker on the same GPU), cold compile caches.
# WHEELS: folder of the dependencies the node lacks (deploy/wheelhouse.py); OUT: where results go.
# IDLE=0 skips the idle-host GPT-2 profile, LLAMA=0 the Llama command, FARM=0 the farm and the loop.
# Run from the repository root (the tree need not be installed: PYTHONPATH).
set -uo pipefail
: "${WHEELS:?folder of wheels}" "${OUT:?output folder}"
PY=${PY:-python3}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
CACHE=$(mktemp -d)  # cold: every compile cache starts empty
export TRITON_CACHE_DIR=$CACHE/triton CUDA_CACHE_PATH=$CACHE/cuda KERNELFARM_TRITON_CACHE=$CACHE/farm
chmod 755 "$CACHE"
WORK=$CACHE/out
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
$PY -c 'import torch, triton, transformers; print("torch", torch.__version__, "triton", triton.__version__, "transformers", transformers.__version__)' | tee -a "$OUT/machine.txt"
profile() {  # NAME TIMEOUT ARGS...: one profile-model command, timed as a whole
  local name=$1 limit=$2; shift 2
  echo "$name: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
  SECONDS=0
  timeout "$limit" $PY -m kernelfarm profile-model "$@" --out "$WORK/$name" > "$WORK/$name.log" 2>&1
  local rc=$?
  echo "$name: rc $rc, whole command ${SECONDS}s: profile-model $*" | tee -a "$OUT/machine.txt"
  tail -n 40 "$WORK/$name.log"
  cp "$WORK/$name/profile.json" "$OUT/$name-profile.json" 2>/dev/null
  cp "$WORK/$name/report.md" "$OUT/$name-report.md" 2>/dev/null
}
# The profile alone on an idle host first (no farm): the overhead and latency without a neighbour.
[ "${IDLE:-1}" = 1 ] && profile gpt2-idle 120 gpt2 --dtype bfloat16 --batch 8 --seq 512 && rm -f "$OUT/gpt2-idle-report.md"
if [ "${FARM:-1}" = 0 ]; then  # the profiles alone, on the idle host: no farm, no tuning
  profile llama-idle 120 llama --dtype bfloat16 --batch 8 --seq 512
  cat "$WORK"/*.log > "$OUT/logs.txt"
  exit 0
fi
SECONDS=0
$PY -m kernelfarm up --backend triton --workers 1 --detach 2>&1 | tail -3
# A user profiles once the farm is up: wait for the worker's warm-up (its compile pool's processes
# importing torch and Triton load every core for a while) to end: 3 seconds in a row with the CPUs
# at least 85 % idle, at most 90 s.
busy() { read -r _ a b c d e f g _ < /proc/stat; echo $((a + b + c + e + f + g)) $((a + b + c + d + e + f + g)); }
quiet=0
for _ in $(seq 90); do
  read -r b0 t0 < <(busy); sleep 1; read -r b1 t1 < <(busy)
  if (( (b1 - b0) * 100 < 15 * (t1 - t0) )); then quiet=$((quiet + 1)); else quiet=0; fi
  (( quiet >= 3 )) && break
done
echo "stack up and worker warm: ${SECONDS}s" | tee -a "$OUT/machine.txt"
# What uses the host's CPUs from here on (the idle farm, the loop), once a second: host-samples.jsonl.
$PY benchmarks/profiler/host_sampler.py --out "$OUT/host-samples.jsonl" & SAMPLER=$!
sleep "${IDLE_SAMPLE:-15}"  # the idle farm alone first
profile gpt2 300 gpt2 --dtype bfloat16 --batch 8 --seq 512 --compile --tune --top 3 --budget 48 --swap --store
[ "${LLAMA:-1}" = 1 ] && profile llama ${LLAMA_LIMIT:-200} llama --dtype bfloat16 --batch 8 --seq 512 ${LLAMA_ARGS---tune --top 3 --budget 48 --swap}
gzip -c "$WORK/gpt2/trace.json" > "$OUT/gpt2-trace.json.gz" 2>/dev/null
kill "$SAMPLER" 2>/dev/null
$PY -m kernelfarm down 2>&1 | tail -2
cat "$WORK"/*.log > "$OUT/logs.txt"
