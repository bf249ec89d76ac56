"""Stage 5: fusion legality is decided on the IR, before any code is written (issue 37).

``fusion_refusal`` walks a would-be kernel's buffers in the order the kernel writers compute
them and says why they cannot be one kernel. Hand-built buffers check each reason; compiled
programs check that the verdict is what the kernel writers can write: a fusion the IR allows
generates, one it refuses is one the writers would refuse with the same words.
"""

import pytest
import torch

from tests.kernel_backends import on
from tutorcompile.inductor import examples, ir
from tutorcompile.inductor.codegen.common import KernelPlan
from tutorcompile.inductor.codegen.cpp import CppKernel
from tutorcompile.inductor.codegen.triton import TritonKernel
from tutorcompile.inductor.codegen.triton_template import TritonTemplateKernel
from tutorcompile.inductor.fusion_legality import fusion_refusal
from tutorcompile.inductor.lowering import lower_graph
from tutorcompile.inductor.scheduler import schedule
from tutorcompile.ops import PRIMS, ops, trace

pytestmark = pytest.mark.stage5

CPU = torch.device("cpu")


def layout(*size):
    return ir.FixedLayout.contiguous(size, torch.float32, CPU)


def pointwise(name, size, inner_fn):
    return ir.ComputedBuffer(name, layout(*size),
                             ir.Pointwise(tuple(size), torch.float32, CPU, inner_fn))


def row_sum(name, x):
    """``x.sum(1)`` of a 2-d buffer."""
    n, m = x.get_size()
    data = ir.Reduction((n,), torch.float32, CPU, lambda i: ir.load(x, i), src_shape=(n, m),
                        reduced_dims=(1,))
    return ir.ComputedBuffer(name, layout(n), data)


X = ir.InputBuffer("arg0", layout(4, 8))


def test_a_prim_that_is_not_pointwise_is_refused():
    odd = pointwise("buf0", (4, 8), lambda i: PRIMS["matmul"](ir.load(X, i), ir.load(X, i)))
    assert fusion_refusal([odd], {"buf0"}) == "matmul cannot appear inside a kernel"


def test_a_reduction_read_at_its_own_row_is_legal():
    total = row_sum("buf0", X)
    share = pointwise("buf1", (4, 8), lambda i: ops.div(ir.load(X, i), ir.load(total, i[:1])))
    assert fusion_refusal([total, share], {"buf1"}) is None


def test_a_reduction_read_before_it_is_computed_is_refused():
    total = row_sum("buf1", X)
    early = pointwise("buf0", (4, 8), lambda i: ops.div(ir.load(X, i), ir.load(total, i[:1])))
    # (out of dependency order on purpose: the kernel would store buf0 in buf1's loop)
    assert fusion_refusal([early, total], {"buf0", "buf1"}) == \
        "buf1 (a reduction) is read before it is computed"


def test_a_reduction_read_at_another_row_is_refused():
    total = row_sum("buf0", X)
    flipped = pointwise("buf1", (4, 8),
                        lambda i: ops.div(ir.load(X, i), ir.load(total, [3 - i[0]])))
    assert fusion_refusal([total, flipped], {"buf1"}) == \
        "the reduction buf0 is read at another row than the one being computed"


def template_and(epilogue_at):
    a, b = ir.InputBuffer("arg0", layout(8, 16)), ir.InputBuffer("arg1", layout(16, 8))
    product = ir.TemplateBuffer("buf0", layout(8, 8), a, b, None, (16, 16, 16, 4, 2))
    epilogue = pointwise("buf1", (8, 8), lambda i: ops.relu(ir.load(product, epilogue_at(i))))
    return [product, epilogue]


def test_a_template_epilogue_at_the_tile_is_legal():
    assert fusion_refusal(template_and(lambda i: i), {"buf1"}) is None


def test_a_template_epilogue_at_another_position_is_refused():
    assert fusion_refusal(template_and(lambda i: i[::-1]), {"buf1"}) == \
        "the epilogue reads the product buf0 at another position than the tile being computed"


def test_nothing_inlines_a_template():
    product, epilogue = template_and(lambda i: i)
    assert fusion_refusal([epilogue, product], {"buf1"}) == \
        "buf0 is a matmul template; only its own kernel computes it"


# -- the verdict is what the kernel writers can write -------------------------------------

def writer_refusal(buffers, stored, reshaped, language):
    """What generating the kernel says: None, or its FusionError's reason."""
    try:
        if isinstance(buffers[0], ir.TemplateBuffer):
            TritonTemplateKernel(list(buffers), stored, "check").generate()
            return None
        plan = KernelPlan.from_nodes(buffers, stored, reshaped)
        (TritonKernel if language == "triton" else CppKernel)(plan, "check").generate()
    except ir.FusionError as e:
        return str(e).replace("; the scheduler should have refused this fusion", "")
    return None


def permuted_norm(x, rows):
    """Each row divided by another row's sum: the sum is read at another row."""
    return ops.div(x, ops.index_select(ops.sum(x, (1,), keepdim=True), 0, rows))


def variance(x):
    return ops.add(ops.var(x, (1,), correction=0, keepdim=True), ops.mean(x, (1,), True))


PROGRAMS = [
    (examples.softmax, (torch.randn(16, 40),)),
    (examples.layernorm, (torch.randn(16, 40), torch.randn(40), torch.randn(40))),
    (examples.chain, (torch.randn(16, 40), torch.randn(40))),
    (permuted_norm, (torch.randn(16, 40), torch.arange(16).flip(0))),
    (variance, (torch.randn(16, 300),)),
]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("fn,args", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_the_ir_verdict_is_what_the_writers_can_write(fn, args, backend):
    args = on(backend, *args)
    sched = schedule(lower_graph(trace(fn, *args), args, backend), backend)
    verdicts = []
    pairs = [(g, g) for g in sched.groups] + [(a, b) for a, b, _ in sched.candidates()]
    for g1, g2 in pairs:
        if g1.is_extern or g2.is_extern:
            continue
        buffers = sched.merged(g1, g2) if g1 is not g2 else g1.buffers
        stored = sched.stored_names(buffers)
        for reshaped in (False, True):
            verdict = fusion_refusal(buffers, stored, reshaped)
            if g1 is g2:   # a kernel the scheduler made: always legal
                assert verdict is None
            assert writer_refusal(buffers, stored, reshaped, backend) == verdict
            verdicts.append(verdict)
    if fn is permuted_norm:   # (a refusal the walk finds, not the plan)
        assert "the reduction buf0 is read at another row than the one being computed" \
            in verdicts

