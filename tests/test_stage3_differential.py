"""Our Dynamo against torch._dynamo on ~50 functions and modules.

For each case: the compiled output must equal eager PyTorch (rtol/atol 1e-5), and the graph
count and graph-break count must equal ``torch._dynamo.explain``'s -- except for the cases
listed in ``KNOWN_DIFFERENCES`` where the designs legitimately differ (each with its reason).
``python tests/test_stage3_differential.py`` prints the comparison table.
"""

from __future__ import annotations

import functools
import math
import zlib
from types import SimpleNamespace

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from tutorcompile.dynamo import eval_frame
from tutorcompile.dynamo.debugging import explain

# These tests check capture, guards and breaks: the eager backend runs each captured
# graph as it is (tutorcompile.compile's default backend, 'inductor', adds AOT and codegen).
compile_eager = functools.partial(eval_frame.compile, backend="eager")

pytestmark = pytest.mark.stage3

W = torch.randn(4)
SCALE = 3.0
CFG = SimpleNamespace(alpha=0.5, act="relu")
OUTSIDE: list = []


def _rand(*shape):
    return torch.randn(*shape)


# --- the cases -----------------------------------------------------------------------------
def plain_ops(x, y):
    return torch.sin(x) + torch.cos(y) * 2


def method_chain(x):
    return x.relu().sum(1).softmax(0)


def functional(x):
    return F.layer_norm(F.gelu(x), (x.shape[-1],))


def const_branch(x, flag=True):
    if flag:
        return x + 1
    return x - 1


def const_branch_false(x):
    return const_branch(x, flag=False)


def unrolled_loop(x):
    for i in range(3):
        x = x * 2 + i
    return x


def loop_over_list(xs):
    acc = torch.zeros_like(xs[0])
    for t in xs:
        acc = acc + t
    return acc


def dict_input(d):
    return d["a"] * d["b"]


def list_comp(x):
    return sum([x * i for i in range(4)])


def make_scaler(k):
    def scale(t):
        return t * k
    return scale


_scale3 = make_scaler(3.0)


def closure_call(x):
    return _scale3(x) + 1


def helper(t):
    return torch.tanh(t) * 2


def inlined_helper(x):
    return helper(x) + helper(x * 2)


def kw_only(x, *, alpha=2.0):
    return x * alpha


def call_kw_only(x):
    return kw_only(x, alpha=0.5) + kw_only(x)


def star_args(*xs):
    return torch.stack(xs).sum(0)


def star_kwargs(x, **kw):
    return x * kw["a"] + kw["b"]


def call_star_kwargs(x):
    return star_kwargs(x, a=2, b=3)


def tuple_unpack(x):
    a, b = x.chunk(2, dim=0)
    return b, a


def shape_branch(x):
    if x.shape[0] > 2:
        return x.sum(0)
    return x.mean(0)


def view_with_size(x):
    return x.view(x.size(0), -1).relu()


def slicing(x):
    return x[:, 1:3] * x[0, :2]


def setitem_new(x):
    y = x.clone()
    y[0] = 0
    return y


def dtype_branch(x):
    if x.dtype == torch.float32:
        return x.double()
    return x


def isinstance_check(x):
    if isinstance(x, torch.Tensor):
        return x + 1
    return x


def global_tensor(x):
    return x + W


def global_const(x):
    return x * SCALE


def config_object(x):
    if CFG.act == "relu":
        return torch.relu(x) * CFG.alpha
    return x


def builtins_on_ints(x):
    n = max(x.shape[0], 2) + min(3, len(x.shape))
    return x * n


def enumerate_zip(xs, ys):
    out = []
    for i, (a, b) in enumerate(zip(xs, ys)):
        out.append(a * i + b)
    return torch.cat(out)


def max_with_dim(x):
    return torch.max(x, dim=1).values + x.max(dim=0)[0].sum()


def split_tuple(x):
    parts = torch.split(x, 2, dim=1)
    return parts[0] + parts[1]


def inplace_on_input(x):
    x.add_(1)
    return x * 2


def factories(x):
    return x + torch.ones_like(x) + torch.zeros(x.shape[-1])


def matmul_where(x, y):
    z = x @ y.t()
    return torch.where(z > 0, z, -z)


def lambda_call(x):
    f = lambda t: t * 2  # noqa: E731
    return f(x) + 1


def returns_constant(x):
    return x * 2, 3, "name"


def fstring_const(x):
    name = f"layer_{2}"
    return x + len(name)


def print_break(x):
    y = x * 2
    print("value")
    return y + 1


def item_break(x):
    s = x.sum().item()
    return x * s


def tolist_break(x):
    values = x.tolist()
    return x * len(values)


def data_dependent_if(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


def c_function_break(x):
    crc = zlib.crc32(b"tutorcompile")
    return x + crc % 7


def mutate_outside(x):
    OUTSIDE.append(1)
    return x * 2


def two_breaks(x):
    a = x + 1
    print("one")
    b = a * 2
    print("two")
    return b - 1


def callee_breaks(x):
    return noisy_helper(x) * 3


def noisy_helper(t):
    t = t + 1
    print("inside helper")
    return t * 2


def break_in_loop(x):
    for i in range(3):
        x = x + i
        print(i)
    return x


def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


def math_on_constants(x):
    return x * math.sqrt(4.0) + math.pi


def nested_containers(x):
    d = {"ts": [x, x * 2], "k": (1, 2)}
    return d["ts"][1] + d["k"][0]


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 3))

    def forward(self, x):
        return self.net(x).softmax(-1)


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
        self.scale = 0.5

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x) * self.scale
        return x


class ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class ModuleWithBreak(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 100:
            return h
        return h.relu()


class DictModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(4, 2), "b": torch.nn.Linear(4, 2)})

    def forward(self, x):
        return {k: head(x) for k, head in self.heads.items()}


def _eval(m):
    torch.manual_seed(0)
    return m.eval()


CASES = {
    "plain_ops": (plain_ops, lambda: (_rand(3, 4), _rand(3, 4))),
    "method_chain": (method_chain, lambda: (_rand(3, 4),)),
    "functional": (functional, lambda: (_rand(2, 5),)),
    "const_branch": (const_branch, lambda: (_rand(3),)),
    "const_branch_false": (const_branch_false, lambda: (_rand(3),)),
    "unrolled_loop": (unrolled_loop, lambda: (_rand(3),)),
    "loop_over_list": (loop_over_list, lambda: ([_rand(2), _rand(2), _rand(2)],)),
    "dict_input": (dict_input, lambda: ({"a": _rand(3), "b": _rand(3)},)),
    "list_comp": (list_comp, lambda: (_rand(3),)),
    "closure_call": (closure_call, lambda: (_rand(3),)),
    "inlined_helper": (inlined_helper, lambda: (_rand(3),)),
    "call_kw_only": (call_kw_only, lambda: (_rand(3),)),
    "star_args": (star_args, lambda: (_rand(3), _rand(3), _rand(3))),
    "call_star_kwargs": (call_star_kwargs, lambda: (_rand(3),)),
    "tuple_unpack": (tuple_unpack, lambda: (_rand(4, 2),)),
    "shape_branch": (shape_branch, lambda: (_rand(3, 2),)),
    "view_with_size": (view_with_size, lambda: (_rand(2, 3, 4),)),
    "slicing": (slicing, lambda: (_rand(4, 5),)),
    "setitem_new": (setitem_new, lambda: (_rand(3, 2),)),
    "dtype_branch": (dtype_branch, lambda: (_rand(3),)),
    "isinstance_check": (isinstance_check, lambda: (_rand(3),)),
    "global_tensor": (global_tensor, lambda: (_rand(4),)),
    "global_const": (global_const, lambda: (_rand(4),)),
    "config_object": (config_object, lambda: (_rand(4),)),
    "builtins_on_ints": (builtins_on_ints, lambda: (_rand(3, 2),)),
    "enumerate_zip": (enumerate_zip, lambda: ([_rand(2), _rand(2)], [_rand(2), _rand(2)])),
    "max_with_dim": (max_with_dim, lambda: (_rand(3, 4),)),
    "split_tuple": (split_tuple, lambda: (_rand(3, 4),)),
    "inplace_on_input": (inplace_on_input, lambda: (_rand(3),)),
    "factories": (factories, lambda: (_rand(2, 3),)),
    "matmul_where": (matmul_where, lambda: (_rand(3, 4), _rand(5, 4))),
    "lambda_call": (lambda_call, lambda: (_rand(3),)),
    "returns_constant": (returns_constant, lambda: (_rand(3),)),
    "fstring_const": (fstring_const, lambda: (_rand(3),)),
    "math_on_constants": (math_on_constants, lambda: (_rand(3),)),
    "nested_containers": (nested_containers, lambda: (_rand(3),)),
    "print_break": (print_break, lambda: (_rand(3),)),
    "item_break": (item_break, lambda: (_rand(3),)),
    "tolist_break": (tolist_break, lambda: (_rand(3),)),
    "data_dependent_if": (data_dependent_if, lambda: (_rand(3),)),
    "c_function_break": (c_function_break, lambda: (_rand(3),)),
    "mutate_outside": (mutate_outside, lambda: (_rand(3),)),
    "two_breaks": (two_breaks, lambda: (_rand(3),)),
    "callee_breaks": (callee_breaks, lambda: (_rand(3),)),
    "break_in_loop": (break_in_loop, lambda: (_rand(3),)),
    "no_grad_block": (no_grad_block, lambda: (_rand(3),)),
    "mlp_module": (_eval(MLP()), lambda: (_rand(2, 4),)),
    "modulelist_loop": (_eval(Blocks()), lambda: (_rand(2, 4),)),
    "conv_bn_relu": (_eval(ConvBN()), lambda: (_rand(1, 3, 5, 5),)),
    "conv_bn_train": (ConvBN(), lambda: (_rand(2, 3, 5, 5),)),
    "module_with_break": (_eval(ModuleWithBreak()), lambda: (_rand(2, 4),)),
    "module_dict": (_eval(DictModule()), lambda: (_rand(2, 4),)),
}

# Where our design and torch._dynamo legitimately disagree on graph/break counts.
KNOWN_DIFFERENCES = {
    "mutate_outside": "Dynamo replays list mutations after the graph (side effects); we break",
    "no_grad_block": "Dynamo traces `with torch.no_grad()` into the graph; we break at the "
                     "with-block's entry and exit",
    "c_function_break": "as tolist_break: torch._dynamo cannot trace zlib.crc32 either (it "
                        "warns) but does not count a break before any op was captured",
    "tolist_break": "same graphs; the break comes before any op, and torch._dynamo does not "
                    "count a break whose graph would be empty (we count every break)",
    "break_in_loop": "both skip the frame (no graph); torch._dynamo.explain reports -1 breaks",
}


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_clone(x) for x in v)
    if isinstance(v, dict):
        return {k: _clone(x) for k, x in v.items()}
    return v


def _assert_close(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_close(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_close(a[k], b[k])
    else:
        assert a == b


def run_case(name: str):
    fn, make_inputs = CASES[name]
    torch.manual_seed(0)
    inputs = make_inputs()
    expected = fn(*_clone(inputs))
    state = None
    if isinstance(fn, torch.nn.Module):
        state = {k: v.clone() for k, v in fn.state_dict().items()}
    ours = explain(fn)(*_clone(inputs))
    if state is not None:
        fn.load_state_dict(state)
    got = compile_eager(fn)(*_clone(inputs))
    if state is not None:
        fn.load_state_dict(state)
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(fn)(*_clone(inputs))
    if state is not None:
        fn.load_state_dict(state)
    torch._dynamo.reset()
    return expected, got, ours, theirs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_eager_and_dynamo(name, capsys):
    eval_frame.reset()
    expected, got, ours, theirs = run_case(name)
    _assert_close(got, expected)
    counts = (ours.graph_count, ours.graph_break_count)
    theirs_counts = (theirs.graph_count, theirs.graph_break_count)
    if name in KNOWN_DIFFERENCES:
        return
    assert counts == theirs_counts, (
        f"{name}: ours (graphs, breaks) = {counts}, torch._dynamo = {theirs_counts}\n{ours}")


def test_enough_cases():
    assert len(CASES) >= 40
    assert len(KNOWN_DIFFERENCES) <= len(CASES) // 5


def main():  # pragma: no cover - prints the table for the report
    rows = []
    for name in CASES:
        eval_frame.reset()
        try:
            expected, got, ours, theirs = run_case(name)
            try:
                _assert_close(got, expected)
                ok = "ok"
            except AssertionError:
                ok = "WRONG"
            a = (ours.graph_count, ours.graph_break_count)
            b = (theirs.graph_count, theirs.graph_break_count)
            verdict = "match" if a == b else "differs"
            rows.append((name, ok, a, b, verdict, KNOWN_DIFFERENCES.get(name, "")))
        except Exception as e:
            rows.append((name, "ERROR", "-", "-", f"{type(e).__name__}: {e}"[:60], ""))
    print("| case | output | ours (graphs, breaks) | torch._dynamo | verdict | note |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":  # pragma: no cover
    main()
