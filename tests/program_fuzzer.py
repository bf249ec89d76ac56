"""Random PyTorch programs through the whole compiler, checked against eager.

Each seed makes one program: a straight line of PyTorch calls on two or three input tensors
of random, broadcast-compatible shapes -- pointwise math, reductions over random dims,
normalisations, views (transpose, slices, reshape, expand, flip), concatenation, matrix
products, gathers, cumulative sums, in-place updates of intermediates, dtype changes -- and
model-code idioms: bool and integer tensors mixed into float math, float64 round trips,
scatters, index_add/index_put_ and embeddings with indices computed from the data,
convolutions and pools whose weights are built from the inputs, interpolation, reflect and
replicate padding, group and batch norm in training, triangles, diagonals, unfold, bmm and
einsum, reductions over tuples of dims. Every
statement is tried eagerly while the program is built and kept only if PyTorch accepts it,
so every program is valid, and each one is printed as Python source (``Program.source``), so
a failure is a file anyone can run.

``check(program, backend)`` compiles it with ``tutorcompile.compile`` and compares, by
PyTorch's own rule (a float64 run as referee where float32 rounding differs, as
``torch._dynamo.utils.same`` does): the outputs of two calls (compile, then a cache hit with
fresh values), the inputs' gradients of a weighted sum of the outputs, and the outputs for
inputs with another leading size (where the program accepts one: that compiles for symbolic
sizes). It also counts graphs: a program of tensor calls alone should be one graph.

    python -m tests.program_fuzzer --seeds 0:200               # inductor, report failures
    python -m tests.program_fuzzer --seeds 17 --show           # one program's source
    python -m tests.program_fuzzer --seeds 0:50 --backend aot_eager

The unit tests (``tests/test_stage6_random_programs.py``) run a fixed handful of seeds.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F  # noqa: F401 -- the programs' namespace

TOL = 1e-4

# statement templates: {a}, {b} are earlier values; {d} a dim of {a}; {s} a small float.
UNARY = [
    "torch.sin({a})", "torch.cos({a})", "torch.exp({a}.clamp(max=4))", "torch.tanh({a})",
    "torch.sigmoid({a})", "torch.relu({a})", "{a}.abs()", "-{a}", "torch.sqrt({a}.abs() + 1)",
    "torch.log1p({a}.abs())", "F.gelu({a})", "F.silu({a})", "F.softplus({a})",
    "torch.erf({a})", "{a}.clamp(-0.5, 0.5)", "{a} ** 2", "1 / ({a}.abs() + 1)",
    "torch.rsqrt({a}.abs() + 1)", "{a} * {s}", "{a} + {s}", "F.leaky_relu({a}, 0.1)",
    "F.hardswish({a})", "torch.atan({a})", "torch.where({a} > 0, {a}, {a} * 0.5)",
    "F.elu({a})", "torch.floor({a}) + {a}",
]
BINARY = [
    "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / ({b}.abs() + 1)", "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})", "torch.where({a} > {b}, {a}, {b})", "torch.atan2({a}, {b})",
    "{a} * torch.sigmoid({b})", "torch.lerp({a}, {b}, 0.3)", "torch.addcmul({a}, {a}, {b})",
    "({a} > {b}).float() * {a}", "torch.hypot({a}, {b})",
]
REDUCE = [
    "{a}.sum({d}, keepdim=True)", "{a}.sum({d})", "{a}.mean({d}, keepdim=True)",
    "{a}.amax({d}, keepdim=True)", "{a}.amin({d})", "{a}.var({d}, keepdim=True)",
    "{a}.std({d})", "torch.logsumexp({a}, {d}, keepdim=True)", "{a}.softmax({d})",
    "{a}.log_softmax({d})", "{a}.norm(dim={d}, keepdim=True)", "{a}.cumsum({d})",
    "{a}.sum()", "{a}.mean()", "{a}.max({d}).values", "{a}.prod({d}, keepdim=True)",
    "F.normalize({a}, dim={d})", "{a}.cummax({d}).values", "torch.sort({a}, {d}).values",
]
SHAPE = [
    "{a}.transpose(0, {d})", "{a}.flip({d})", "{a}.unsqueeze({d})", "{a}.reshape(-1)",
    "{a}.flatten(1)", "{a}[1:]", "{a}[..., ::2]", "{a}.narrow({d}, 0, 1)",
    "{a}.squeeze()", "{a}.contiguous()", "{a}.expand(2, *{a}.shape)", "{a}.t()",
    "{a}.roll(1, {d})", "{a}.permute(*reversed(range({a}.dim())))", "{a}[:, None]",
    "{a}.repeat(2, *([1] * ({a}.dim() - 1)))", "{a}.unflatten(-1, ({a}.shape[-1], 1))",
]
COMBINE = [
    "torch.cat([{a}, {b}], {d})", "torch.stack([{a}, {b}], {d})", "{a} @ {b}",
    "{a} @ {b}.transpose(-1, -2)", "F.layer_norm({a}, {a}.shape[-1:])",
    "torch.gather({a}, {d}, {a}.argsort({d}))", "{a}.index_select({d}, torch.tensor([0]))",
    "F.linear({a}, {b})", "torch.einsum('...i,...i->...', {a}, {b})",
    "torch.nn.functional.pad({a}, (1, 1))", "{a}.masked_fill({a} > 0.5, 0.0)",
    "{a}[{a}.argmax({d}, keepdim=True).clamp(max=0)]",
]
INPLACE = [
    "{v} = {a}.clone(); {v}.mul_(2).add_({b})", "{v} = {a}.clone(); {v}[..., 0] = 1.0",
    "{v} = {a}.clone(); {v}.clamp_(min=0)", "{v} = {a} * 1; {v}.sub_({b}.mean())",
    "{v} = {a}.clone(); {v}[0].zero_()",
]
# model-code idioms: integer and bool tensors mixed in, indices derived from data, float64
# round trips (cast back with .to(dtype): the referee runs the program in float64),
# convolutions and pools whose weights come from the inputs, norms in training
MIXED = [
    "({a} > 0).long() * 3 + {a}", "torch.where({a} > 0, {a}, 0)",
    "{a}.masked_fill({a} < {b}, -1.0)", "({a} > {b}).sum({d}, keepdim=True) * {a}",
    "({a} > 0).sum() + {a}", "{a} * ({a}.argmax({d}, keepdim=True) == 0)",
    "{a}.double().sin().to({a}.dtype)", "({a}.double() * {b}.double()).exp().log().to({a}.dtype)",
    "torch.cumprod({a} / ({a}.abs() + 1), {d})", "torch.cumsum({a}, {d}, dtype=torch.float64)"
    ".to({a}.dtype)", "torch.logcumsumexp({a}, {d})",
    "torch.clamp({a}, {b} - 1, {b} + 1)", "torch.clamp({a}, min={b})",
    "torch.diff({a}, dim={d})", "torch.diff({a}, n=2, dim=-1)",
    "{a}.sum(dim=(0, -1))", "{a}.mean(dim=(0, -1), keepdim=True)",
    "{a}.amax(dim=(0, -1))", "{a}.sum({d}).mean(0)", "{a}.max(-1).values.sum(0)",
    "{a}.count_nonzero({d}).to({a}.dtype) + 1", "({a} > 0).to({a}.dtype).mean({d})",
]
INDEXED = [
    # (stable sorts where ties would move values: an unstable sort may order ties either
    # way, eager's CPU sort one way and ours, by rank, the other)
    "torch.zeros_like({a}).scatter_add({d}, {a}.argsort(stable=True, dim={d}), {a})",
    "torch.zeros_like({a}).scatter_add(-1, {a}.argsort(stable=True), {b}.expand_as({a}))",
    "{a}.index_add(0, {a}[:, 0].argsort(stable=True) if {a}.dim() > 1 else "
    "{a}.argsort(stable=True), {a} * 2)",
    "{a}.index_add({d}, torch.arange({a}.shape[{d}]).flip(0), {a})",
    "{v} = {a}.clone(); {v}.index_put_(({a}.argmax(0),), {a}[0] * 2)",
    "{v} = {a}.clone(); {v}[{a} > 0] = 0.0",
    "{v} = {a}.clone(); {v}.index_put_(({a}.flatten().argsort(stable=True)[:2] % {a}.shape[0],), "
    "{a}[0] + 1, accumulate=True)",
    "F.embedding({a}.argmax(-1) % 4, "
    "{b}.reshape(-1)[:1].expand(4, 3) * torch.arange(3.0, dtype={b}.dtype))",
    "F.embedding({a}.argmax(-1), {a}.reshape(-1, {a}.shape[-1])[:{a}.shape[-1]])",
    "{a}.gather(-1, {a}.argmin(-1, keepdim=True))",
    "torch.take_along_dim({a}, {a}.argsort({d}), {d})",
]
LAYERS = [
    "F.conv1d({a}, {a}[:1, :, :2].expand(2, -1, -1).contiguous())",
    "F.conv1d({a}, {b}.reshape(-1)[:1].reshape(1, 1, 1).expand(3, {a}.shape[1], 2),"
    " padding=1)",
    "F.conv2d({a}, {a}[:1, :, :2, :2].contiguous(), padding=1)",
    "F.conv2d({a}, {a}[:2, :, :1, :1].contiguous(), stride=2)",
    "F.max_pool1d({a}, 2)", "F.avg_pool1d({a}, 2, 1)", "F.max_pool1d({a}, 3, 1, 1)",
    "F.interpolate({a}, scale_factor=2, mode='linear')",
    "F.interpolate({a}, size=5, mode='nearest')",
    "F.interpolate({a}, scale_factor=2, mode='linear', align_corners=True)",
    "F.pad({a}, (1, 1), mode='reflect')", "F.pad({a}, (2, 1), mode='replicate')",
    "F.pad({a}, (1, 1, 1, 0), mode='reflect')",
    "F.group_norm({a}, 1)", "F.group_norm({a}, {a}.shape[1])",
    "F.batch_norm({a}, {a}.mean(0).detach().flatten()[:{a}.shape[1]].clone() * 0, "
    "torch.ones({a}.shape[1], dtype={a}.dtype), training=True)",
    "F.batch_norm({a}, torch.zeros({a}.shape[1], dtype={a}.dtype), "
    "torch.ones({a}.shape[1], dtype={a}.dtype), "
    # (a weight of stride 0 is cloned: eager's CPU batch-norm backward reads one wrongly,
    # x's gradient NaN or garbage, where ours is right -- PyTorch 2.13)
    "{b}.flatten()[:1].expand({a}.shape[1]).clone(), None, training=True)",
    "torch.tril({a})", "torch.triu({a}, 1)", "torch.tril({a}, -1) + {a}.t().triu()",
    "{a}.diagonal()", "{a}.diagonal(0, 0, -1)", "torch.diagonal({a}, 1, -2, -1)",
    "{a}.unfold({d}, 2, 1)", "{a}.unfold(-1, 2, 2).sum(-1)",
    "torch.bmm({a}, {a}.transpose(1, 2))", "torch.bmm({a}.transpose(1, 2), {b})",
    "torch.einsum('bij,bjk->bik', {a}, {a}.transpose(1, 2))",
    "torch.einsum('ij,kj->ik', {a}, {b})", "torch.einsum('ii->i', {a})",
    "torch.einsum('...ij->...j', {a})", "torch.einsum('i,j->ij', {a}, {b})",
]
# the first fuzzer's kinds: the seeds in tests/test_stage6_random_programs.py were drawn from
# these, and keep their programs only while this list (and its order) stays as it is
BASIC_KINDS = [(UNARY, 5), (BINARY, 4), (REDUCE, 3), (SHAPE, 3), (COMBINE, 2), (INPLACE, 1)]
KINDS = BASIC_KINDS + [(MIXED, 3), (INDEXED, 2), (LAYERS, 3)]


@dataclass
class Program:
    seed: int
    shapes: list[tuple[int, ...]]
    lines: list[str]
    outputs: list[str]
    dynamic_shapes: list[tuple[int, ...]] | None = None   # inputs of another leading size

    @property
    def source(self) -> str:
        args = ", ".join(f"x{i}" for i in range(len(self.shapes)))
        body = "\n".join(f"    {line}" for line in self.lines)
        return (f"def program({args}):\n{body}\n    return ({', '.join(self.outputs)},)\n")

    def function(self):
        namespace: dict[str, Any] = {"torch": torch, "F": torch.nn.functional}
        exec(compile(self.source, f"<random program {self.seed}>", "exec"), namespace)
        return namespace["program"]

    def inputs(self, seed: int, shapes=None, dtype=torch.float32) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(s, generator=g, dtype=torch.float64).to(dtype)
                for s in (shapes or self.shapes)]


def make_program(seed: int, statements: int = 10, kinds=None) -> Program:
    """A valid random program (each statement tried eagerly as it is chosen), drawn from
    ``kinds`` (``KINDS`` unless given; ``BASIC_KINDS`` remakes the first fuzzer's programs)."""
    kinds = KINDS if kinds is None else kinds
    rng = random.Random(seed)
    rank = rng.choice([1, 2, 2, 3, 3, 4])
    shape = tuple(rng.choice([1, 2, 3, 4, 5, 8, 16, 17]) for _ in range(rank))
    shapes = [shape]
    for _ in range(rng.choice([1, 2])):   # a second/third input that broadcasts against it
        trailing = shape[rng.randint(0, rank - 1):]
        shapes.append(tuple(1 if rng.random() < 0.3 else s for s in trailing))
    values = {f"x{i}": t for i, t in
              enumerate(Program(seed, shapes, [], []).inputs(seed))}
    names = list(values)
    lines: list[str] = []
    namespace: dict[str, Any] = {"torch": torch, "F": torch.nn.functional}
    attempts = 0
    while len(lines) < statements and attempts < statements * 20:
        attempts += 1
        templates = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        template = rng.choice(templates)
        a = rng.choice(names[-4:] if rng.random() < 0.7 else names)
        b = rng.choice(names)
        v = f"v{len(lines)}"
        dim = rng.randint(-values[a].dim(), max(values[a].dim() - 1, 0)) \
            if values[a].dim() else 0
        text = template.format(a=a, b=b, d=dim, s=round(rng.uniform(-2, 2), 2), v=v)
        line = text if text.startswith(f"{v} = ") else f"{v} = {text}"
        scope = dict(namespace, **values)
        try:
            exec(line, scope)
        except Exception:   # noqa: BLE001 -- PyTorch refuses it for these shapes: pick again
            continue
        out = scope[v]
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or \
                out.numel() == 0 or out.numel() > 4096 or not torch.isfinite(out).all():
            continue
        values[v] = out
        names.append(v)
        lines.append(line)
    produced = [n for n in names if n.startswith("v")]
    outputs = produced[-2:] + [f"{n}.sum()" for n in produced[:-2][-3:]]
    program = Program(seed, shapes, lines, outputs or ["x0"])
    other = [(s[0] + 3,) + s[1:] if len(s) == len(shape) and s[0] != 1 else s for s in shapes]
    if other != shapes:
        try:
            program.function()(*program.inputs(seed, other))
            program.dynamic_shapes = other
        except Exception:   # noqa: BLE001 -- the program fixes its leading size
            pass
    return program


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()


def same(res: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor) -> bool:
    """``torch._dynamo.utils.same``'s rule: close to eager float32, or no further from the
    float64 referee than twice eager float32 is (plus TOL / 10)."""
    if res.shape != ref.shape or res.dtype != ref.dtype:
        return False
    if torch.allclose(res, ref, rtol=TOL, atol=TOL, equal_nan=True):
        return True
    res_error, ref_error = _rmse(ref64, res), _rmse(ref64, ref)
    multiplier = 3.0 if res.numel() <= 10 else 2.0
    return not math.isnan(res_error) and res_error <= multiplier * ref_error + TOL / 10


@dataclass
class Result:
    seed: int
    problems: list[str] = field(default_factory=list)
    graphs: int = 0
    breaks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _run(fn, inputs, grad: bool):
    inputs = [x.detach().requires_grad_(grad) for x in inputs]
    outs = fn(*inputs)
    grads = None
    if grad:
        g = torch.Generator().manual_seed(1)
        weights = [torch.randn(o.shape, generator=g, dtype=torch.float64) for o in outs]
        # an output computed through integers (count_nonzero, argmax) has no gradient
        terms = [(o.double() * w).sum() for o, w in zip(outs, weights) if o.requires_grad]
        grads = torch.autograd.grad(sum(terms), inputs, allow_unused=True) if terms else \
            [None] * len(inputs)
        grads = [torch.zeros_like(x) if gr is None else gr for x, gr in zip(inputs, grads)]
    return [o.detach() for o in outs], grads


def check(program: Program, backend: str = "inductor") -> Result:
    """Compile ``program`` with tutorcompile and compare it with eager (see the docstring)."""
    import tutorcompile as tc
    result = Result(program.seed)
    fn = program.function()
    tc.reset()
    explain = tc.explain(fn, backend="eager")(*program.inputs(program.seed))
    result.graphs = explain.graph_count
    result.breaks = [str(r.reason).splitlines()[0] for r in explain.break_reasons]
    compiled = tc.compile(fn, backend=backend)
    cases = [("first call", program.seed, None), ("cache hit", program.seed + 1, None)]
    if program.dynamic_shapes:
        cases += [("another leading size", program.seed + 2, program.dynamic_shapes)]
    for what, seed, shapes in cases:
        for grad in (False, True):
            try:
                want, want_grads = _run(fn, program.inputs(seed, shapes), grad)
            except Exception:   # noqa: BLE001 -- not a program for these values
                # statements are tried on the first inputs only: other values can make one
                # invalid (an index out of range), and eager raises where the compiled
                # program, which dropped the statement if its result is unused, need not
                continue
            try:
                got, got_grads = _run(compiled, program.inputs(seed, shapes), grad)
            except Exception as e:   # noqa: BLE001 -- a crash is a finding
                result.problems.append(f"{what} ({'training' if grad else 'inference'}): "
                                       f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
                continue
            want64, want64_grads = _run(fn, program.inputs(seed, shapes, torch.float64), grad)
            pairs = list(zip(got, want, want64))
            if grad:
                pairs += list(zip(got_grads, want_grads, want64_grads))
            for i, (g_, w, w64) in enumerate(pairs):
                if not same(g_, w, w64):
                    kind = "output" if i < len(got) else "gradient of x"
                    k = i if i < len(got) else i - len(got)
                    err = (g_.double() - w.double()).abs().max().item() \
                        if g_.shape == w.shape else float("nan")
                    result.problems.append(f"{what}: {kind} {k} differs "
                                           f"(max |diff| {err:.3g}; shape {tuple(g_.shape)} "
                                           f"vs {tuple(w.shape)})")
    return result


def seed_range(text: str) -> range:
    """The seeds ``--seeds`` names: ``N``, or ``A:B`` (a range)."""
    if ":" in text:
        start, stop = map(int, text.split(":"))
        return range(start, stop)
    return range(int(text), int(text) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:50", help="N, or A:B (a range)")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--statements", type=int, default=10)
    parser.add_argument("--show", action="store_true", help="print each program's source")
    parser.add_argument("--basic", action="store_true",
                        help="the first fuzzer's templates only (BASIC_KINDS)")
    args = parser.parse_args(argv)
    seeds = seed_range(args.seeds)
    failures, one_graph, breaks = 0, 0, {}
    for seed in seeds:
        program = make_program(seed, args.statements, BASIC_KINDS if args.basic else None)
        if args.show:
            print(program.source)
        try:
            result = check(program, args.backend)
        except Exception:   # noqa: BLE001 -- the checker itself failed: show it
            failures += 1
            print(f"seed {seed}: the check raised\n{traceback.format_exc()}\n{program.source}")
            continue
        one_graph += result.graphs == 1 and not result.breaks
        if result.graphs != 1 and not result.breaks:
            breaks.setdefault(f"{result.graphs} graphs, no break reason", []).append(seed)
        for reason in result.breaks:
            breaks.setdefault(reason, []).append(seed)
        if not result.ok:
            failures += 1
            print(f"seed {seed}: " + "\n  ".join(result.problems) + "\n" + program.source,
                  flush=True)
    print(f"{len(seeds)} programs, backend {args.backend}: {failures} failing, "
          f"{one_graph} one graph")
    for reason, where in sorted(breaks.items(), key=lambda kv: -len(kv[1])):
        print(f"  break x{len(where)}: {reason}  (seeds {where[:5]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
