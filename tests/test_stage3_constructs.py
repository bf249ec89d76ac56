"""Stage 3: the everyday Python that real model code uses, captured whole.

Every function here is captured by ``torch.compile`` as one graph with no break; we compile
each with ``fullgraph=True`` (a break would raise) and compare with eager. ``tensor.item()``
is the exception on both sides: a break with a reason.
"""

import collections
import collections.abc
import copy
import dataclasses
import functools
import importlib.util
import itertools
import math
import operator
import types
import typing

import numpy as np
import pytest
import torch

import tutorcompile as tc
from tutorcompile.dynamo import eval_frame

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]


Pair = collections.namedtuple("Pair", "a b")

@dataclasses.dataclass
class Cfg:
    scale: float = 2.0
    shift: float = 1.0

@functools.lru_cache(maxsize=8)
def heads(n):
    return n // 2

class Base(torch.nn.Module):
    def forward(self, x):
        return x + 1
class Child(Base):
    def forward(self, x):
        return super().forward(x) * 2

class Holder:
    pass

def set_ops(x):
    s = {1, 2, 3}
    t = {2, 3, 4}
    return x * len(s | t) + len(s & t) - len(s - t) + (2 in s)
def dict_views(x):
    d = {"a": 1, "b": 2}
    return x * sum(d.values()) + len(list(d.keys())) + sum(v for _, v in d.items())
def ordered_default(x):
    o = collections.OrderedDict(a=x)
    d = collections.defaultdict(list)
    d["k"].append(x)
    return o["a"] + d["k"][0]
def named_tuple(x):
    p = Pair(x, 2)
    q = p._replace(b=5)
    return p.a * p.b + p[0] + q.b * q._asdict()["a"]
def dataclass_use(x):
    c = Cfg(scale=3.0)
    c2 = dataclasses.replace(c, shift=5.0)
    return x * c.scale + c2.shift
def partial_use(x):
    f = functools.partial(torch.add, alpha=2)
    return f(x, x)
def lru_use(x):
    return x * heads(8)
def reduce_use(x):
    return functools.reduce(operator.add, [x, x, x])
def itertools_use(x):
    a = list(itertools.chain([1, 2], [3]))
    b = list(itertools.product([1, 2], [3]))
    c = list(itertools.zip_longest([1, 2], [3], fillvalue=0))
    d = list(itertools.accumulate([1, 2, 3]))
    e = list(itertools.islice(range(10), 2, 5))
    return x * (sum(a) + len(b) + sum(p + q for p, q in c) + d[-1] + sum(e))
def sorted_key(x):
    xs = sorted([3, 1, 2], key=lambda v: -v)
    return x * xs[0] + max([1, 5, 2], key=lambda v: -v) + min(["aa", "b"], key=len).count("b")
def map_filter(x):
    ys = list(map(lambda v: v * 2, [1, 2, 3]))
    zs = list(filter(lambda v: v > 2, ys))
    return x * sum(zs) + sum(i * v for i, v in enumerate(reversed(ys)))
def deque_use(x):
    q = collections.deque([1, 2])
    q.append(3)
    q.appendleft(0)
    return x * (q.popleft() + q.pop() + len(q))
def fromkeys(x):
    d = dict.fromkeys(["a", "b"], 1)
    return x * sum(d.values())
def import_inside(x):
    import math as m

    from torch.nn import functional as F
    return F.relu(x) * m.pi
def attr_assign(x, h):
    h.value = x * 2
    h.count = 3
    return h.value + 1
def torch_misc(x):
    s = torch.Size([2, 3])
    return x * s.numel() + torch.finfo(torch.float32).eps + torch.iinfo(torch.int8).max + \
        (x.device == torch.device("cpu")) + (x.dtype is torch.float32) + math.sqrt(16)
def grad_ctx(x):
    with torch.no_grad():
        y = x * 2
    with torch.enable_grad():
        z = x + 1
    return y + z
def abc_isinstance(x):
    return x * (isinstance([1], collections.abc.Sequence) + isinstance({}, typing.Mapping))
def super_call(x, m):
    return m(x)
def kwargs_fwd(x):
    def inner(a, *, scale=1, **kw):
        return a * scale + kw.get("shift", 0)
    def outer(a, **kwargs):
        return inner(a, **kwargs)
    return outer(x, scale=2, shift=3)
def gen_comp(x):
    rows = [r * 2 for r in x]
    g = sum(r for r in rows)
    return g + torch.stack([v for v in rows if True])
def numpy_on_numbers(x):  # CTRL: inputs_embeds *= np.sqrt(self.d_model_size)
    return x / np.sqrt(x.shape[-1]) * np.exp(0.5)
def item_break(x):
    return x * x.sum().item()
def module_getattr(x, m):
    return m.missing_attr(x)
class WithGetattr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Identity()
    def __getattr__(self, name):
        if name == "missing_attr":
            return lambda t: t * 3
        return super().__getattr__(name)



CASES = [
    (set_ops, ()), (dict_views, ()), (ordered_default, ()), (named_tuple, ()),
    (dataclass_use, ()), (partial_use, ()), (lru_use, ()), (reduce_use, ()),
    (itertools_use, ()), (sorted_key, ()), (map_filter, ()), (deque_use, ()), (fromkeys, ()),
    (import_inside, ()), (attr_assign, (Holder,)), (torch_misc, ()), (grad_ctx, ()),
    (abc_isinstance, ()), (super_call, (Child,)), (kwargs_fwd, ()), (gen_comp, ()),
    (module_getattr, (WithGetattr,)), (numpy_on_numbers, ()),
]


@pytest.mark.parametrize("fn, makers", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_captured_whole_and_matches_eager(fn, makers):
    x = torch.randn(3)
    extra = [make() for make in makers]
    got = tc.compile(fn, backend="eager", fullgraph=True)(x, *extra)
    torch.testing.assert_close(got, fn(x, *[make() for make in makers]))


def test_item_is_a_break_with_a_reason():
    out = tc.explain(item_break)(torch.randn(3))
    assert (out.graph_count, out.graph_break_count) == (2, 1)
    assert "tensor.item()" in out.break_reasons[0].reason
    assert out.break_reasons[0].lineno is not None


def test_a_folded_numpy_ufunc_is_guarded_by_identity():
    import types
    ns = types.SimpleNamespace(op=np.sqrt)
    def f(x):
        return x * ns.op(4.0)
    compiled, x = tc.compile(f, backend="eager", fullgraph=True), torch.ones(2)
    torch.testing.assert_close(compiled(x), f(x))
    ns.op = np.exp  # another ufunc of the same type: the folded 2.0 no longer holds
    torch.testing.assert_close(compiled(x), f(x))


def test_numpy_on_a_tensor_is_traced_as_torch_ops():
    """``np.exp(tensor)`` (an ndarray in NumPy's eyes): a torch._numpy node, one graph."""
    def f(x):
        return torch.as_tensor(np.exp(x * 2)) + 1
    out = tc.explain(f)(torch.randn(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    x = torch.randn(3)
    torch.testing.assert_close(tc.compile(f, backend="eager")(x), f(x))


class Checkpointed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        if getattr(self, "gradient_checkpointing", False):  # transformers asks so
            return self.lin(x) * 2
        return self.lin(x) * (3 if hasattr(self, "scale") else 1)


def test_getattr_default_and_hasattr_on_a_module_are_guarded():
    m, x = Checkpointed(), torch.randn(2, 3)
    compiled = tc.compile(m, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), m(x))
    m.scale = 3.0  # attributes that were absent appear: the graph's answers no longer hold
    torch.testing.assert_close(compiled(x), m(x))
    m.gradient_checkpointing = True
    torch.testing.assert_close(compiled(x), m(x))


def test_min_max_honour_key():  # was silently wrong: the key was ignored
    def f(x):
        return x * max([1, 5, 2], key=lambda v: -v) + min([4, 9], key=lambda v: -v)
    x = torch.ones(2)
    torch.testing.assert_close(tc.compile(f, backend="eager", fullgraph=True)(x), f(x))


def test_attribute_writes_are_replayed_on_the_object():
    h = Holder()
    x = torch.randn(3)
    tc.compile(attr_assign, backend="eager", fullgraph=True)(x, h)
    assert h.count == 3
    torch.testing.assert_close(h.value, x * 2)


def twice(x):
    return x * 2


class Stores(torch.nn.Module):
    """Functions kept on the instance (``self.act = act_fn``; ``m.forward = fn``) are plain
    attributes: Python calls them without ``self``."""

    def __init__(self, act):
        super().__init__()
        self.act = act

    def forward(self, x):
        return self.act(x) + 1


@pytest.mark.parametrize("act", [twice, lambda x: x - 1, torch.relu])
def test_a_function_stored_on_a_module_is_not_bound_to_it(act):
    # was a graph break: "twice() takes 1 positional argument but 2 were given"
    m, x = Stores(act), torch.randn(3)
    torch.testing.assert_close(tc.compile(m, backend="eager", fullgraph=True)(x), m(x))


def test_a_forward_assigned_to_the_instance_is_called_without_self():
    m, x = Stores(twice), torch.randn(3)
    m.forward = lambda *args: args[0] * 3      # was the class's forward: silently x * 2 + 1
    torch.testing.assert_close(tc.compile(m, backend="eager", fullgraph=True)(x), x * 3)
    outer = torch.nn.Sequential(m, torch.nn.Identity())   # inlined as a submodule
    torch.testing.assert_close(tc.compile(outer, backend="eager", fullgraph=True)(x), x * 3)


def detaches_inside_no_grad(x, w):
    with torch.no_grad():
        scale = (w * 2).sum()
    return x * w * scale


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_no_grad_block_cuts_the_gradient(backend):
    x = torch.randn(3)
    w = torch.randn(3, requires_grad=True)
    compiled = tc.compile(detaches_inside_no_grad, backend=backend, fullgraph=True)
    compiled(x, w).sum().backward()
    got, w.grad = w.grad.clone(), None
    detaches_inside_no_grad(x, w).sum().backward()
    torch.testing.assert_close(got, w.grad)


class MappedConfig:
    """A transformers-style config: ``attribute_map`` renames attributes in both hooks, and
    ``to_dict`` deep-copies ``__dict__`` (``PreTrainedConfig``, reduced to plain Python)."""
    attribute_map = {"hidden": "d_model"}

    def __init__(self, d_model=4, scale=2.0):
        self.d_model, self.decoder_layers, self.names, self.scale = d_model, 2, ["a"], scale

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def to_dict(self):
        return copy.deepcopy(self.__dict__)


def decoder_view(x, cfg):
    # transformers' get_text_config(decoder=True) on a flat encoder-decoder config
    c = copy.deepcopy(cfg)
    for key in c.to_dict():
        if key.startswith("decoder_"):
            value = getattr(c, key)
            delattr(c, key)
            setattr(c, key[len("decoder_"):], value)
    c.names.append("b")
    c.hidden = c.hidden + 1
    return x * c.hidden + c.layers * len(c.names) * c.scale


def test_deepcopy_of_a_config_is_traced_on_trackers_and_guarded():
    """Was 3 graph breaks (``id()`` in copy.py's memo, then ``setattr``/``delattr``): the
    copy is made on trackers, its class's attribute hooks are inlined, and every value it
    copied is guarded -- a changed config recompiles; the original is never written."""
    made = []

    def counting(gm, example_inputs):
        made.append(gm)
        return gm
    cfg, x = MappedConfig(), torch.randn(3)
    compiled = tc.compile(decoder_view, backend=counting, fullgraph=True)
    torch.testing.assert_close(compiled(x, cfg), decoder_view(x, cfg))
    assert cfg.__dict__ == MappedConfig().__dict__  # the copy's writes stayed in the copy
    cfg.scale = 3.0
    torch.testing.assert_close(compiled(x, cfg), decoder_view(x, cfg))
    cfg.names.append("z")
    torch.testing.assert_close(compiled(x, cfg), decoder_view(x, cfg))
    assert len(made) == 3


def identity_of(x, obj):
    return x + 1, id(obj)


def test_id_of_an_object_from_outside_is_a_guarded_constant():
    compiled = tc.compile(identity_of, backend="eager", fullgraph=True)
    a, b, x = Holder(), Holder(), torch.randn(3)
    assert compiled(x, a)[1] == id(a)
    assert compiled(x, b)[1] == id(b)  # the guard ``obj is <a>`` failed: recompiled


def identity_of_new(x):
    return x + 1, id(Holder()) > 0


def test_id_of_an_object_made_while_tracing_is_a_break():
    out = tc.explain(identity_of_new)(torch.randn(3))
    assert out.graph_break_count == 1 and "id()" in out.break_reasons[0].reason


class Tagged:
    kind = "tagged"


def class_of_new_object(x):
    t = Tagged()
    return x + 1 if t.__class__ is Tagged and type(t).kind == "tagged" else x - 1


def test_class_of_an_object_made_while_tracing():
    # was silently x - 1: ``__class__`` looked up on the class gave its metaclass, ``type``
    x = torch.randn(3)
    torch.testing.assert_close(tc.compile(class_of_new_object, backend="eager",
                                          fullgraph=True)(x), x + 1)


VALIDATORS = {typing.Union: "union", list: "list", collections.abc.Sequence: "sequence",
              types.UnionType: "union"}


def validated(x, expected):
    # huggingface_hub's strict dataclasses look a field's type up in a table keyed so
    kind = VALIDATORS.get(typing.get_origin(expected) or expected, "simple")
    return x * len(kind)


def test_a_dict_keyed_by_classes_and_typing_forms_is_read_whole():
    """Was a graph break ("a dict with non-constant keys"): classes and typing's special
    forms hash by identity, so a lookup folds; the guard names the key object itself."""
    x = torch.randn(3)
    compiled = tc.compile(validated, backend="eager", fullgraph=True)
    for expected in (list, int | None, int):
        torch.testing.assert_close(compiled(x, expected), validated(x, expected))
    VALIDATORS[int] = "integer"  # the table changed: the guard on int's absence fails
    try:
        torch.testing.assert_close(compiled(x, int), x * len("integer"))
    finally:
        del VALIDATORS[int]


class SiLUActivation(torch.nn.Module):  # transformers' activations: no __init__ of their own
    def forward(self, x):
        return torch.nn.functional.silu(x)


class Instantier(collections.OrderedDict):
    """transformers' ``ACT2FN``: every read builds a new module from the stored class."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACTS = Instantier({"silu": SiLUActivation, "elu": (torch.nn.ELU, {"alpha": 0.5})})


def pooled_activation(x, name):
    pooled = torch.nn.MaxPool1d(kernel_size=2, stride=2)(x)  # CANINE's downsampling
    pad = torch.nn.ConstantPad1d((1, 0), 0)
    return ACTS[name](pad(pooled)), pad


@pytest.mark.parametrize("name", ["silu", "elu"])
def test_stateless_modules_built_in_forward(name):
    """Were graph breaks ("constructing an instance of MaxPool1d", ``super().__getitem__``
    found in a C class): a module whose ``__init__`` is torch.nn's and that holds no state is
    built while tracing; a dict subclass's override reads its storage, guarded through
    ``dict.items``; a module returned from the graph is built again after it."""
    x = torch.randn(2, 3, 8)
    compiled = tc.compile(pooled_activation, backend="eager", fullgraph=True)
    out, pad = compiled(x, name)
    want, _ = pooled_activation(x, name)
    torch.testing.assert_close(out, want)
    assert isinstance(pad, torch.nn.ConstantPad1d) and pad.padding == (1, 0)
    ACTS["silu"] = torch.nn.Tanh  # the stored class changed: the guard on it fails
    try:
        torch.testing.assert_close(compiled(x, "silu")[0], pooled_activation(x, "silu")[0])
    finally:
        ACTS["silu"] = SiLUActivation


def new_linear(x):
    return torch.nn.Linear(3, 3)(x)


def test_a_module_with_parameters_built_in_forward_is_a_break():
    x = torch.randn(2, 3)
    out = tc.explain(new_linear)(x)
    assert out.graph_break_count == 1 and "parameters" in out.break_reasons[0].reason
    # the Linear built (and refused) while tracing drew no random numbers: the compiled call
    # leaves the generator where eager leaves it
    start = torch.get_rng_state()
    new_linear(x)
    after_eager = torch.get_rng_state()
    torch.set_rng_state(start)
    tc.compile(new_linear, backend="eager")(x)
    assert torch.equal(torch.get_rng_state(), after_eager)


@tc.dynamo.assume_constant_result
def installed(name):
    return importlib.util.find_spec(name) is not None


def probes(x):
    if installed("torch") and importlib.util.find_spec("no_such_package_here") is None:
        return x + 1
    return x - 1


def test_installed_package_probes_are_constants():
    """Were graph breaks (``importlib.util.find_spec`` is C code underneath, and
    transformers' ``is_torch_available`` is marked ``assume_constant_result``)."""
    x = torch.randn(3)
    torch.testing.assert_close(tc.compile(probes, backend="eager", fullgraph=True)(x), x + 1)


class ChannelsLayerNorm(torch.nn.LayerNorm):
    """SqueezeBERT's layer norm over channels: the parent's forward, called by name."""

    def forward(self, x):
        return torch.nn.LayerNorm.forward(self, x.permute(0, 2, 1)).permute(0, 2, 1)


def test_a_torch_module_method_called_by_name_is_inlined():
    # was a graph break per call: the unbound forward was taken for a torch op, the module
    # for its argument ("NNModuleVariable cannot be a graph argument")
    m, x = ChannelsLayerNorm(4), torch.randn(2, 4, 5)
    torch.testing.assert_close(tc.compile(m, backend="aot_eager", fullgraph=True)(x), m(x))


def optional_flag(x, cache):
    # transformers' masking utils, with no cache: getattr(None, "is_compileable", False)
    return x + 1 if not getattr(cache, "is_compileable", False) else x - 1


def test_getattr_default_on_a_missing_attribute_of_a_constant():
    # was a graph break: the AttributeError raised while tracing was not getattr's to catch
    x = torch.randn(3)
    torch.testing.assert_close(tc.compile(optional_flag, backend="eager", fullgraph=True)(
        x, None), x + 1)


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
        self.b[0].weight = self.a.weight  # shared: listed once
        self.register_buffer("s", torch.ones(3))

    def forward(self, x):
        # transformers' ``self.dtype``: the first floating-point parameter's
        dtype = next(p.dtype for p in self.parameters() if p.is_floating_point())
        count = len(list(self.modules())) + 10 * len(list(self.buffers()))
        names = [k for k, _ in self.named_parameters()]
        return x.to(dtype) * count + sum(p.sum() for p in self.parameters()), names


def test_module_tree_walks_are_guarded_lists():
    """Were graph breaks (``module.parameters()``, and inside it a ``set`` of modules):
    the items in PyTorch's order through their own sources; unsharing a weight changes the
    list, and the guard that the two were one tensor sends it to a recompile."""
    m, x = Tied(), torch.randn(3)
    compiled = tc.compile(m, backend="eager", fullgraph=True)
    out, names = compiled(x)
    want, want_names = m(x)
    torch.testing.assert_close(out, want)
    assert names == want_names == ["a.weight", "a.bias", "b.0.bias"]
    m.b[0].weight = torch.nn.Parameter(torch.randn(3, 3))
    out, names = compiled(x)
    want, want_names = m(x)
    torch.testing.assert_close(out, want)
    assert names == want_names


class RebindsBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(4.0))

    def forward(self, x):
        # CTRL: "won't be sent to the correct dtype along the model, so we do it manually"
        self.table = self.table.to(dtype=x.dtype)
        return x * self.table


def test_a_buffer_rebound_in_forward_is_replayed():
    """Was a graph break ("assignment ... a parameter, buffer, submodule or tensor"): the
    new tensor is set on the module after the graph, still a buffer, as eager leaves it."""
    m, ref = RebindsBuffer(), RebindsBuffer()
    compiled = tc.compile(m, backend="aot_eager", fullgraph=True)
    for dtype in (torch.float64, torch.float64, torch.float32):
        x = torch.randn(4, dtype=dtype)
        torch.testing.assert_close(compiled(x), ref(x))
        assert "table" in m._buffers and m.table.dtype == ref.table.dtype == dtype


def selective_scan(a, b, reverse):
    # Mamba's selective scan, as transformers writes it when compiling
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(left, right):
        a_left, b_left = left
        a_right, b_right = right
        return a_left * a_right, a_right * b_left + b_right
    _, states = associative_scan(combine_fn, (a, b), dim=2, reverse=reverse,
                                 combine_mode="generic")
    return states


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_is_unrolled_with_eager_values_and_gradients(reverse):
    """Was a graph break per call ("NestedUserFunctionVariable cannot be a graph
    argument"): combine_fn is inlined once per position of the scan dimension."""
    a = torch.rand(2, 3, 5, 4, requires_grad=True)
    b = torch.randn(2, 3, 5, 4, requires_grad=True)
    compiled = tc.compile(selective_scan, backend="aot_eager", fullgraph=True)
    out, want = compiled(a, b, reverse), selective_scan(a, b, reverse)
    torch.testing.assert_close(out, want)
    got = torch.autograd.grad(out.pow(2).sum(), (a, b))
    for g, w in zip(got, torch.autograd.grad(want.pow(2).sum(), (a, b))):
        torch.testing.assert_close(g, w)


def pops_then_breaks(x, **kwargs):
    flag = kwargs["flag"]
    kwargs.pop("flag")  # transformers' mBART pops return_dict so
    print("a graph break")
    return x + flag


def overwrites_then_breaks(x, d):
    old = d["k"]
    d["k"] = 5.0
    print("a graph break")
    return x + old


def test_values_read_before_a_replayed_write_keep_what_was_read():
    """At a break the locals are rebuilt through their sources *before* the traced writes
    are replayed -- was a KeyError (``flag`` popped first) and a silent ``x + 5``."""
    x = torch.zeros(1)
    torch.testing.assert_close(tc.compile(pops_then_breaks, backend="eager")(x, flag=2.0),
                               x + 2)
    d = {"k": 1.0}
    torch.testing.assert_close(tc.compile(overwrites_then_breaks, backend="eager")(x, d), x + 1)
    assert d == {"k": 5.0}


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "aot_eager_decomp_partition",
                                     "inductor"])
def test_associative_scan_over_a_symbolic_length_is_one_graph_for_every_length(backend):
    """Was one graph per length (Mamba: 6 over batch 1..16 and lengths 8..64; torch.compile
    makes 8): unrolling needs the number of steps, so the length was specialised. Once it
    is a symbol the scan is one ``sequential_scan`` node holding ``combine_fn`` -- no guard
    on the length -- with eager's values and gradients at every length, both directions."""
    from tutorcompile.ops.scan import sequential_scan
    compiled = tc.compile(selective_scan, backend=backend, dynamic=True, fullgraph=True)
    for b, t in ((2, 5), (3, 5), (4, 6), (2, 9)):
        for reverse in (False, True):
            a = torch.rand(b, 3, t, 4, requires_grad=True)
            x = torch.randn(b, 3, t, 4, requires_grad=True)
            out, want = compiled(a, x, reverse), selective_scan(a, x, reverse)
            torch.testing.assert_close(out, want)
            got = torch.autograd.grad(out.pow(2).sum(), (a, x))
            for g, w in zip(got, torch.autograd.grad(want.pow(2).sum(), (a, x))):
                torch.testing.assert_close(g, w)
    entries = eval_frame.cache_entries(selective_scan)
    assert len(entries) == 2    # one per direction (``reverse`` is a constant of the graph)
    for entry in entries:
        assert [n.target for n in entry.graph_module.graph.nodes
                if n.op == "call_function"].count(sequential_scan) == 1
        assert "size()[2] ==" not in str(entry.check), entry.check


def scaled_scan(x, k):
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(acc, cur):
        return acc * k + cur     # k: a closure cell, read when the function was made
    return associative_scan(combine_fn, x, dim=1, combine_mode="generic")


def test_a_scan_function_with_a_closure_is_unrolled_for_each_length():
    """A graph may hold only a function that computes the same thing on every call; a
    closure's cells belong to the call that made it, so that scan stays unrolled -- its
    length specialised, a graph per length -- and right when the closure's value changes."""
    compiled = tc.compile(scaled_scan, backend="aot_eager", dynamic=True, fullgraph=True)
    for t, k in ((5, 0.5), (5, 2.0), (7, 0.5)):
        x = torch.randn(3, t)
        want = x.clone()
        for i in range(1, t):
            want[:, i] = want[:, i - 1] * k + x[:, i]
        torch.testing.assert_close(compiled(x, k), want)
    checks = [str(e.check) for e in eval_frame.cache_entries(scaled_scan)]
    assert len(checks) == 3 and all("specialised" in c for c in checks), checks


def _combine(acc, cur):
    return acc + cur


def scan_with_a_global(x):
    from torch._higher_order_ops.associative_scan import associative_scan
    return associative_scan(_combine, x, dim=0, combine_mode="generic")


def test_a_module_level_scan_function_in_the_graph_is_guarded_by_identity(monkeypatch):
    """The graph holds the function object read from the module: rebinding the name makes
    a new graph, never a run of the old function."""
    compiled = tc.compile(scan_with_a_global, backend="eager", dynamic=True, fullgraph=True)
    for n in (3, 4):
        torch.testing.assert_close(compiled(torch.ones(n)), torch.arange(1.0, n + 1))
    monkeypatch.setitem(globals(), "_combine", lambda acc, cur: acc * cur * 2)
    torch.testing.assert_close(compiled(torch.ones(4)), torch.tensor([1.0, 2, 4, 8]))


def test_sequential_scan_is_associative_scan_and_keeps_symbolic_sizes():
    """The function the graph calls: PyTorch's ``associative_scan`` values and gradients
    (tuple or single tensor, both directions); on fake tensors with symbolic sizes its
    result has the input's sizes, the length still a symbol."""
    from torch._higher_order_ops.associative_scan import associative_scan
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    from tutorcompile.ops.scan import sequential_scan

    def combine_fn(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    def loss(result):
        return sum(t.sin().sum() for t in (result if isinstance(result, tuple) else [result]))
    a = torch.rand(2, 6, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    for reverse in (False, True):
        for fn, xs in ((combine_fn, (a, b)), (torch.add, b)):
            got = sequential_scan(fn, xs, 1, reverse=reverse)
            want = associative_scan(fn, xs, dim=1, reverse=reverse, combine_mode="generic")
            torch.testing.assert_close(got, want)
            leaves = [xs] if isinstance(xs, torch.Tensor) else list(xs)
            for g, w in zip(torch.autograd.grad(loss(got), leaves),
                            torch.autograd.grad(loss(want), leaves)):
                torch.testing.assert_close(g, w)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.STATIC, DimDynamic.DYNAMIC,
                                                      DimDynamic.STATIC])
    fake = mode.from_tensor(torch.empty(2, 9, 3), symbolic_context=context)
    with mode:
        out = sequential_scan(combine_fn, (fake, fake.to(torch.float64)), 1)
    assert isinstance(out[0].shape[1], torch.SymInt) and out[0].shape == fake.shape
    assert (out[0].dtype, out[1].dtype) == (torch.float32, torch.float64)


def annotated_lists(x):
    # TorchScript-minded code (timm's CrossViT): typing subscripts and torch.jit.annotate
    outs = torch.jit.annotate(typing.List[torch.Tensor], [])  # noqa: UP006
    table = torch.jit.annotate(typing.Dict[str, typing.List[torch.Tensor]], {})  # noqa: UP006
    outs.append(x + 1)
    table["a"] = [x * 2]
    width = len(typing.Tuple[int, typing.Optional[float], ...].__args__)  # noqa: UP006, UP045
    more = torch.jit.annotate(list[torch.Tensor], [x])
    return outs[0] + table["a"][0] * width + more[0]


def test_typing_subscripts_and_jit_annotate_are_traced_whole():
    """Were eight graph breaks on CrossViT ("a _lru_cache_wrapper object without a source":
    typing caches ``List[...]`` behind an lru_cache made in a closure; then "_GenericAlias
    cannot be a graph argument" for ``torch.jit.annotate``): a typing subscript of types is
    computed while tracing, and ``torch.jit.annotate`` is the value it annotates."""
    x = torch.randn(3)
    compiled = tc.compile(annotated_lists, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), annotated_lists(x))
    (graph,) = tc.explain(annotated_lists)(x).graphs
    assert "annotate" not in graph.code


class EmptyBag:  # falsy through __len__, written in Python
    def __len__(self):
        return 0


class Off:  # falsy through __bool__
    def __bool__(self):
        return False


def numpy_padding_test(x):
    # Reformer: pad only when the length is not a multiple of np.lcm of the chunk lengths
    pad = x.shape[-1] % np.lcm(4, 4) != 0 and x.shape[-1] > 4
    return x + 1 if pad else x - 1


def truth_of_objects(x, bag, off, flag):
    y = x * 2 if bag else x * 3
    y = y + 1 if off else y - 1
    y = y.sin() if flag else y.cos()
    return (y * 5 if EmptyBag() else y * 7), (not Off())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_truth_of_an_object_is_its_bool_or_len_not_always_true(backend):
    """``if obj:`` once took the true side for every object it did not know: a numpy bool
    (np.False_ too), a 0-d array, an object whose ``__len__`` is 0 -- a silently wrong
    branch. Python-level dunders are inlined; C-level ones (numpy) are a graph break."""
    x = torch.randn(2, 16)
    torch.testing.assert_close(tc.compile(numpy_padding_test, backend=backend)(x),
                               numpy_padding_test(x))
    for flag in (np.False_, np.True_, np.array(0.0), np.array(2)):
        eval_frame.reset()
        got = tc.compile(truth_of_objects, backend=backend)(x, EmptyBag(), Off(), flag)
        want = truth_of_objects(x, EmptyBag(), Off(), flag)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] is want[1] is True
