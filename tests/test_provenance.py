"""Provenance: generated code says where it came from.

Every pass since capture keeps the user's line on the nodes it makes (``Graph.nodes_from``),
so a fused kernel's comment cites the lines of the model it fuses, forward and backward; and
all generated Python (forwards, wrappers, guards) is registered with ``linecache``, so a
traceback through it shows the generated line.
"""

import inspect
import traceback

import pytest
import torch

import tutorcompile as tc
from tutorcompile import _logging as logs
from tutorcompile.fx import Graph, exec_generated

pytestmark = pytest.mark.stage5


@pytest.fixture(autouse=True)
def _fresh(fresh_compiler):
    yield
    logs.set_logs()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.fc(x)) * 2.0            # PROVENANCE-A
        return (torch.sigmoid(h) + x).sum(dim=-1)   # PROVENANCE-B


def _line(marker: str) -> str:
    lines, start = inspect.getsourcelines(Block.forward)
    number = next(start + i for i, text in enumerate(lines) if marker in text)
    return f"test_provenance.py:{number}"


def test_kernels_cite_the_users_lines_forward_and_backward(tmp_path):
    model, x = Block(), torch.randn(4, 8, requires_grad=True)
    with logs.debug(tmp_path) as folder:
        tc.compile(model)(x).sum().backward()
    forward, backward = (p.read_text() for p in sorted(folder.glob("*output_code*")))
    for code in (forward, backward):
        kernels = [k.split("extern")[0] for k in code.split("# ---- kernel ")[1:]]
        assert kernels, code
        for kernel in kernels:     # the model's lines, or nn.Linear's (x's gradient)
            assert "test_provenance.py:" in kernel or "linear.py:" in kernel, kernel
        assert _line("PROVENANCE-A") in code and _line("PROVENANCE-B") in code, code


def test_decomposed_and_gradient_nodes_keep_source_and_origin():
    g = Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.tanh, (x,))
    y.meta["source"] = "model.py:3 in forward: y = torch.tanh(x)"
    with g.nodes_from(y):
        z = g.call_function(torch.mul, (y, 2.0))
        with g.nodes_from(z):      # a pass over a pass: the first node is still named
            w = g.call_function(torch.neg, (z,))
    out = g.call_function(torch.relu, (w,))
    assert z.meta["source"] == w.meta["source"] == y.meta["source"]
    assert z.meta["from_node"] == w.meta["from_node"] == "tanh"
    assert "source" not in out.meta


def test_a_traceback_through_generated_code_shows_the_generated_line():
    source = "def call(x):\n    y = x + 1\n    raise ValueError(y)\n"
    fn = exec_generated(source, "test wrapper", {})["call"]
    with pytest.raises(ValueError) as info:
        fn(1)
    text = "".join(traceback.format_exception(info.value))
    assert "raise ValueError(y)" in text and "<tutorcompile test wrapper #" in text
    assert inspect.getsource(fn) == source
