"""tutorcompile.aot.decomp -- the decompositions: torch-level calls -> prims, one table.

Each rule says how one torch call is built from prims, written once against the virtualized
``ops`` (see ``core.py`` for the idea at length). Importing this package imports every rule
module below, and each registers its rules into the one table, ``DECOMPOSITIONS``, that
``aot/prim_graph.py`` (``decompose``) runs over a graph.

::

    registry.py     DECOMPOSITIONS, register_decomposition, the argument helpers, and
                    extern_call (a call PyTorch runs, recorded as one node)
    helpers.py      building blocks several rule modules share (rounding, positions, detached)
    rng.py          dropout and random fills: eager's own draws, as extern ops
    core.py         the rules the course walks through: pointwise, casts, reductions,
                    softmax, views and indexing, factories, matmul, conv, attention, norms
    scan.py         products and running extremes in log2(n) steps
    math.py         the long tail of tensor math: trigonometry, rounding, norms, scatters...
    chebyshev.py    Chebyshev polynomials         einsum.py       torch.einsum
    foreach.py      torch._foreach_*: the per-tensor op on every element of the lists
    grid_sample.py  F.grid_sample                 index.py        advanced indexing
    masked.py       torch.masked reductions       nn.py           torch.nn.functional
    normal.py       the normal distribution's tails
    polygamma.py    polygamma of every order      special.py      Bessel functions
    sort.py         sort, argsort, topk, kthvalue, median, quantile by counting

The imports go one way: ``registry`` imports only the floors below ``aot`` (``fx``,
``ops``); ``helpers`` and ``rng`` import the registry; a rule module imports the registry,
``helpers`` and the rule modules listed above it that it builds on (``nn`` calls ``core``'s
``softmax``), and never the modules that use the table (``prim_graph``, ``aot_autograd``).
A rule that needs a rule of a module *above* it calls it through the table
(``DECOMPOSITIONS[torch.cumsum](...)``).

Mirrors: torch/_decomp/__init__.py (the table, ``register_decomposition``) and its rule
modules (torch/_decomp/decompositions.py, decompositions_for_rng.py).
"""

# Every rule module, imported to fill the table (in any order: each imports what it builds on)
from . import (  # noqa: F401
    chebyshev,
    core,
    einsum,
    foreach,
    grid_sample,
    index,
    masked,
    math,
    nn,
    normal,
    polygamma,
    rng,
    scan,
    sort,
    special,
)
from .core import apply_index, basic_index, batch_norm_functional, permute, t, transpose
from .helpers import detached
from .nn import batch_norm_with_update_functional, instance_norm_functional, leading_results
from .registry import DECOMPOSITIONS, extern_call, register_decomposition, target_name
from .rng import (
    RANDOM_FILLS,
    dropout_mask,
    dropout_reference,
    random_fill,
    random_fill_like,
    random_state,
    with_random_state,
)

__all__ = [
    "DECOMPOSITIONS", "RANDOM_FILLS", "apply_index", "basic_index", "batch_norm_functional",
    "batch_norm_with_update_functional", "detached", "dropout_mask", "dropout_reference",
    "extern_call", "instance_norm_functional", "leading_results", "permute", "random_fill",
    "random_fill_like", "random_state", "register_decomposition", "t", "target_name",
    "transpose", "with_random_state",
]
