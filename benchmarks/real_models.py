"""Real-world capture: tiny Hugging Face models through tutorcompile and torch.compile.

    python benchmarks/real_models.py                      # 7 models x eager/aot_eager/inductor
    python benchmarks/real_models.py --backends eager,aot_eager --models gpt2,bert
    python benchmarks/real_models.py --no-torch-compile   # skip torch.compile's cold compiles
    python benchmarks/real_models.py --models albert,bloom,gemma,mixtral   # ten more exist

The models are :func:`tutorcompile.models.hf_model`'s (random-config ``transformers``
GPT-2, BERT, Llama, Mistral, DistilBERT, OPT, T5 encoder by default, and on request the ten
of ``HF_MORE_MODELS``; 2 layers, hidden size 64; input ids 2×16; nothing downloaded), the same
ones ``tests/test_real_models.py`` checks. Per model,
measured side by side in one run:

* capture: graphs and graph breaks from ``tc.explain`` and from ``torch._dynamo.explain``;
* per backend (eager / aot_eager / inductor), for ``tc.compile`` and ``torch.compile``:
  whether inference (``last_hidden_state``, rtol = atol = 1e-4) and one training step's
  gradients (every parameter, loss ``last_hidden_state.pow(2).mean()``, rtol 1e-4,
  atol 1e-5) match eager PyTorch, and the compile seconds: the first inference call, then
  the first training step (forward + backward), each on a fresh cache.

A failure is reported as ``FAIL`` with the exception in the notes below the table, never as
a crash of the script. Compile seconds depend on the disk caches (ours and Inductor's) and on
the machine's load: read them as a comparison taken in one run. For cold caches::

    TUTORCOMPILE_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) \
        python benchmarks/real_models.py --backends inductor

(cold at the start of the run: later models reuse kernels the earlier ones built, for both).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import tutorcompile as tc  # noqa: E402
from tutorcompile.models import HF_MODELS, HF_MORE_MODELS, hf_input_ids, hf_model  # noqa: E402

BACKENDS = ("eager", "aot_eager", "inductor")


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    # a parameter the loss does not reach (BERT's pooler) has no gradient in eager and a zero
    # one from a compiled graph (one autograd node for all outputs): compare as zeros
    return {k: (p.grad if p.grad is not None else torch.zeros_like(p)).clone()
            for k, p in model.named_parameters()}


def _close(a: torch.Tensor, b: torch.Tensor, **tol) -> bool:
    try:
        torch.testing.assert_close(a, b, **tol)
    except AssertionError:
        return False
    return True


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _reset(compiler: str) -> None:
    tc.reset() if compiler == "tc" else torch._dynamo.reset()


def run_backend(name: str, backend: str, compiler: str, notes: list[str]) -> dict:
    """Inference and one training step of ``name`` compiled by ``compiler`` ('tc' or
    'torch') with ``backend``, against eager: {'infer': bool, 'train': bool, 'infer_s',
    'train_s'} (False and NaN seconds where it raised)."""
    compile_fn = tc.compile if compiler == "tc" else torch.compile
    model, ids = hf_model(name), hf_input_ids()
    row = {"infer": False, "train": False, "infer_s": float("nan"), "train_s": float("nan")}
    try:
        with torch.no_grad():
            want = model(ids).last_hidden_state
            _reset(compiler)
            compiled = compile_fn(model, backend=backend)
            got, row["infer_s"] = _timed(lambda: compiled(ids).last_hidden_state)
        row["infer"] = _close(got, want, rtol=1e-4, atol=1e-4)

        model.zero_grad(set_to_none=True)
        model(ids).last_hidden_state.pow(2).mean().backward()
        want = _grads(model)
        model.zero_grad(set_to_none=True)
        _reset(compiler)
        compiled = compile_fn(model, backend=backend)
        _, row["train_s"] = _timed(
            lambda: compiled(ids).last_hidden_state.pow(2).mean().backward())
        got = _grads(model)
        row["train"] = all(_close(got[k], want[k], rtol=1e-4, atol=1e-5) for k in want)
    except Exception as e:  # reported in the table, not raised: one failure must not hide
        notes.append(f"{name} {compiler} {backend}: {type(e).__name__}: {e}"[:300])
    finally:
        _reset(compiler)
    return row


def capture_counts(name: str, compiler: str) -> tuple[int, int]:
    model, ids = hf_model(name), hf_input_ids()
    _reset(compiler)
    with torch.no_grad():
        out = (tc.explain(model) if compiler == "tc" else torch._dynamo.explain(model))(ids)
    _reset(compiler)
    return out.graph_count, out.graph_break_count


def _mark(ok: bool) -> str:
    return "ok" if ok else "FAIL"


def _table(header: list[str], lines: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(HF_MODELS),
                        help="comma-separated, of " + ", ".join(HF_MODELS + HF_MORE_MODELS))
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip torch.compile (its cold compiles take tens of seconds)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    compilers = ["tc"] if args.no_torch_compile else ["tc", "torch"]
    rows, notes = [], []
    for name in args.models.split(","):
        counts = {c: capture_counts(name, c) for c in compilers}
        for backend in args.backends.split(","):
            row = {"model": name, "backend": backend, "counts": counts}
            for compiler in compilers:
                row[compiler] = run_backend(name, backend, compiler, notes)
            print(f"  measured {name} {backend}", file=sys.stderr)
            rows.append(row)

    header = ["model", "backend", "graphs/breaks tc", "torch", "infer tc", "torch",
              "train tc", "torch", "compile s infer tc", "torch", "train tc", "torch"]
    lines = []
    for r in rows:
        tc_row, th = r["tc"], r.get("torch")
        counts = ["{}/{}".format(*r["counts"][c]) if c in r["counts"] else "—"
                  for c in ("tc", "torch")]
        lines.append([
            r["model"], r["backend"], *counts,
            _mark(tc_row["infer"]), _mark(th["infer"]) if th else "—",
            _mark(tc_row["train"]), _mark(th["train"]) if th else "—",
            f"{tc_row['infer_s']:.1f}", f"{th['infer_s']:.1f}" if th else "—",
            f"{tc_row['train_s']:.1f}", f"{th['train_s']:.1f}" if th else "—"])
    print(f"Tiny transformers models, CPU, {args.threads} thread(s); compile s = first call "
          "(inference) / first training step, fresh caches")
    print(_table(header, lines))
    for compiler in compilers:
        ok = sum(r[compiler]["infer"] for r in rows), sum(r[compiler]["train"] for r in rows)
        print(f"{compiler}: inference matches eager in {ok[0]}/{len(rows)} runs, training "
              f"gradients in {ok[1]}/{len(rows)}")
    for note in notes:
        print("  " + note)
    return rows


if __name__ == "__main__":
    main()
