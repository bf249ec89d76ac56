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
them (:class:`VariableBuilder`) installs the guards that make reuse safe. Every tracker can
``reconstruct`` the real value it stands for after the graph has run -- that is how the
frame's stack and locals are rebuilt at a graph break.

Modules: ``base`` (the tracker base class, constants, containers), ``tensor`` (tensors,
dynamic sizes, tensor methods), ``misc`` (cells, globals, ``DELETED``) and ``callables``
(functions, modules, torch ops, builtins).

Mirrors: torch/_dynamo/variables/ (builder.py, tensor.py, constant.py, lists.py, dicts.py,
functions.py, nn_module.py, torch.py, builtin.py, user_defined.py).
"""

from .base import *  # noqa: F403
from .base import __all__ as _base_all
from .callables import *  # noqa: F403
from .callables import __all__ as _callables_all
from .misc import *  # noqa: F403
from .misc import __all__ as _misc_all
from .tensor import *  # noqa: F403
from .tensor import __all__ as _tensor_all

__all__ = _base_all + _tensor_all + _misc_all + _callables_all
