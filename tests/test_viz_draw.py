"""Drawing graphs: SVG with graphviz, a text rendering and a one-line hint without it."""

import operator
import shutil

import pytest
import torch

from tutorcompile.fx import Graph, GraphModule, ShapeProp
from tutorcompile.viz import draw
from tutorcompile.viz.drawing import INSTALL_DOT, GraphDrawing

pytestmark = pytest.mark.foundation
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` not found")


def graph_module():
    g = Graph(provenance="hand")
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1.0))
    b = g.call_function(torch.sigmoid, (a,))
    g.output(g.call_method("sum", (b,)))
    gm = GraphModule({}, g)
    ShapeProp(gm).propagate(torch.randn(2, 3))
    return gm


@needs_dot
def test_svg_has_every_node_with_shapes():
    drawing = draw(graph_module())
    svg = drawing._repr_mimebundle_()["image/svg+xml"]
    for text in ("x", "add", "sigmoid", "sum_", "torch.sigmoid", "float32 [2, 3]"):
        assert text in svg, text
    assert svg.count("<g id=\"edge") == 4


@needs_dot
def test_color_by_meta_key_adds_legend_and_colours(tmp_path):
    gm = graph_module()
    for node in gm.graph.nodes:
        node.meta["kernel"] = "k0" if node.op == "call_function" else None
    drawing = draw(gm, color_by="kernel", title="fusion groups")
    assert list(drawing.groups) == ["k0"]
    svg = drawing.svg()
    assert "fusion groups" in svg and "kernel=k0" in svg and "cluster_legend" in svg
    path = drawing.save(tmp_path / "g.png")
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_text_rendering_reads_like_code():
    text = GraphDrawing(graph_module().graph).text()
    assert text.splitlines() == [
        "x = input   # float32[2, 3]",
        "add = x + 1.0   # float32[2, 3]",
        "sigmoid = torch.sigmoid(add)   # float32[2, 3]",
        "sum_ = sigmoid.sum()   # float32[]",
        "return sum_",
    ]


def test_without_dot_prints_hint_once_and_falls_back(monkeypatch, capsys, tmp_path):
    import tutorcompile.viz.drawing as draw_mod
    monkeypatch.setattr(draw_mod.shutil, "which", lambda name: None)
    monkeypatch.setattr(draw_mod, "_warned", set())
    drawing = draw(graph_module())
    bundle = drawing._repr_mimebundle_()
    assert set(bundle) == {"text/plain"} and "torch.sigmoid(add)" in bundle["text/plain"]
    drawing._repr_mimebundle_()
    written = drawing.save(tmp_path / "g.svg")
    assert written.endswith("g.txt") and "sigmoid" in open(written).read()
    out = capsys.readouterr().out
    assert out.count(INSTALL_DOT) == 1 and out.strip() == INSTALL_DOT
    assert "apt-get install graphviz" in INSTALL_DOT


def test_dot_source_is_available_without_the_binary(monkeypatch, tmp_path):
    import tutorcompile.viz.drawing as draw_mod
    monkeypatch.setattr(draw_mod.shutil, "which", lambda name: None)
    path = draw(graph_module()).save(tmp_path / "g.dot")
    assert open(path).read().startswith("digraph")


def test_rejects_things_that_are_not_graphs():
    with pytest.raises(TypeError, match="needs a tutorcompile.fx Graph"):
        draw(torch.nn.Linear(2, 2))
