"""Decompositions (torch-level calls -> prims): the old address of ``tutorcompile.aot.decomp``.

The rules, their table and the registry now live in the package ``tutorcompile/aot/decomp/``
(``registry.py`` owns ``DECOMPOSITIONS`` and ``register_decomposition``; ``core.py`` holds
the rules the course walks through, ``rng.py`` dropout, and one module each the long
tail). This module re-exports the package's public names so that code written against
``tutorcompile.aot.decompositions`` -- notebooks, exercises, tests -- keeps working.

Mirrors: torch/_decomp/decompositions.py, which PyTorch keeps beside torch/_decomp/__init__.py.
"""

from . import decomp
from .decomp import (  # noqa: F401  (re-exported)
    DECOMPOSITIONS,
    RANDOM_FILLS,
    apply_index,
    basic_index,
    batch_norm_functional,
    batch_norm_with_update_functional,
    detached,
    dropout_mask,
    dropout_reference,
    extern_call,
    instance_norm_functional,
    leading_results,
    permute,
    random_fill,
    random_fill_like,
    random_state,
    register_decomposition,
    t,
    target_name,
    transpose,
    with_random_state,
)

__all__ = decomp.__all__
