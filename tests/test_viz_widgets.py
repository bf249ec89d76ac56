"""Widgets driven from plain Python: no browser, no kernel -- ipywidgets models and callbacks.

Each test sets a control's ``.value`` (or clicks a button) the way the front end would, and
checks what the other widgets then hold. The partition view is checked against PyTorch's
own AOTAutograd (bytes computed here from the torch.fx graphs) and against stage 4's report.
"""

import importlib.util
import shutil

import pytest
import torch

import tutorcompile as tc
from tutorcompile import viz
from tutorcompile.viz.stages import StageOutput

pytestmark = pytest.mark.foundation
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` not found")
has_dynamo = importlib.util.find_spec("tutorcompile.dynamo") is not None
has_aot = importlib.util.find_spec("tutorcompile.aot") is not None
needs_dynamo = pytest.mark.skipif(not has_dynamo, reason="stage 3 (tutorcompile.dynamo) absent")
needs_aot = pytest.mark.skipif(not has_aot, reason="stage 4 (tutorcompile.aot) absent")


def gelu_tanh(x, b):
    y = x + b
    return 0.5 * y * (1 + torch.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))


def with_break(x, b):
    y = torch.nn.functional.gelu(x + b)
    print("a graph break")
    return y * torch.sigmoid(y)


def scaled_relu(x, n):
    return torch.relu(x) * n


# --- GraphExplorer ----------
@needs_dynamo
def test_explorer_stage_and_graph_selection_update_code_and_drawing():
    x = torch.randn(4, 8)
    ex = viz.GraphExplorer(with_break, x, torch.randn(8))
    ex.widget()
    assert list(ex.stages)[0] == "captured"
    assert list(ex.graph_dropdown.options) == ["graph 1", "graph 2"]
    assert "gelu" in ex.code_html.value and "sigmoid" not in ex.code_html.value
    ex.graph_dropdown.value = "graph 2"
    assert ex.graph_name == "graph 2"
    assert "sigmoid" in ex.code_html.value and "gelu" not in ex.code_html.value
    assert "sigmoid" in ex.table_html.value
    assert "print" in ex.panels_html.value  # the graph break and its source line
    assert "check_tensor(L[" in ex.panels_html.value  # guards
    # no input needs grad: no autograd stages
    assert "eager autograd" not in ex.stages and "aot (torch)" not in ex.stages


LINEAR = torch.nn.Linear(4, 3)


def global_module_head(x):   # a function using a module it does not take as an argument
    return torch.relu(LINEAR(x)).softmax(-1)


@needs_aot
def test_stages_of_a_function_closing_over_a_module_draw_symbolic_sizes_when_marked():
    from tutorcompile.viz.stages import run_stages
    x = torch.randn(8, 4, requires_grad=True)
    tc.mark_dynamic(x, 0)
    stages = run_stages(global_module_head, (x,))
    # (PyTorch's own aot_function refuses a function closing over a real parameter -- "convert
    # all Tensors to FakeTensors first" -- and its stage shows that error; ours lift it)
    for name, out in stages.items():
        assert name == "aot (torch)" or "error" not in out.panels, (name, out.panels)
    shapes = {graph.name: [str(n.meta["tensor_meta"].shape) for n in graph.graph.nodes
                           if hasattr(n.meta.get("tensor_meta"), "shape")]
              for out in (stages["aot"], stages["fused kernels"]) for graph in out.graphs}
    assert "SymShape([s0, 4])" in shapes["decomposed (prims)"]   # the marked batch
    assert "SymShape([s0, 3])" in shapes["backward"]
    assert "SymShape([s0, 3])" in shapes["prims by kernel"]
    assert "s0 = x.size(0)" in stages["fused kernels"].panels["output code"]


@needs_dot
def test_explorer_drawing_is_svg_of_the_selected_graph():
    x = torch.randn(4, 8, requires_grad=True)
    ex = viz.GraphExplorer(gelu_tanh, x, torch.randn(8))
    ex.widget()
    assert "<svg" in ex.drawing_html.value
    ex.stage_dropdown.value = "aot (torch)"
    assert list(ex.graph_dropdown.options) == ["joint", "forward", "backward"]
    assert "tangents" in ex.drawing_html.value  # the joint graph has tangent inputs
    ex.graph_dropdown.value = "backward"
    assert "saved" in ex.drawing_html.value  # coloured by partition, with a legend


def test_explorer_node_details_show_op_shape_source_and_stage_meta():
    x = torch.randn(4, 8, requires_grad=True)
    ex = viz.GraphExplorer(gelu_tanh, x, torch.randn(8))
    ex.widget()
    ex.node_dropdown.value = "add"
    html = ex.node_html.value
    assert "call_function" in html and "[4, 8]" in html and "float32" in html
    assert "y = x + b" in html  # node.meta["source"]: the user's line
    ex.stage_dropdown.value = "aot (torch)"
    ex.graph_dropdown.value = "forward"
    saved = [n.name for n in ex.current().graph.nodes if n.meta.get("partition") == "saved"]
    assert saved
    ex.node_dropdown.value = saved[0]
    assert "partition" in ex.node_html.value and "saved" in ex.node_html.value
    details = ex.node_details(saved[0])
    assert details["partition"] == "saved"


def test_explorer_next_and_previous_walk_every_graph_in_pipeline_order():
    x = torch.randn(3, 5, requires_grad=True)
    ex = viz.GraphExplorer(gelu_tanh, x, torch.randn(5))
    ex.widget()
    assert ex.previous_button.disabled and not ex.next_button.disabled
    seen = [(ex.stage, ex.graph_name)]
    while not ex.next_button.disabled:
        ex.next_button.click()
        seen.append((ex.stage_dropdown.value, ex.graph_dropdown.value))
    assert seen == ex.views()
    assert seen[-1][0] == list(ex.stages)[-1]
    ex.previous_button.click()
    assert (ex.stage, ex.graph_name) == seen[-2]


def test_explorer_without_widgets_and_save(tmp_path):
    x = torch.randn(3, 5, requires_grad=True)
    ex = viz.GraphExplorer(gelu_tanh, x, torch.randn(5))
    assert ex.views()[0][0] == "captured"
    ex.select("aot (torch)", "backward")
    assert "tangents" in ex.code()
    with pytest.raises(KeyError):
        ex.select("no such stage")
    paths = ex.save(tmp_path)
    assert any(p.endswith("backward.py") for p in paths)
    assert all((tmp_path / p.split("/")[-1]).exists() for p in paths)
    assert "aot (torch)" in str(ex)


def test_register_stage_adds_a_stage_and_a_broken_one_shows_its_error():
    def doubled(fn, inputs):
        from tutorcompile.fx import symbolic_trace
        gm = symbolic_trace(fn)
        return [("traced twice", gm)]

    def broken(fn, inputs):
        raise RuntimeError("kernel lowering not written yet")

    viz.register_stage("test: extra", doubled, order=99)
    viz.register_stage("test: broken", broken, order=98)
    try:
        assert viz.registered_stages()[-2:] == ["test: broken", "test: extra"]
        ex = viz.GraphExplorer(scaled_relu, torch.randn(2, 2), 3)
        assert [g.name for g in ex.stages["test: extra"].graphs] == ["traced twice"]
        assert "kernel lowering not written yet" in ex.stages["test: broken"].panels["error"]
        ex.widget()
        ex.stage_dropdown.value = "test: broken"
        assert "kernel lowering not written yet" in ex.panels_html.value
        assert "made no graph" in ex.drawing_html.value
    finally:
        viz.unregister_stage("test: extra")
        viz.unregister_stage("test: broken")
    assert "test: extra" not in viz.registered_stages()


def test_capture_falls_back_to_symbolic_trace(monkeypatch):
    from tutorcompile.viz import stages
    monkeypatch.setattr(stages, "_dynamo_explain", lambda: None)
    out = stages.capture(scaled_relu, (torch.randn(2, 3), 2))
    assert isinstance(out, StageOutput) and "symbolic_trace" in out.note
    assert "relu" in out.graphs[0].code


# --- Timing ----------
def test_timing_run_button_fills_table_and_chart_with_every_candidate():
    calls = []

    def make_inputs(n):
        calls.append(n)
        return (torch.randn(n, n),)

    candidates = {"eager": torch.relu, "clamp": lambda x: x.clamp(min=0),
                  "where": lambda x: torch.where(x > 0, x, torch.zeros(()))}
    t = viz.Timing(candidates, make_inputs=make_inputs, sizes=[8, 16], min_time=0.0,
                   repeat=3, warmup=1)
    t.widget()
    assert t.comparison is None and calls == []
    t.size_slider.value = 16  # moving the slider measures nothing
    assert calls == [] and "press Run" in t.status.value
    t.run_button.click()
    assert calls == [16]
    assert [r["name"] for r in t.rows()] == ["eager", "clamp", "where"]
    for name in candidates:
        assert f">{name}</td>" in t.table_html.value
    assert "size 16" in t.table_html.value
    (out,) = t.output.outputs
    assert out["data"]["image/png"]  # the bar chart
    assert not t.run_button.disabled
    t.size_slider.value = 8
    assert calls == [16]
    t.run_button.click()
    assert calls == [16, 8] and sorted(t.history) == [8, 16]
    t.size_slider.value = 16  # an earlier result is shown again, not re-measured
    assert calls == [16, 8] and "size 16" in t.table_html.value


def test_timing_from_a_script(tmp_path):
    t = viz.Timing({"a": torch.neg, "b": lambda x: -x}, torch.randn(4), min_time=0.0, repeat=3)
    assert "not run yet" in str(t)
    comparison = t.run()
    assert set(comparison.measurements) == {"a", "b"}
    assert t.save(tmp_path / "t.png").endswith(".png")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert "median" in open(t.save(tmp_path / "t.txt")).read()
    with pytest.raises(ValueError):
        viz.Timing({"a": torch.neg}, make_inputs=lambda n: (torch.randn(n),))


def test_timing_refuses_a_wrong_candidate():
    t = viz.Timing({"neg": torch.neg, "wrong": torch.abs}, torch.randn(16), min_time=0.0)
    t.widget()
    t.run_button.click()
    assert t.comparison is None
    assert "does not compute" in t.status.value and not t.run_button.disabled


# --- guard inspector ----------
@needs_dynamo
@pytest.mark.parametrize("change, expected", [
    ((torch.randn(5, 3), 2), "size mismatch at dim 0: expected 4, got 5"),
    ((torch.randn(4, 3, dtype=torch.float64), 2), "dtype"),
    ((torch.randn(4, 3, requires_grad=True), 2), "requires_grad"),
])
def test_guard_inspector_finds_the_failing_tensor_guard(change, expected):
    report = viz.inspect_guards(scaled_relu, (torch.randn(4, 3), 2), change)
    (failing,) = report.failing
    assert failing.kind == "TENSOR_MATCH" and "L['x']" in failing.expr
    assert expected in failing.reason
    assert expected in report.first_failure  # Dynamo's own reason agrees
    assert any("Recompiling" in line for line in report.recompile_log)


@needs_dynamo
def test_guard_inspector_constant_change_and_reuse():
    x = torch.randn(4, 3)
    report = viz.inspect_guards(scaled_relu, (x, 2), (x, 3))
    (failing,) = report.failing
    assert failing.expr == "type(L['n']) is int and L['n'] == 2"
    same = viz.inspect_guards(scaled_relu, (x, 2), (torch.randn(4, 3), 2))
    assert same.reused and same.recompile_log == []
    assert "all guards pass" in same.text()


@needs_dynamo
def test_guard_inspector_widget_switches_between_changes():
    x = torch.randn(4, 3)
    gi = viz.GuardInspector(scaled_relu, (x, 2), {"batch 6": (torch.randn(6, 3), 2),
                                                  "n = 3": (x, 3)})
    gi.widget()
    assert "size mismatch" in gi.report_html.value
    gi.change_dropdown.value = "n = 3"
    assert "L[&#x27;n&#x27;] == 2" in gi.report_html.value
    assert "size mismatch" not in gi.report_html.value


# --- partition view ----------
def _torch_saved_bytes(partitioner):
    """Saved bytes read straight from PyTorch's backward graph (independent of viz)."""
    from functorch.compile import (
        aot_function,
        default_partition,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )
    graphs = {}

    def bw(gm, _):
        graphs["bw"] = gm
        return make_boxed_func(gm.forward)

    cut = default_partition if partitioner == "default" else \
        min_cut_rematerialization_partition
    x = torch.randn(32, 32, requires_grad=True)
    b = torch.randn(32, requires_grad=True)
    f = aot_function(gelu_tanh, fw_compiler=lambda gm, _: make_boxed_func(gm.forward),
                     bw_compiler=bw, partition_fn=cut)
    f(x, b).sum().backward()
    vals = [n.meta["val"] for n in graphs["bw"].graph.nodes
            if n.op == "placeholder" and not n.name.startswith("tangents")]
    return sum(v.numel() * v.element_size() for v in vals)


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_partition_view_of_torch_matches_torch_saved_bytes(partitioner):
    x = torch.randn(32, 32, requires_grad=True)
    b = torch.randn(32, requires_grad=True)
    view = viz.partition_view(gelu_tanh, x, b, partitioner=partitioner, source="torch")
    assert view.saved_bytes == _torch_saved_bytes(partitioner)
    assert x.grad is None  # inputs were copied
    kinds = {n.meta["partition"] for n in view.backward.graph.nodes if n.op != "output"}
    assert {"saved", "tangent", "backward"} <= kinds
    joint = {n.meta.get("partition") for n in view.joint.graph.nodes}
    assert {"forward", "backward", "saved"} <= joint
    assert len(view.rows()) == len(view.saved)


def test_compare_partitions_min_cut_saves_less_and_recomputes_more():
    x = torch.randn(32, 32, requires_grad=True)
    b = torch.randn(32, requires_grad=True)
    comparison = viz.compare_partitions(gelu_tanh, x, b, source="torch")
    default, min_cut = comparison.rows()
    assert min_cut["saved_bytes"] < default["saved_bytes"]
    assert min_cut["recomputed"] > default["recomputed"]
    assert "min_cut" in comparison.table()
    comparison.widget()
    shown = comparison.view_box.children[0].children[0].value
    assert "default partitioner" in shown
    comparison.partitioner_dropdown.value = "min_cut"
    assert "min_cut partitioner" in comparison.view_box.children[0].children[0].value


@needs_aot
@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_partition_view_counts_the_bytes_stage4_reports(partitioner, tmp_path):
    x = torch.randn(64, 64, requires_grad=True)
    b = torch.randn(64, requires_grad=True)
    view = viz.partition_view(gelu_tanh, x, b, partitioner=partitioner)
    assert view.report is not None
    assert view.saved_bytes == view.report.saved_bytes
    assert [s.nbytes for s in view.saved] == [s[3] for s in view.report.saved]
    assert view.forward_ops == view.report.forward_ops
    assert view.backward_ops == view.report.backward_ops
    widget = view.widget()
    summary = widget.children[0].value
    assert "total" in summary and str(len(view.saved)) in view.summary()
    paths = view.save(tmp_path)
    assert "summary.txt" in paths[-1]


def test_explorer_leaves_a_modules_buffers_as_they_were():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    bn = model[1]
    mean, count = bn.running_mean.clone(), bn.num_batches_tracked.clone()
    ex = viz.GraphExplorer(model, torch.randn(5, 4))
    assert "captured" in ex.stages and "eager autograd" in ex.stages  # parameters need grad
    assert torch.equal(bn.running_mean, mean) and torch.equal(bn.num_batches_tracked, count)


# --- fusion view ----------
has_inductor = importlib.util.find_spec("tutorcompile.inductor") is not None


@pytest.mark.skipif(not (has_aot and has_inductor), reason="stages 4 and 5 are needed")
def test_fusion_view_marks_every_prim_with_its_kernel_and_computes_like_eager(tmp_path):
    x, b = torch.randn(16, 32), torch.randn(32)
    view = viz.fusion_view(gelu_tanh, x, b)
    computing = [n for n in view.graph_module.graph.nodes if n.op == "call_function"]
    assert computing and all("kernel" in n.meta for n in computing)
    assert sum(len(nodes) for nodes in view.kernels.values()) == len(computing)
    assert len(view.kernels) == len(view.compiled.kernel_sources)
    for kernel in view.kernels:
        assert kernel in view.output_code
    out = view.compiled(x, b)
    out = out[0] if isinstance(out, (tuple, list)) else out
    torch.testing.assert_close(out, gelu_tanh(x, b), rtol=1e-5, atol=1e-5)
    unfused = viz.fusion_view(gelu_tanh, x, b, fusion=False)
    assert len(unfused.kernels) > len(view.kernels) == 1  # pointwise chain: one kernel
    tabs = view.widget()
    assert list(tabs.titles) == ["kernels", "fusion report", "output code"]
    assert [p.rsplit("/", 1)[-1] for p in view.save(tmp_path)][1:] == [
        "fusion_report.txt", "output_code.txt"]


# --- CUDA Graph view ---------
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cudagraphs_view_finds_the_wrappers_and_says_why_they_skipped(backend):
    import tutorcompile as tc
    from tutorcompile.cudagraphs import NO_CUDA
    tc.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    compiled = tc.compile(model, backend=backend, mode="reduce-overhead")
    with torch.no_grad():
        compiled(torch.randn(2, 8))
    view = viz.cudagraphs_view(compiled)
    assert len(view.graphs) == 1
    (row,) = view.rows()
    if not torch.cuda.is_available():
        assert row["recorded"] == 0 and row["skipped"] == [NO_CUDA]
        assert NO_CUDA in view.summary()
    assert "<table>" in view.to_html()
    assert view.widget().value == view.to_html()
    tc.reset()


def test_cudagraphs_view_of_a_default_compile_says_there_is_nothing_to_show():
    import tutorcompile as tc
    tc.reset()
    compiled = tc.compile(lambda x: x.sin(), backend="eager")
    compiled(torch.randn(3))
    assert "mode='reduce-overhead'" in viz.cudagraphs_view(compiled).summary()
    tc.reset()
