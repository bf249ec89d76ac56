"""Training-code features in one graph: tutorcompile against torch.compile, case by case.

    python benchmarks/features.py                     # every case, both compilers
    python benchmarks/features.py --cases cond,vmap   # names containing these
    python benchmarks/features.py --no-torch-compile

The cases are the features of issue 39 -- higher-order ops (checkpoint, functional_call,
vmap/grad, cond, while_loop, associative_scan, flex_attention), module and tensor hooks,
compiled optimizer steps, ``set_grad_enabled`` regions, ``torch.compiler.disable``,
in-graph seeding, ``itertools``, a mutating custom op, NumPy on tensors and
``record_function`` -- each in a small model written here. For each it prints

* the graphs and break reasons of one call, from ``tc.explain`` and ``torch._dynamo.explain``;
* whether ``fullgraph=True`` compiles it, for each compiler;
* whether tutorcompile's result is right under each backend (``eager``, ``aot_eager``,
  ``inductor``): the return value, the gradients of the inputs and parameters that require
  them (after ``.sum().backward()`` of the tensor results), and the state the call changes
  (parameters an optimizer steps, buffers, a list a hook appends to), each against eager
  PyTorch run on a fresh copy of the same case.

Nothing is timed. A case that torch.compile captures whole and tutorcompile does not is a
gap; the table is the one issue 39 asks for.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch import nn  # noqa: E402

import tutorcompile as tc  # noqa: E402

BACKENDS = ("eager", "aot_eager", "inductor")


@dataclass
class Case:
    """``build()`` returns ``(fn, args, state)``: the function to compile, its arguments and
    the objects whose tensors the call may change (modules, optimizers, lists)."""
    name: str
    build: Callable[[], tuple]


CASES: list[Case] = []


def case(name: str):
    def wrap(build):
        CASES.append(Case(name, build))
        return build
    return wrap


class Block(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.a, self.b = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x))).tanh()


def _x(*shape, grad=True):
    return torch.randn(*shape, requires_grad=grad)


# --- higher-order ops ------------------------------------------------------------------------

@case("checkpoint(module)")
def _checkpoint_module():
    from torch.utils.checkpoint import checkpoint
    block = Block()

    def fn(x):
        return checkpoint(block, x.sin(), use_reentrant=False).cos()
    return fn, (_x(4, 8),), [block]


@case("checkpoint(function)")
def _checkpoint_fn():
    from torch.utils.checkpoint import checkpoint
    w = nn.Parameter(torch.randn(8, 8))

    def body(x, scale):
        return torch.relu(x @ w) * scale

    def fn(x):
        return checkpoint(body, x, 2.0, use_reentrant=False).sum(-1)
    return fn, (_x(4, 8),), [w]


@case("checkpoint(selective policy)")
def _checkpoint_selective():
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )
    block = Block()

    def policy(ctx, op, *args, **kwargs):
        return (CheckpointPolicy.MUST_SAVE if op in (torch.ops.aten.mm.default,
                                                     torch.ops.aten.addmm.default)
                else CheckpointPolicy.PREFER_RECOMPUTE)

    def fn(x):
        return checkpoint(block, x, use_reentrant=False, context_fn=functools.partial(
            create_selective_checkpoint_contexts, policy))
    return fn, (_x(4, 8),), [block]


@case("functional_call")
def _functional_call():
    block = Block()
    params = {k: v.detach().clone().requires_grad_() for k, v in block.named_parameters()}

    def fn(x, params):
        return torch.func.functional_call(block, params, (x,)).sum(0)
    return fn, (_x(4, 8), params), [block]


@case("vmap")
def _vmap():
    w = nn.Parameter(torch.randn(8))

    def fn(x):
        return torch.func.vmap(lambda row: (row * w).sum().sin())(x)
    return fn, (_x(5, 8),), [w]


@case("vmap(in_dims)")
def _vmap_in_dims():
    def fn(x, y):
        return torch.vmap(lambda a, b: a @ b, in_dims=(0, None))(x, y)
    return fn, (_x(3, 4, 5), _x(5, 2)), []


@case("func.grad")
def _func_grad():
    def fn(x):
        return torch.func.grad(lambda t: (t.sin() ** 2).sum())(x)
    return fn, (_x(6, grad=False),), []


@case("vmap(grad) per-sample")
def _per_sample_grad():
    w = torch.randn(8, 3)

    def loss(w, x, y):
        return ((x @ w - y) ** 2).mean()

    def fn(x, y):
        return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(w, x, y)
    return fn, (_x(5, 8, grad=False), _x(5, 3, grad=False)), []


@case("cond")
def _cond():
    lin = nn.Linear(8, 8)

    def fn(x):
        return torch.cond(x.sum() > 0, lambda t: lin(t).relu(), lambda t: t.cos() * 2, (x,))
    return fn, (_x(4, 8),), [lin]


@case("while_loop")
def _while_loop():
    from torch._higher_order_ops.while_loop import while_loop

    def fn(x):
        i = torch.tensor(0)
        return while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t.sin() + 1), (i, x))[1]
    return fn, (_x(4, grad=False),), []


@case("associative_scan")
def _associative_scan():
    from torch._higher_order_ops.associative_scan import associative_scan

    def fn(x):
        return associative_scan(lambda a, b: a + b, x, dim=0, combine_mode="generic")
    return fn, (_x(6, 3, grad=False),), []


@case("flex_attention(score_mod)")
def _flex_score_mod():
    from torch.nn.attention.flex_attention import flex_attention

    def rel(score, b, h, q, kv):
        return score + (q - kv) * 0.1

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=rel)
    return fn, tuple(_x(1, 2, 16, 8, grad=False) for _ in range(3)), []  # no CPU backward


@case("flex_attention(block_mask)")
def _flex_block_mask():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def causal(b, h, q, kv):
        return q >= kv
    mask = create_block_mask(causal, 1, 1, 16, 16, device="cpu")

    def fn(q, k, v):
        return flex_attention(q, k, v, block_mask=mask)
    return fn, tuple(_x(1, 2, 16, 8, grad=False) for _ in range(3)), []  # no CPU backward


# --- hooks ------------------------------------------------------------------------------------

class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.head = Block(), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.inner(x))


@case("forward hook")
def _forward_hook():
    model = Outer()
    model.inner.register_forward_hook(lambda m, args, out: out * 2)
    return model, (_x(3, 8),), [model]


@case("forward pre-hook")
def _pre_hook():
    model = Outer()
    model.inner.register_forward_pre_hook(lambda m, args: (args[0].relu(),))
    return model, (_x(3, 8),), [model]


@case("tensor.register_hook (computed)")
def _tensor_hook():
    lin = nn.Linear(8, 8)

    def fn(x):
        h = lin(x)
        h.register_hook(lambda g: g * 3)
        return h.tanh()
    return fn, (_x(3, 8),), [lin]


@case("tensor.register_hook (input)")
def _input_hook():
    def fn(x):
        x.register_hook(lambda g: g * 3)
        return x.sin()
    return fn, (_x(3, 8),), []


@case("full backward hook")
def _backward_hook():
    model = Outer()
    model.inner.register_full_backward_hook(lambda m, gin, gout: (gin[0] * 2,))
    return model, (_x(3, 8),), [model]


# --- optimizers ------------------------------------------------------------------------------

def _optimizer_case(make, scheduler=None):
    def build():
        model = Block()
        model(torch.randn(4, 8)).pow(2).sum().backward()
        opt = make(model.parameters())
        opt.step()                        # the state exists before the compiled step
        sched = scheduler(opt) if scheduler else None

        def step():
            opt.step()
            if sched is not None:
                sched.step()
        return step, (), [model, opt]
    return build


case("optimizer SGD(momentum, nesterov)")(_optimizer_case(
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)))
case("optimizer Adam")(_optimizer_case(lambda p: torch.optim.Adam(p, lr=1e-2)))
case("optimizer AdamW(per-parameter)")(_optimizer_case(
    lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False)))
case("optimizer SGD + StepLR")(_optimizer_case(
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    lambda o: torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.5)))


# --- Python and library features --------------------------------------------------------------

@case("set_grad_enabled(flag)")
def _set_grad_enabled():
    lin = nn.Linear(8, 8)

    def fn(x, flag=False):
        with torch.set_grad_enabled(flag):
            h = lin(x)
        return h + lin(x)
    return fn, (_x(3, 8),), [lin]


@case("torch.compiler.disable")
def _compiler_disable():
    inner = torch.compiler.disable(lambda t: t * 2)

    def fn(x):
        return inner(x.sin()).cos()
    return fn, (_x(4),), []


@case("manual_seed + rand")
def _manual_seed():
    def fn(x):
        torch.manual_seed(3)
        return x + torch.rand(x.shape)
    return fn, (_x(4),), []


@case("itertools")
def _itertools():
    def fn(xs):
        pairs = sum(a * b for a, b in itertools.combinations(xs, 2))
        flat = list(itertools.chain.from_iterable([[t, t * 2] for t in xs]))
        return pairs + sum(flat)
    return fn, ([_x(3) for _ in range(3)],), []


@case("custom_op(mutates_args)")
def _custom_op():
    return _mutating_op_case()


@functools.cache
def _mutating_op():
    @torch.library.custom_op("tc_features::scale_", mutates_args={"out"})
    def scale_(x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(x * 2)

    @scale_.register_fake
    def _(x, out):
        return None
    return scale_


def _mutating_op_case():
    op = _mutating_op()

    def fn(x, buf):
        op(x, buf)
        return buf + 1
    return fn, (_x(4, grad=False), torch.zeros(4)), []


@case("tensor.numpy()")
def _numpy():
    def fn(x):
        a = x.numpy()
        return torch.from_numpy((a * 2 + 1).clip(0, 2))
    return fn, (_x(4, grad=False),), []


@case("record_function")
def _record_function():
    def fn(x):
        with torch.profiler.record_function("region"):
            y = x.sin()
        return y * 2
    return fn, (_x(4),), []


@case("DistributedDataParallel (1 process, gloo)")
def _ddp():
    import torch.distributed as dist
    if not dist.is_initialized():
        import os
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=0, world_size=1)
    model = nn.parallel.DistributedDataParallel(Outer())
    return model, (_x(3, 8),), [model]


# --- running ---------------------------------------------------------------------------------

def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, nn.Module):
        return list(value.parameters()) + list(value.buffers())
    if isinstance(value, torch.optim.Optimizer):
        return [t for group in value.param_groups for t in group["params"]] + [
            t for s in value.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return []


def _run(fn, args, state):
    """Call, then backward through the tensor results; what a user can observe after."""
    out = fn(*args)
    results = [t for t in _tensors(out) if t.is_floating_point()]
    grads = []
    diff = [t for t in results if t.requires_grad]
    if diff:
        leaves = [t for t in _tensors(args) + _tensors(state) if t.requires_grad]
        sum(t.sum() for t in diff).backward()
        grads = [t.grad for t in leaves]
    after = [t.detach().clone() for t in _tensors(state) + _tensors(args)]
    return [t.detach() for t in _tensors(out)], grads, after


def _close(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return False
        if x is not None and not (x.shape == y.shape and torch.allclose(
                x.double(), y.double(), rtol=1e-4, atol=1e-5, equal_nan=True)):
            return False
    return True


def _fresh(case: Case):
    torch.manual_seed(0)
    return case.build()


def _counts(explained) -> str:
    """Graphs and break reasons. (torch's ``graph_break_count`` is its graph count less one,
    so a break before any op -- an optimizer step's ``torch._dynamo.graph_break()`` --
    counts there as none; both are counted by their reasons here.)"""
    return f"{explained.graph_count}g/{len(explained.break_reasons)}b"


def measure(case: Case, torch_compile: bool = True) -> dict:
    row: dict = {"case": case.name}
    fn, args, state = _fresh(case)
    torch.manual_seed(1)                                # (as before each compiled run)
    ref = _run(fn, args, state)
    fn, args, _ = _fresh(case)
    try:
        explained = tc.explain(fn)(*args)
        row["tc"] = _counts(explained)
        row["why"] = explained.break_reasons[0].reason if explained.break_reasons else (
            explained.skipped_frames[0] if explained.skipped_frames else "")
    except Exception as e:                              # noqa: BLE001
        row["tc"], row["why"] = "error", f"{type(e).__name__}: {e}"
    fn, args, _ = _fresh(case)
    tc.reset()
    try:
        tc.compile(fn, backend="eager", fullgraph=True)(*args)
        row["fullgraph"] = "yes"
    except Exception:                                   # noqa: BLE001
        row["fullgraph"] = "no"
    for backend in BACKENDS:
        tc.reset()
        fn, args, state = _fresh(case)
        try:
            torch.manual_seed(1)
            got = _run(tc.compile(fn, backend=backend), args, state)
            ok = all(_close(g, r) for g, r in zip(got, ref))
            row[backend] = "right" if ok else "WRONG"
        except Exception as e:                          # noqa: BLE001
            row[backend] = f"raises {type(e).__name__}"
    if torch_compile:
        torch._dynamo.reset()
        fn, args, _ = _fresh(case)
        try:
            row["torch"] = _counts(torch._dynamo.explain(fn)(*args))
        except Exception as e:                          # noqa: BLE001
            row["torch"] = f"error {type(e).__name__}"
        torch._dynamo.reset()
        fn, args, _ = _fresh(case)
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(*args)
            row["torch full"] = "yes"
        except Exception:                               # noqa: BLE001
            row["torch full"] = "no"
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="", help="comma-separated name fragments")
    parser.add_argument("--no-torch-compile", action="store_true")
    opts = parser.parse_args(argv)
    wanted = [w for w in opts.cases.split(",") if w]
    chosen = [c for c in CASES if not wanted or any(w in c.name for w in wanted)]
    warnings.filterwarnings("ignore")
    rows = []
    header = f"{'case':38} {'tc':>7} {'full':>4} " + " ".join(f"{b:>10}" for b in BACKENDS)
    header += f" {'torch':>7} {'full':>4}" if not opts.no_torch_compile else ""
    print(header)
    for c in chosen:
        row = measure(c, not opts.no_torch_compile)
        rows.append(row)
        line = f"{c.name:38} {row['tc']:>7} {row['fullgraph']:>4} " + " ".join(
            f"{row[b][:10]:>10}" for b in BACKENDS)
        if not opts.no_torch_compile:
            line += f" {row['torch']:>7} {row['torch full']:>4}"
        print(line + (f"  -- {row['why'][:110]}" if row["why"] else ""), flush=True)
    n = len(rows)
    right = sum(all(r[b] == "right" for b in BACKENDS) for r in rows)
    summary = (f"\ntc: one graph {sum(r['tc'].startswith('1g') for r in rows)}/{n}, "
               f"fullgraph=True {sum(r['fullgraph'] == 'yes' for r in rows)}/{n}")
    if not opts.no_torch_compile:
        summary += (f"; torch.compile: one graph "
                    f"{sum(r['torch'].startswith('1g') for r in rows)}/{n}, fullgraph=True "
                    f"{sum(r['torch full'] == 'yes' for r in rows)}/{n}")
    print(summary + f"; tc right under all three backends: {right}/{n}")
    return rows


if __name__ == "__main__":
    main()
