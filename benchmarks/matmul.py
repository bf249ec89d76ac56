"""Matmul choices under ``mode="max-autotune"``: PyTorch's call (cuBLAS) against the Triton
matmul template with its fused epilogue, measured in one run.

    python benchmarks/matmul.py                 # on a GPU: 4096-sized products, fp32/fp16/bf16
    python benchmarks/matmul.py --size 64       # (without a GPU the interpreter runs it: tiny)

For each case -- ``relu(x @ w + b)`` (addmm + an activation epilogue) and ``x @ w + res``
(mm + a residual add) -- it prints the autotune table of the max-autotune compilation (every
candidate timed, the chosen one marked) and the run time of: eager; tutorcompile default
(the PyTorch call, then one pointwise kernel); tutorcompile max-autotune (whatever won); and
the template forced (``autotune.matmul_choice.force = "template"``), each as a median with
its ratio against eager. Read ratios, not absolutes; on the interpreter the template's times
say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import tutorcompile  # noqa: E402,F401  (sets TRITON_INTERPRET without a GPU)
from tutorcompile.bench import measure  # noqa: E402
from tutorcompile.inductor import autotune  # noqa: E402
from tutorcompile.inductor.compile_fx import compile_fx  # noqa: E402
from tutorcompile.ops import ops, trace  # noqa: E402


def addmm_relu(x, w, b, res):
    return ops.relu(ops.add(ops.matmul(x, w), b))


def mm_residual(x, w, b, res):
    return ops.add(ops.matmul(x, w), res)


def eager_addmm_relu(x, w, b, res):
    return torch.relu(x @ w + b)


def eager_mm_residual(x, w, b, res):
    return x @ w + res


CASES = {"addmm+relu": (addmm_relu, eager_addmm_relu),
         "mm+residual": (mm_residual, eager_mm_residual)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="M = N = K")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    size = args.size or (4096 if cuda else 64)
    print(f"device: {torch.cuda.get_device_name() if cuda else 'cpu (Triton interpreter)'}, "
          f"M = N = K = {size}")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        x, w = (torch.randn(size, size, device=device, dtype=dtype) / size ** 0.25
                for _ in range(2))
        b, res = torch.randn(size, device=device, dtype=dtype), \
            torch.randn(size, size, device=device, dtype=dtype)
        inputs = [x, w, b, res]
        for case, (fn, eager) in CASES.items():
            graph = trace(fn, *inputs)
            eager_ms = measure(eager, *inputs).median_ms
            rows = [("eager", eager_ms)]
            default = compile_fx(graph, inputs, codegen="triton")
            rows.append(("tc default (extern + kernel)", measure(default, *inputs).median_ms))
            tuned = compile_fx(graph, inputs, codegen="triton", mode="max-autotune")
            rows.append(("tc max-autotune", measure(tuned, *inputs).median_ms))
            autotune.matmul_choice.force = "template"
            try:
                forced = compile_fx(graph, inputs, codegen="triton", mode="max-autotune")
            finally:
                autotune.matmul_choice.force = None
            rows.append(("tc template forced", measure(forced, *inputs).median_ms))
            for name, compiled in (("max-autotune", tuned), ("template forced", forced)):
                tol = 1e-3 if dtype == torch.float32 else 5e-2
                torch.testing.assert_close(compiled(*inputs), eager(*inputs), rtol=tol,
                                           atol=tol, msg=f"{case} {dtype_name} {name}")
            print(f"\n== {case}, {dtype_name} ==")
            print(tuned.autotune_table)
            for name, ms in rows:
                print(f"  {name:<30} {ms:9.3f} ms   {eager_ms / ms:5.2f}x eager")


if __name__ == "__main__":
    main()
