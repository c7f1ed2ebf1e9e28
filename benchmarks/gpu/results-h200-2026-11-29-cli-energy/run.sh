#!/bin/bash
# The README's energy commands, from the CLI, on the device's GPU: one cuda worker, the embedded stack.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | tail -3
export KERNELFARM_STATE_DIR=/tmp/kfstate OMP_NUM_THREADS=1
K="python3 -m kernelfarm"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp   # not the checkout: the installed wheel, as a user runs it
$K up --detach --backend cuda --workers 1 2>&1 | tail -4
GPU=$($K workers --json | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['gpu_model'])")
echo "GPU model: $GPU"
echo "=== tune matmul_fp32 time+energy"
$K tune matmul_fp32 --gpu "$GPU" --budget 12 --parallelism 2 --profile none --objective time+energy -o n_init=4 \
    --seed 1 --progress-every 30 2>&1 | tail -25
echo "=== best pareto"
$K best matmul_fp32 --gpu "$GPU" --objective pareto 2>&1 | tail -20
echo "=== best energy"
$K best matmul_fp32 --gpu "$GPU" --objective energy 2>&1 | tail -5
echo "=== tune layernorm energy"
$K tune layernorm --gpu "$GPU" --budget 8 --parallelism 2 --profile none --objective energy --seed 2 \
    --progress-every 30 2>&1 | tail -15
echo "=== bad option"
$K tune layernorm --gpu "$GPU" --budget 8 -o n_init=two 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
$K best matmul_fp32 --gpu "$GPU" --objective pareto --json > "$OUT/best_matmul_fp32_pareto.json"
$K best layernorm --gpu "$GPU" --objective energy --json > "$OUT/best_layernorm_energy.json"
$K jobs --json > "$OUT/jobs.json"
$K down 2>&1 | tail -2
