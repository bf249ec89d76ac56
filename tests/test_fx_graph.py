"""The graph IR itself: building and editing graphs, lint, printers, passes, generated code."""

import copy
import operator
import textwrap
import traceback

import pytest
import torch
from torch import nn

from tutorcompile.fx import (
    Graph,
    GraphLintError,
    GraphModule,
    Interpreter,
    ShapeProp,
    cse,
    dce,
    format_tabular,
)

pytestmark = pytest.mark.foundation


def small_graph():
    """forward(x, y) = relu(x + y) * 2"""
    g = Graph(provenance="hand")
    x, y = g.placeholder("x"), g.placeholder("y")
    add = g.call_function(operator.add, (x, y))
    relu = g.call_function(torch.relu, (add,))
    mul = g.call_function(operator.mul, (relu, 2))
    g.output(mul)
    return g


# --- building and editing ----------------------------------------------------------------
def test_users_follow_args():
    g = small_graph()
    x, y, add, relu, mul, out = g.nodes
    assert list(x.users) == [add] and list(add.users) == [relu]
    mul.args = (add, 3)
    assert list(relu.users) == [] and set(add.users) == {relu, mul}
    g.lint()


def test_replace_all_uses_with_and_erase():
    g = small_graph()
    x, y, add, relu, mul, out = g.nodes
    with g.inserting_after(add):
        sig = g.call_function(torch.sigmoid, (add,))
    relu.replace_all_uses_with(sig)
    g.erase_node(relu)
    g.lint()
    assert [n.name for n in g.nodes] == ["x", "y", "add", "sigmoid", "mul", "output"]
    gm = GraphModule({}, g)
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(gm(a, b), torch.sigmoid(a + b) * 2)


def test_erase_refuses_used_nodes():
    g = small_graph()
    with pytest.raises(RuntimeError, match="still used by relu"):
        g.erase_node(g.nodes[2])


def test_inserting_before_keeps_order_and_new_nodes_go_before_output():
    g = small_graph()
    x, y, add, *_ = g.nodes
    with g.inserting_before(add):
        a = g.call_function(torch.neg, (x,))
        b = g.call_function(torch.exp, (a,))
    tail = g.call_function(torch.cos, (x,))  # default insertion point: before output
    assert [n.name for n in g.nodes] == ["x", "y", "neg", "exp", "add", "relu", "mul", "cos",
                                         "output"]
    assert b.prev is a and tail.next is g.output_node
    g.lint()


def test_names_are_unique_and_valid_python():
    g = Graph()
    x = g.placeholder("input")          # a builtin name: renamed, target kept
    a = g.call_function(torch.add, (x, x))
    b = g.call_function(torch.add, (a, a))
    c = g.call_function(torch.add, (b, b), name="add")
    g.output(c)
    assert x.name == "input_" and x.target == "input"
    assert [a.name, b.name, c.name] == ["add", "add_1", "add_2"]
    assert GraphModule({}, g)(torch.ones(1)).item() == 8


def test_duplicate_placeholder_rejected():
    g = Graph()
    g.placeholder("x")
    with pytest.raises(ValueError, match="already exists"):
        g.placeholder("x")


def test_nodes_of_other_graphs_rejected():
    g1, g2 = Graph(), Graph()
    x = g1.placeholder("x")
    with pytest.raises(ValueError, match="another graph"):
        g2.call_function(torch.relu, (x,))


# --- lint ---------------------------------------------------------------------------------
def test_lint_accepts_good_graph():
    small_graph().lint()


def test_lint_catches_missing_output():
    g = Graph()
    g.placeholder("x")
    with pytest.raises(GraphLintError, match="exactly one output"):
        g.lint()


def test_lint_catches_use_before_definition():
    g = small_graph()
    x, y, add, relu, mul, out = g.nodes
    g._nodes.remove(relu)
    g._nodes.insert(2, relu)  # relu now reads `add` before it is computed
    with pytest.raises(GraphLintError, match="reads 'add' before it is defined"):
        g.lint()


def test_lint_catches_stale_users():
    g = small_graph()
    x, y, add, relu, mul, out = g.nodes
    x.users[mul] = None  # claims mul reads x, which it does not
    with pytest.raises(GraphLintError, match="does not read it"):
        g.lint()


def test_lint_catches_placeholder_after_ops():
    g = small_graph()
    late = g.placeholder("z")
    g._nodes.remove(late)
    g._nodes.insert(3, late)
    with pytest.raises(GraphLintError, match="placeholders must come before"):
        g.lint()


def test_lint_catches_bad_targets_and_missing_attributes():
    g = Graph()
    x = g.placeholder("x")
    y = g.call_module("encoder.fc", (x,))
    g.output(y)
    with pytest.raises(GraphLintError, match="no attribute 'encoder.fc'"):
        g.lint(root=nn.Module())
    y.target = 42
    with pytest.raises(GraphLintError, match="target must be a string"):
        g.lint()


def test_lint_catches_duplicate_names_and_erased_nodes():
    g = small_graph()
    g.nodes[3].name = "add"
    with pytest.raises(GraphLintError, match="two nodes are named 'add'"):
        g.lint()
    g = small_graph()
    g.nodes[3]._erased = True
    with pytest.raises(GraphLintError, match="erased"):
        g.lint()


# --- printers: golden text ----------------------------------------------------------------
def test_generated_code_golden():
    gm = GraphModule({}, small_graph())
    assert gm.code == textwrap.dedent("""\
        # Constructed by hand
        def forward(self, x, y):
            add = x + y;  x = y = None
            relu = torch.relu(add);  add = None
            mul = relu * 2;  relu = None
            return mul
        """)


def test_tabular_golden():
    g = small_graph()
    assert format_tabular(g) == textwrap.dedent("""\
        opcode         name    target        args       kwargs
        -------------  ------  ------------  ---------  ------
        placeholder    x       x             ()         {}
        placeholder    y       y             ()         {}
        call_function  add     operator.add  (x, y)     {}
        call_function  relu    torch.relu    (add,)     {}
        call_function  mul     operator.mul  (relu, 2)  {}
        output         output  output        (mul,)     {}""")


def test_tabular_shows_shapes_after_shape_prop():
    gm = GraphModule({}, small_graph())
    ShapeProp(gm).propagate(torch.randn(2, 3), torch.randn(3))
    table = format_tabular(gm.graph)
    assert table.splitlines()[0].split() == ["opcode", "name", "target", "args", "kwargs",
                                             "shape", "dtype"]
    assert "[2, 3]  float32" in table.splitlines()[4]


def test_ir_text_golden():
    assert str(small_graph()) == textwrap.dedent("""\
        # Constructed by hand
        graph():
            %x : [users=1] = placeholder[x]
            %y : [users=1] = placeholder[y]
            %add : [users=1] = call_function[target=operator.add](args = (%x, %y), kwargs = {})
            %relu : [users=1] = call_function[target=torch.relu](args = (%add,), kwargs = {})
            %mul : [users=1] = call_function[target=operator.mul](args = (%relu, 2), kwargs = {})
            return %mul""")


def test_codegen_readable_forms_and_constants():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.getitem, (x, (slice(None), slice(1, None, 2), None, ...)))
    b = g.call_function(getattr, (a, "mT"))
    c = g.call_function(operator.neg, (b,))
    d = g.call_method("to", (c,), {"dtype": torch.float64, "device": torch.device("cpu")})
    e = g.call_function(torch.clamp, (d,), {"min": float("-inf"), "max": -1.5})
    f = g.call_function(operator.sub, (e, -2))
    g.output({"f": f, "shape": torch.Size([2])})
    gm = GraphModule({}, g)
    assert "a = x[:, 1::2, None, ...]" in gm.code.replace("getitem", "a")
    assert "getattr_ = getitem.mT" in gm.code
    assert "neg = -getattr_" in gm.code
    assert "to = neg.to(dtype=torch.float64, device=torch.device('cpu'))" in gm.code
    assert "torch.clamp(to, min=float('-inf'), max=-1.5)" in gm.code
    assert "sub = clamp - (-2)" in gm.code
    assert "return {'f': sub, 'shape': torch.Size([2])}" in gm.code
    t = torch.randn(3, 5)
    out = gm(t)
    expected = torch.clamp((-(t[:, 1::2, None, ...].mT)).double(), max=-1.5) + 2
    torch.testing.assert_close(out["f"], expected)


def test_user_functions_and_tensor_constants_become_named_globals():
    def double(v):
        return v * 2

    const = torch.tensor([1.0, 2.0])
    g = Graph()
    x = g.placeholder("x")
    d = g.call_function(double, (x,))  # the node is named `double`, like the function
    s = g.call_function(torch.add, (d, const))
    g.output(s)
    gm = GraphModule({}, g)
    assert "double = double_1(x)" in gm.code
    assert "add = torch.add(double, _tensor_constant)" in gm.code
    torch.testing.assert_close(gm(torch.ones(2)), torch.tensor([3.0, 4.0]))


def test_submodule_paths_that_are_not_identifiers():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    g = Graph()
    x = g.placeholder("x")
    y = g.call_module("0", (x,))
    w = g.get_attr("0.weight")
    g.output((g.call_module("1", (y,)), w))
    gm = GraphModule(model, g)
    assert "getattr(self, '0')(x)" in gm.code
    out, weight = gm(torch.randn(2, 3))
    assert weight is model[0].weight and out.shape == (2, 3)


def test_traceback_points_into_generated_source():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.matmul, (x, x)))
    gm = GraphModule({}, g)
    with pytest.raises(RuntimeError) as info:
        gm(torch.randn(2, 3))
    text = "".join(traceback.format_exception(info.value))
    assert "matmul = torch.matmul(x, x)" in text  # the generated line, via linecache


def test_deepcopy_gives_independent_parameters():
    model = nn.Linear(2, 2)
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_module("fc", (x,)))
    gm = GraphModule({"fc": model}, g)
    twin = copy.deepcopy(gm)
    assert twin.fc.weight is not gm.fc.weight
    torch.testing.assert_close(twin(torch.ones(1, 2)), gm(torch.ones(1, 2)))
    assert twin.code == gm.code


# --- interpreter ------------------------------------------------------------------------
def test_interpreter_hooks_and_freeing():
    g = small_graph()
    seen, live_sizes = [], []

    class Spy(Interpreter):
        def call_function(self, target, args, kwargs):
            seen.append(target)
            live_sizes.append(len(self.env))
            return super().call_function(target, args, kwargs)

    out = Spy(GraphModule({}, g)).run(torch.ones(2), torch.ones(2))
    assert seen == [operator.add, torch.relu, operator.mul]
    assert live_sizes == [2, 1, 1]  # x and y are dropped once `add` has read them
    torch.testing.assert_close(out, torch.full((2,), 4.0))


def test_interpreter_reports_failing_node():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.mm, (x, x)))
    with pytest.raises(RuntimeError) as info:
        Interpreter(GraphModule({}, g)).run(torch.ones(2, 3))
    assert "While executing node 'mm'" in "\n".join(info.value.__notes__)


# --- passes -------------------------------------------------------------------------------
def test_dce_drops_dead_nodes_but_keeps_effects():
    g = Graph(provenance="hand")
    x = g.placeholder("x")
    g.call_function(torch.exp, (x,))                       # dead
    g.call_method("add_", (x, 1))                          # in-place: kept
    g.call_function(torch.rand, (3,))                      # random: kept (advances the RNG)
    live = g.call_function(torch.relu, (x,))
    g.output(live)
    out = dce(g)
    assert [n.target for n in out.nodes if n.op != "placeholder"] == \
           ["add_", torch.rand, torch.relu, "output"]
    assert out.provenance == ["hand", "dce"]
    assert len(g.nodes) == 6  # the input graph is untouched
    out.lint()


def test_cse_merges_repeats_but_not_random_or_inplace():
    g = Graph(provenance="hand")
    x = g.placeholder("x")
    a1 = g.call_function(torch.add, (x, 1.0))
    a2 = g.call_function(torch.add, (x, 1.0))
    a3 = g.call_function(torch.add, (x, 1))        # int 1 is not float 1.0 (dtype differs)
    r1 = g.call_function(torch.rand_like, (x,))
    r2 = g.call_function(torch.rand_like, (x,))
    m1 = g.call_function(torch.mul, (a1, r1))
    m2 = g.call_function(torch.mul, (a2, r2))
    g.output((m1, m2, a3))
    out = dce(cse(g))
    targets = [n.target for n in out.nodes]
    assert targets.count(torch.add) == 2 and targets.count(torch.rand_like) == 2
    assert out.provenance == ["hand", "cse", "dce"]
    assert GraphModule({}, out).code.startswith("# Constructed by dce (history: hand → cse → dce)")
    out.lint()


def test_cse_sees_through_list_arguments():
    g = Graph()
    x = g.placeholder("x")
    c1 = g.call_function(torch.cat, ([x, x],), {"dim": 0})
    c2 = g.call_function(torch.cat, ([x, x],), {"dim": 0})
    c3 = g.call_function(torch.cat, ([x, x],), {"dim": 1})
    g.output((c1, c2, c3))
    out = cse(g)
    assert len(out.find_nodes(op="call_function", target=torch.cat)) == 2
    t = torch.randn(2, 2)
    a, b, c = GraphModule({}, out)(t)
    assert a is b and c.shape == (2, 4)
