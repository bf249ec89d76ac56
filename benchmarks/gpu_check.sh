#!/usr/bin/env bash
# One prepared GPU session, for a lent CUDA machine (the device tool): everything issue 41
# and the test suite ask of a GPU, in one command that ends inside ~9 minutes.
#
#     bash benchmarks/gpu_check.sh            # writes its logs and tables under $OUT
#
# 1. a smoke test (one Triton kernel compiled and checked);
# 2. benchmarks/steady_state.py --device cuda on four vision and four transformer models,
#    inference and a training step, tc beside torch.compile (two runs side by side: the
#    models are launch-bound, so the GPU is mostly idle), short timing;
# 3. benchmarks/models.py --device cuda on the course GPT;
# 4. the tests that run on CUDA (`-k "cuda or gpu or triton"`, and the reductions).
# Each step has its own time limit, so one that hangs leaves the others their time.
# The machine has Python 3.12 with torch, triton, transformers, timm and torchvision, but
# not ipywidgets, nbformat or jupyter: the tests that need those fail or skip there.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
{
date
nvidia-smi -L
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, \
triton.__version__, torch.cuda.get_device_name())"
timeout 90 python3 - <<'PY'
import torch, tutorcompile as tc
f = tc.compile(lambda x: (x.sin() + 1).relu().sum(1))
x = torch.randn(64, 64, device="cuda")
print("smoke: max |diff|", (f(x) - (x.sin() + 1).relu().sum(1)).abs().max().item())
PY
SS="python3 benchmarks/steady_state.py --device cuda --threads 4 --repeat 5 --min-time 0.3 \
--timeout 110"
timeout 300 $SS --models resnet18,mobilenet_v3_small,convnext_atto,vit_tiny \
    --json "$OUT/ss_vision.json" > "$OUT/ss_vision.log" 2>&1 &
timeout 300 $SS --models gpt2,bert,llama,t5 \
    --json "$OUT/ss_transformer.json" > "$OUT/ss_transformer.log" 2>&1 &
wait
tail -n 25 "$OUT/ss_vision.log" "$OUT/ss_transformer.log"
date
timeout 90 python3 benchmarks/models.py --device cuda --models gpt --batches 8 --threads 4 \
    > "$OUT/gpt.log" 2>&1
tail -n 8 "$OUT/gpt.log"
date
timeout 150 python3 -m pytest tests -q -n 8 -p no:cacheprovider --continue-on-collection-errors \
    --timeout 100 --maxfail 40 -k "cuda or gpu or triton or reductions" > "$OUT/tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -n 45
date
} 2>&1 | tee "$OUT/all.log"
