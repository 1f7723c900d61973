#!/usr/bin/env bash
# The device check for a lent GPU machine, as one prepared script of a few minutes. From the project root:
#   bash benchmarks/gpu_check.sh [OUT_DIR]          (STEPS=200 SEEDS=1 by default; OUT_DIR defaults to $OUT or gpu-check)
# Needs a Python with a CUDA build of torch and the project's pipeline deps on PATH. It measures:
#   1. bench_step.py --device cuda: tokens/s of miniformer vs the reference and the same-architecture (RoPE) reference
#      at the seed config, fresh instances per trial, all under bf16 autocast, and MFU against a same-process bf16 GEMM;
#   2. the gpu profile's study with the steps cut to STEPS and SEEDS seeds per experiment, under
#      profiles/gpu-workstation (train jobs share the one GPU through the `gpu` resource, 4 at a time): wall time,
#      job time per rule (study_time.py), per-run tokens/s and peak memory (results/perf.json), the report;
#   3. CUDA determinism: baseline seed 0 trained again into a fresh folder, metrics.json compared with the study's.
set -euo pipefail
OUT=$(realpath -m "${1:-${OUT:-gpu-check}}")
STEPS=${STEPS:-200}
SEEDS=${SEEDS:-1}
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
python benchmarks/bench_step.py --device cuda --rounds 7 --steps 20 | tee "$OUT/bench_step_cuda.md"

work=$(mktemp -d)
git ls-files -z | xargs -0 cp --parents -t "$work"
cd "$work"
python - "$STEPS" "$SEEDS" <<'PY'
import sys

import yaml

params = yaml.safe_load(open("params.yaml"))
gpu = params["profiles"]["gpu"]
gpu["seeds_per_experiment"] = int(sys.argv[2])
gpu["train"].update(steps=int(sys.argv[1]), warmup=min(200, int(sys.argv[1]) // 10))
yaml.safe_dump(params, open("params.yaml", "w"), sort_keys=False)
PY
export PYTHONPATH="$work/src"
start=$(date +%s)
snakemake --workflow-profile profiles/gpu-workstation all --config profile=gpu > "$OUT/snakemake.log" 2>&1
echo "gpu study: $(( $(date +%s) - start )) s wall, STEPS=$STEPS SEEDS=$SEEDS" | tee "$OUT/study_wall.txt"
python benchmarks/study_time.py . | tee "$OUT/study_time.md"
cp results/perf.json results/metrics.json report/report.html "$OUT/"

python -m miniformer train baseline --seed 0 --profile gpu --results "$work/again" --no-resume > /dev/null 2>&1
if cmp -s results/runs/baseline/seed0/metrics.json again/runs/baseline/seed0/metrics.json; then
  echo "CUDA determinism: same seed twice -> identical metrics.json" | tee "$OUT/determinism.txt"
else
  echo "CUDA determinism: same seed twice -> metrics.json differ:" | tee "$OUT/determinism.txt"
  diff results/runs/baseline/seed0/metrics.json again/runs/baseline/seed0/metrics.json | tee -a "$OUT/determinism.txt" || true
fi
