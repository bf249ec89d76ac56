"""Which C callables may be *run while tracing*: the pure ones, folded on constants.

A function written in Python is traced into (inlined), whatever library it comes from. A
function written in C cannot be: the tracer sees only its result. When its arguments are
Python constants and it is *pure* -- its result depends on nothing but its arguments, and it
changes nothing -- calling it now, for real, gives the value every call of the compiled code
would compute, so the result becomes a constant of the graph (``str.isalnum("a")`` is
``True`` in every run). A C function that is not known to be pure stays a graph break, with
its name in the reason: folding it could freeze a value that changes (``time.time()``) or
skip a side effect (``random.random()`` advances a generator).

Purity is decided by *where a callable lives*, not by listing callables one by one:

* methods of the immutable builtin types (``str``, ``bytes``, ``int``, ``float``,
  ``complex``, ``bool``, ``tuple``, ``frozenset``, ``range``, ``slice``...) in every spelling
  -- bound (``"a".isalnum``), unbound (``str.isalnum``), reached with ``getattr``, or
  alternate constructors (``int.from_bytes``, ``str.maketrans``, ``bytes.fromhex``);
* every function of modules that hold only pure functions (``math``, ``cmath``,
  ``operator`` but for the ones that write into an argument, ``unicodedata``, SciPy's
  pocketfft...);
* the builtins that are functions of their arguments (``len``, ``abs``, ``ord``, ``repr``,
  ``sorted``...), and a few single functions elsewhere (``sys.intern``);
* classes whose instances are immutable descriptions made from the arguments alone
  (``torch.finfo``, ``np.iinfo``, ``np.dtype``): :func:`is_pure_class`.

Calls that only report (``warnings.warn``, a logger's ``warning``...) are in
:data:`REPORTING`: made after the graph with the values it computed, never a break.

Arguments count as constants only when they are immutable (a list is copied by
``as_python_constant``: a function writing into it would write into the copy), which
:func:`immutable_constant` decides.

Mirrors: torch/_dynamo/trace_rules.py (which callables are inlined, folded, or break) and the
constant folding of ``BuiltinVariable`` in torch/_dynamo/variables/builtin.py.
"""

from __future__ import annotations

import builtins
import logging
import operator
import re
import sys
import types
import warnings
from typing import Any

import torch

# Builtin types whose instances cannot change: any method of theirs, given constants, is a
# function of its arguments (each returns a new object, never mutating the receiver).
IMMUTABLE_TYPES: frozenset[type] = frozenset({
    str, bytes, int, float, complex, bool, tuple, frozenset, range, slice, type(None),
    type(Ellipsis), type(NotImplemented), re.Pattern, re.Match,
})

# Modules every function of which is pure (given immutable arguments).
PURE_MODULES: frozenset[str] = frozenset({
    "math", "cmath", "operator", "_operator", "unicodedata", "binascii", "_struct",
    "_bisect",
    # SciPy's pocketfft: sizes an FFT is fast at (``scipy.fft.next_fast_len``, its
    # ``good_size``), and transforms that take arrays (never immutable constants)
    "scipy.fft._pocketfft.pypocketfft",
})

# Functions of ``operator`` that write into their first argument (``iadd`` on a list extends
# it): pure only when that argument is immutable, which the constant check already demands,
# and never when it is a container tracker -- so they are listed to keep the rule explicit.
MUTATING_OPERATORS: frozenset[Any] = frozenset({
    operator.setitem, operator.delitem, operator.iadd, operator.iand, operator.iconcat,
    operator.ifloordiv, operator.ilshift, operator.imatmul, operator.imod, operator.imul,
    operator.ior, operator.ipow, operator.irshift, operator.isub, operator.itruediv,
    operator.ixor,
})

# Builtins that compute a value from their arguments alone.
PURE_BUILTINS: frozenset[Any] = frozenset({
    abs, all, any, ascii, bin, bool, bytes, callable, chr, complex, divmod, float, format,
    frozenset, hash, hex, int, isinstance, issubclass, len, max, min, oct, ord, pow, repr,
    round, sorted, str, sum, tuple, list, dict, set, reversed, enumerate, zip, range, slice,
    type, sys.intern,
})

# Functions of impure modules that are pure all the same; the ``re`` functions are written
# in Python, around a cache of compiled patterns, but compute from their arguments alone
# (a pattern, and the match of a constant string, are immutable values).
PURE_FUNCTIONS: frozenset[Any] = frozenset({
    sys.intern, sys.getrecursionlimit, re.compile, re.match, re.fullmatch, re.search,
    re.findall, re.split, re.sub, re.subn, re.escape,
})

# Classes whose instances are immutable descriptions computed from the constructor's
# arguments alone (numerical limits of a dtype, a dtype): made from constants, the instance
# is a constant. NumPy's are named, not imported: they count only once NumPy is loaded.
PURE_CLASSES: frozenset[Any] = frozenset({torch.finfo, torch.iinfo})
PURE_NUMPY_CLASSES: tuple[str, ...] = ("finfo", "iinfo", "dtype")


def is_pure_class(cls: Any) -> bool:
    """Is constructing ``cls`` from immutable constants pure (``np.finfo(np.float32)``)?"""
    if cls in PURE_CLASSES:
        return True
    numpy = sys.modules.get("numpy")
    return numpy is not None and any(cls is getattr(numpy, name, None)
                                     for name in PURE_NUMPY_CLASSES)


def is_pure_instance(value: Any) -> bool:
    """Is ``value`` what a pure class makes (``np.finfo(...)``, a NumPy dtype)?"""
    numpy = sys.modules.get("numpy")
    classes = [*PURE_CLASSES, *([getattr(numpy, n) for n in PURE_NUMPY_CLASSES]
                                if numpy is not None else [])]
    return isinstance(value, tuple(classes)) and (
        numpy is None or not isinstance(value, numpy.dtype) or immutable_constant(value))


C_CALLABLE_TYPES = (types.BuiltinFunctionType, types.MethodDescriptorType,
                    types.WrapperDescriptorType, types.ClassMethodDescriptorType,
                    types.MethodWrapperType)


def owner_of(fn: Any) -> Any:
    """Where a C callable lives: the class of an unbound method (``str`` for
    ``str.isalnum``), the class or instance a method is bound to (``int`` for
    ``int.from_bytes``, ``"a"`` for ``"a".upper``), or the module of a function."""
    objclass = getattr(fn, "__objclass__", None)
    if objclass is not None:
        return objclass
    return getattr(fn, "__self__", None)


def is_pure(fn: Any) -> bool:
    """May ``fn`` be called while tracing when its arguments are immutable constants?"""
    try:
        if fn in PURE_BUILTINS or fn in PURE_FUNCTIONS:
            return True
        if fn in MUTATING_OPERATORS:
            return False
    except TypeError:  # unhashable
        return False
    if not isinstance(fn, C_CALLABLE_TYPES):
        return False
    owner = owner_of(fn)
    if isinstance(owner, types.ModuleType):
        return owner.__name__ in PURE_MODULES
    if isinstance(owner, type):
        return owner in IMMUTABLE_TYPES or is_structseq(owner)
    if owner is None:  # a static method of a builtin class (``str.maketrans``)
        cls = getattr(builtins, getattr(fn, "__qualname__", "").partition(".")[0], None)
        return cls in IMMUTABLE_TYPES
    return (type(owner) in IMMUTABLE_TYPES or is_structseq(type(owner))) and \
        immutable_constant(owner)


def is_structseq(cls: type) -> bool:
    """A C "struct sequence" type -- a tuple with named fields, such as ``sys.version_info``
    or ``os.stat_result`` -- whose methods are tuple's: ``sys.version_info >= (3, 10)``."""
    return issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")


def immutable_constant(value: Any) -> bool:
    """A value no code can change: numbers, strings, ``None``... and tuples/frozensets of
    them (a tuple holding a list is not: the list inside can be written to)."""
    if isinstance(value, (tuple, frozenset)):
        return all(immutable_constant(v) for v in value)
    if isinstance(value, slice):
        return all(immutable_constant(v) for v in (value.start, value.stop, value.step))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        return not isinstance(value, numpy.object_)
    if numpy is not None and isinstance(value, numpy.dtype):
        return value.fields is None  # (a structured dtype's field names can be renamed)
    return type(value) in IMMUTABLE_TYPES or isinstance(value, type) or value is None \
        or isinstance(value, (types.BuiltinFunctionType, types.FunctionType)) \
        or type(value).__module__ == "torch" and type(value).__name__ in (
            "dtype", "device", "layout", "memory_format")


def builtin_name(fn: Any) -> str:
    """``str.isalnum``, ``math.comb``, ``len``: how a reason names a C callable."""
    owner = owner_of(fn)
    name = getattr(fn, "__name__", repr(fn))
    if isinstance(owner, types.ModuleType) and owner is not builtins:
        return f"{owner.__name__.lstrip('_')}.{name}"
    if isinstance(owner, type):
        return f"{owner.__name__}.{name}"
    if owner is not None and not isinstance(owner, types.ModuleType):
        return f"{type(owner).__name__}.{name}"
    return name


def _kernel_choice_contexts() -> frozenset[Any]:
    import torch.nn.attention
    return frozenset({torch.nn.attention.sdpa_kernel, torch.backends.cuda.sdp_kernel})


# Context managers that only choose which kernel computes the same function (the SDPA
# backends allowed inside the block): a graph region changes which kernel its own code
# runs, not what it computes, so they trace as ``contextlib.nullcontext`` (as PyTorch's
# Dynamo lets the compiled graph pick its attention kernel)
KERNEL_CHOICE_CONTEXTS: frozenset[Any] = _kernel_choice_contexts()

# Context managers that only label the nodes an FX tracer records inside them
# (``torch.fx.traceback.annotate({"fallback_to_eager": True})`` around an op in
# ``flex_attention``'s block-mask code): they change no value, and our graph keeps no such
# labels, so they trace as ``contextlib.nullcontext`` too
ANNOTATING_CONTEXTS: frozenset[Any] = frozenset({torch.fx.traceback.annotate})


# Calls that only report -- they write to a log or the warnings machinery and compute
# nothing a graph needs -- made after the graph instead of breaking it.
REPORTING: frozenset[Any] = frozenset({
    warnings.warn, logging.Logger.debug, logging.Logger.info, logging.Logger.warning,
    logging.Logger.warn, logging.Logger.error, logging.Logger.exception,
    logging.Logger.critical, logging.Logger.log,
})

# Functions whose call is a graph break the user asked for (``torch._dynamo.graph_break()``;
# ``torch.compiler`` has no spelling of its own): written in Python as ``pass``, they would
# be inlined into nothing
USER_GRAPH_BREAKS: frozenset[Any] = frozenset({torch._dynamo.graph_break})


def allowed_in_graph(value: Any) -> bool:
    """Was ``value`` given to ``torch.compiler.allow_in_graph`` (``torch._dynamo.
    allow_in_graph``)? Its author asks that a call of it be one node of the graph, not traced
    into (einx marks each of its ops so: their Python builds and caches an expression graph
    per call signature). PyTorch keeps the registry, by ``id``, in its own trace rules --
    which exist only once something imported them, as ``allow_in_graph`` does."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    if rules is None or isinstance(value, type) or not callable(value):
        return False
    return id(value) in rules._allowed_callable_ids
