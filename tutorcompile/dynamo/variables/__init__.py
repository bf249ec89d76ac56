"""Variable trackers: what the symbolic interpreter knows about each value.

When the translator runs a function symbolically, the VM's stack and locals hold
*variable trackers* instead of real values. Each tracker knows what kind of value it stands
for and how operations on it are captured:

==========================  ================================================================
TensorVariable              a tensor: a graph node plus a fake example value (shape, dtype)
SymIntVariable              an integer that depends on a dynamic size (a graph node)
ConstantVariable            a Python constant -- operations on it are folded while tracing
TupleVariable, ListVariable sequences of trackers (lists are mutable, journaled)
ConstDictVariable           a dict with constant keys
ListIteratorVariable        an iterator over a known list of trackers
MapVariable, ZipVariable... lazy iterators: ``map``, ``filter``, ``zip``, ``enumerate``
GeneratorVariable           a generator: a suspended frame, resumed by ``next``
UserFunctionVariable        a Python function: calls are *inlined* (traced through)
NestedUserFunctionVariable  a closure created while tracing (MAKE_FUNCTION)
CellVariable                a closure cell created while tracing
NNModuleVariable            an nn.Module: ``__call__`` inlines ``forward``; parameters and
                            buffers become graph inputs (like ``inline_inbuilt_nn_modules``)
TorchFunctionVariable       ``torch.*``, ``torch.nn.functional.*``: one graph node per call
BuiltinVariable             ``len``, ``isinstance``, ``range``, ``print`` ... handled one by one
UserDefinedObjectVariable   any other object: attributes read (and guarded); writes and
                            ``del`` wait in ``pending``, replayed on it after the graph
GlobalsVariable             a module's globals the frame assigns to (``global N; N = v``),
                            replayed into the module after the graph
==========================  ================================================================

Values that come from outside the traced code carry a *source* (``source.py``); wrapping
them (``VariableBuilder`` in ``builder.py``) installs the guards that make reuse safe. Every
tracker can ``reconstruct`` the real value it stands for after the graph has run -- that is
how the frame's stack and locals are rebuilt at a graph break.

Modules, by kind (each mirrors the torch/_dynamo/variables/ file of the same name):

==============  ==========================================================================
base            ``VariableTracker``, ``Reconstructor``, a container method before its call
containers      constants and containers -- tuples, lists, ``torch.Size``, dicts, sets,
                deques, slices -- together, because folding a constant can give
                a container and a container's method a constant (mirrors constant.py,
                lists.py, dicts.py, sets.py)
tensor          tensors, dynamic sizes, tensor methods
functions       user functions and methods, closures, ``functools.partial``
torch           ``torch.*`` callables and the compile-time state seen while tracing
nn_module       ``nn.Module``
ctx_manager     grad mode, autocast regions
misc            cells, globals, Python modules, ``os.environ``, ``DELETED``
callables       user-defined classes and objects, ``super()``, dataclasses, and builtins
                (mirrors user_defined.py and builtin.py: kept together because the
                builtin handlers and the user-defined trackers call each other)
copying         ``copy.deepcopy`` and ``id()`` of trackers (guarded copies, real ids)
iter            iterators as values, lazily advanced: ``map``, ``zip``, generators
ndarray         NumPy code on tensors (``x.numpy()``, ``np.mean``): ``torch._numpy`` nodes
builder         ``VariableBuilder``: a value from outside (argument, global, attribute) made
                a tracker, with the guards that make reusing the graph safe
lazy            ``LazyVariable``: a frame's local wrapped only when the code first reads it
higher_order_ops  torch functions that take a function: ``vmap``/``grad``/``cond`` traced
                into bodies, ``checkpoint`` tagged for recompute, ``functional_call``
                with parameters swapped, ``associative_scan`` unrolled
==============  ==========================================================================

Mirrors: torch/_dynamo/variables/.
"""

from .base import *  # noqa: F403
from .base import __all__ as _base_all
from .callables import *  # noqa: F403
from .callables import __all__ as _callables_all
from .containers import *  # noqa: F403
from .containers import __all__ as _containers_all
from .copying import *  # noqa: F403
from .copying import __all__ as _copying_all
from .ctx_manager import *  # noqa: F403
from .ctx_manager import __all__ as _ctx_manager_all
from .functions import *  # noqa: F403
from .functions import __all__ as _functions_all
from .higher_order_ops import *  # noqa: F403 (registers the associative_scan handler)
from .iter import *  # noqa: F403
from .iter import __all__ as _iter_all
from .misc import *  # noqa: F403
from .misc import __all__ as _misc_all
from .ndarray import *  # noqa: F403
from .ndarray import __all__ as _ndarray_all
from .nn_module import *  # noqa: F403
from .nn_module import __all__ as _nn_module_all
from .tensor import *  # noqa: F403
from .tensor import __all__ as _tensor_all
from .torch import *  # noqa: F403
from .torch import __all__ as _torch_all

__all__ = (_base_all + _containers_all + _tensor_all + _functions_all + _torch_all
           + _nn_module_all + _ctx_manager_all + _misc_all + _callables_all + _copying_all
           + _iter_all + _ndarray_all)
