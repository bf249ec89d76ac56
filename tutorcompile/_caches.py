"""Every cache of the compiler, what it is keyed by, and ``tutorcompile.reset()``.

One call of a compiled function goes through up to five caches, one per layer, each keyed by
what the layer's output depends on (a sixth keeps timings that decide a compilation). Listed
here, in one place; each cache's own docstring points back to this table.

=====================  ==========================================  ============================
cache (owner)          key                                         holds
=====================  ==========================================  ============================
``eval_frame._CACHES`` the code object and the compile call's      per resume point, a list of
(stage 3, Dynamo)      ``Config.cache_key`` (backend, fullgraph,   guarded entries; the first
                       dynamic, mode, options); then each entry's  whose guards pass runs, in
                       **guards**: Python values, tensor metadata  compile order; at most
                       (TENSOR_MATCH), global state (grad mode,    ``dynamo.config.
                       autocast, function modes), aliasing         recompile_limit`` entries
``AOTCompiled.cache``  per input: shape, stride, dtype, device,    ``CompiledArtifacts``: the
(stage 4, AOT)         ``requires_grad`` (a constant by repr);     forward and backward
                       grad mode, ``module.training``, autocast;   compilations and how to run
                       the storage layout when an input is         them
                       written. ``AOTCompiled.symbolic``: those    (compilations for symbolic
                       without the dynamic sizes, then the shape   sizes, found by their shape
                       environment's guards                        guards)
``CompiledGraph.       per input: shape, stride, dtype, device     a ``_Variant``: kernels and
_variants`` (stage 5)  (``.symbolic``: one variant for all sizes,  the wrapper that calls them
                       its guards checked by AOT above)
``codecache.           ``graph_key``: the graph's content (ops,    a ``CompiledGraph``, shared
compiled_graphs``      constants by value, tensors by content),    by equal graphs (a block
(stage 5, weak)        input layouts, compile options,             repeated with other
                       ``inductor.config`` knobs                   weights)
``autotune.conv_       a convolution's call, sizes, dtypes,        the seconds it took on
layout_timings``       arguments, thread count                     contiguous tensors and on
(stage 5)                                                          channels-last copies
kernel files on disk   a hash of the source, the compiler's        C++ shared libraries
(``codecache``)        flags and version (C++); of the source      (``cpp/<hash>/``), Triton
                       (Triton). ``$TUTORCOMPILE_CACHE_DIR``       modules (``triton/``), kept
                                                                   across processes
=====================  ==========================================  ============================

**Each layer trusts the one above.** A key a layer would check per call is often pinned
already by the guards of the layer that calls it: Dynamo's TENSOR_MATCH guards fix the
shapes, strides and ``requires_grad`` AOT would key on. Then the lower layer hands its
caller the compiled function itself -- ``fastpath.FastPath.direct()`` (``direct_dynamic()``
for sizes the guards leave free) -- and a cache hit checks Dynamo's guards and nothing else
(``bench.call_path`` shows it: the guard function, then the wrapper).

**What ``tutorcompile.reset()`` forgets.** Every in-process cache: ``reset`` lives in Dynamo
(stage 3), whose cache of guarded graphs it clears; caches of the floors above it
(Inductor's compiled graphs) register a ``clear`` here when they are imported, so a reset
forgets them too without Dynamo importing Inductor -- a notebook's ``tc.reset()`` then
shows a compilation from the start, as ``torch._dynamo.reset()`` does. Kernel files on disk
stay: they are keyed by their content, so they are never stale.
"""

from __future__ import annotations

from collections.abc import Callable

_CLEARS: list[Callable[[], None]] = []


def on_reset(clear: Callable[[], None]) -> None:
    """Call ``clear`` whenever ``tutorcompile.reset()`` runs."""
    _CLEARS.append(clear)


def reset_registered() -> None:
    for clear in _CLEARS:
        clear()
