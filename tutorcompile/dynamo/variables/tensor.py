"""Tensor trackers: tensors (graph nodes with a fake example value), dynamic sizes and
tensor methods.

Mirrors: torch/_dynamo/variables/tensor.py.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from ..exc import TracedException, Unsupported
from ..source import AttrSource, Source
from .base import LATE_BOUND, VariableTracker
from .containers import ConstantVariable, SizeVariable


class TensorVariable(VariableTracker):
    """A tensor in the graph: ``node`` computes it, ``fake`` says its shape/dtype/device;
    for a graph input, ``real`` is the tensor itself (what a dict keyed by it holds)."""

    real: torch.Tensor | None = None

    def __init__(self, node: Any, fake: torch.Tensor, source: Source | None = None,
                 dynamic_dims: frozenset[int] = frozenset()):
        self.node, self.fake, self.source = node, fake, source
        self.dynamic_dims = dynamic_dims  # for graph inputs: which dims are symbolic

    def python_type(self):
        return type(self.fake) if not isinstance(self.fake, torch.Tensor) else torch.Tensor

    def as_proxy(self):
        return self.node

    def example(self):
        return self.fake

    def truth(self, tx):
        raise Unsupported("data-dependent control flow: the truth value of a tensor "
                          "(`if tensor:` / `while tensor:` / `and`/`or` on a tensor)")

    def size_vars(self, tx) -> list[VariableTracker]:
        return [self.size_var(tx, d) for d in range(self.fake.dim())]

    def size_var(self, tx, dim: int) -> VariableTracker:
        if tx.output.is_dynamic_tensor(self) and (self.source is None or
                                                  dim in self.dynamic_dims):
            return tx.output.size_symint(self, dim)
        return ConstantVariable(int(self.fake.shape[dim]))

    def var_getattr(self, tx, name):
        f = self.fake
        if name in ("shape",):
            return SizeVariable(self.size_vars(tx))
        if name in ("dtype", "device", "layout", "requires_grad", "is_cuda", "is_sparse",
                    "is_leaf", "is_quantized", "is_meta", "is_nested", "is_cpu", "is_mps",
                    "is_mkldnn", "is_xpu"):  # (nn.MultiheadAttention reads is_nested)
            return ConstantVariable(getattr(f, name))
        if name == "ndim":
            return ConstantVariable(f.dim())
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            return tx.output.create_node("call_function", getattr, (self, ConstantVariable(
                name)), {})
        if name == "data":  # the same storage, cut from autograd: an aliasing detach
            return tx.output.create_node("call_method", "detach", (self,), {})
        if name == "grad" and self.source is not None and self.node.op == "placeholder":
            # a graph input's gradient as it is when the call comes (None, or a tensor:
            # an input of its own), reached and guarded through the input's source
            real = tx.output.input_values[tx.output.input_nodes.index(self.node)]
            return tx.wrap_nested(real.grad, AttrSource(self.source, "grad"))
        if name == "grad_fn" and not f.requires_grad:
            # ``t.grad_fn is None`` of a tensor that does not require grad: it has none
            # (whether it does is part of every tensor's guard and of the fake's metadata)
            return ConstantVariable(None)
        if name in ("grad", "_version", "grad_fn", "_base"):
            raise Unsupported(f"reading tensor.{name} (autograd state is not captured)")
        attr = getattr(torch.Tensor, name, None)
        if callable(attr):
            return TensorMethodVariable(self, name)
        if attr is None and self.source is None and self.node.op != "placeholder" and \
                not hasattr(self.fake, name):
            # a tensor the graph made has no attribute of its own (an assignment to one is a
            # break): the read fails as in eager, so ``getattr(t, name, default)`` and
            # ``hasattr`` answer from the class
            raise TracedException(AttributeError(
                f"'Tensor' object has no attribute {name!r}"))
        raise Unsupported(f"tensor attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        return TensorMethodVariable(self, name).call_function(tx, args, kwargs)

    def unpack(self, tx):
        n = self.size_var(tx, 0)
        if not n.is_python_constant():
            raise Unsupported("iterating over a tensor with a dynamic first dimension")
        return [tx.output.create_node("call_function", operator.getitem,
                                      (self, ConstantVariable(i)), {})
                for i in range(n.as_python_constant())]

    def reconstruct(self, rc):
        if self.node in rc.outputs:
            return rc.outputs[self.node]
        return super().reconstruct(rc)

    def __repr__(self):
        return f"TensorVariable({self.node.name}: {str(self.fake.dtype)[6:]}" \
               f"{list(self.fake.shape)})"


# ``loss.backward()``, ``torch.autograd.grad(...)`` inside the compiled function (a training
# step, a gradient penalty): autograd runs after the graph, on the tensors it returned, and
# through their compiled backward -- as in PyTorch's Dynamo, a graph break. (A node would
# run it on the graph's own values: a backend that differentiates the graph -- AOT -- would
# see no autograd history there, and a gradient written to ``.grad`` would be lost.)
AUTOGRAD_RUNS_OUTSIDE = "{} runs autograd's backward pass, which the graph does not hold"

_IN_PLACE_VIEWS = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_",
                             "unsqueeze_", "as_strided_"})
"""Tensor methods that change a tensor's metadata (shape, strides) in place, not its data."""


class SymIntVariable(VariableTracker):
    """An int computed from dynamic sizes; ``expr`` is its guard expression (if known)."""

    def __init__(self, node: Any, value: int, expr: str | None):
        self.node, self.value, self.expr = node, value, expr

    def python_type(self):
        return type(self.value)

    def as_proxy(self):
        return self.node

    def example(self):
        return self.value

    def specialize(self, tx) -> int:
        """Use the concrete value; guard that the expression keeps it."""
        if tx.output.size_expression(self) is None:
            raise Unsupported("a size computed inside the graph is needed as a Python int")
        tx.guards.SHAPE_ENV(f"{self.expr} == {self.value}", "specialised")
        return self.value

    def truth(self, tx):
        return bool(self.specialize(tx))

    def reconstruct(self, rc):
        return rc.outputs[self.node] if self.node in rc.outputs else self.value

    def __repr__(self):
        return f"SymIntVariable({self.expr or self.node.name}={self.value})"


class TensorMethodVariable(VariableTracker):
    """``tensor.method`` before it is called."""

    def __init__(self, tensor: TensorVariable, name: str):
        self.tensor, self.name = tensor, name

    def call_function(self, tx, args, kwargs):
        t, name = self.tensor, self.name
        if name == "numpy" and not args and not kwargs and not t.fake.requires_grad and \
                t.fake.device.type == "cpu":
            # the array shares the tensor's memory: in the graph it is the same node, whose
            # NumPy calls become torch._numpy nodes (see ndarray.py)
            return LATE_BOUND["NumpyNdarrayVariable"](t)
        if name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__") and \
                not args and not kwargs:
            # a tensor the graph makes from Python constants alone (``torch.tensor([[1, 2],
            # [3, 4]]).tolist()``): its value is known while tracing, the same every call
            known = tx.known_constant(t)
            if known is not None:
                return tx.wrap_nested(getattr(known, name)(), None)
        if name in ("item", "tolist", "numpy", "__bool__", "__int__", "__float__",
                    "data_ptr", "storage"):
            raise Unsupported(f"tensor.{name}() needs the tensor's data (data-dependent)")
        if name in _IN_PLACE_VIEWS and t.node.op == "placeholder":
            raise Unsupported(f"tensor.{name}() on an input of the graph changes the caller's "
                              "tensor's shape or strides in place, which the compiled graph "
                              "cannot hand back (torch.compile breaks here too)")
        if name == "register_hook":
            return LATE_BOUND["TensorHookVariable"](t).call_function(tx, args, kwargs)
        if name in ("backward", "retain_grad"):
            raise Unsupported(AUTOGRAD_RUNS_OUTSIDE.format(f"tensor.{name}()"))
        if name == "requires_grad_":
            flag = (args[0] if args else kwargs.get("requires_grad", ConstantVariable(True)))
            if flag.is_python_constant() and \
                    bool(flag.as_python_constant()) == t.fake.requires_grad:
                # already so (transformers' input-embedding hook under gradient
                # checkpointing: ``output.requires_grad_(True)`` of an embedding that
                # trains): nothing changes, the tensor itself is the result
                return t
            if flag.is_python_constant() and flag.as_python_constant() and \
                    not tx.grad_enabled and t.node.op != "placeholder" and t.source is None \
                    and t.fake.grad_fn is None:
                # under no_grad, a tensor the graph made becomes a leaf that requires grad
                # (SIREN's ``self.grid.clone().detach().requires_grad_()``): what is computed
                # from it under no_grad requires none, so the graph's values are eager's.
                # The flag itself is set on the real tensor after the graph (a deferred
                # call: the tensor is then an output); a use of it with gradients on
                # would need autograd state the graph does not hold, a break there
                with tx.output.fake_mode:
                    t.fake.requires_grad_()
                t.node.meta["made_leaf"] = True
                tx.defer_call(ConstantVariable(torch.Tensor.requires_grad_), [t],
                              {})
                return t
            # turns a tensor into a leaf of autograd: a graph holds values, not autograd
            # state, so eager runs it (MRA's fallback attention returns
            # ``torch.zeros_like(query).requires_grad_()``). PyTorch's Dynamo breaks here too
            # ("requires_grad_() intermediate leaked as output").
            raise Unsupported("tensor.requires_grad_() changes autograd state, which a graph "
                              "does not capture")
        if name in ("size", "stride", "dim", "numel", "nelement", "ndimension", "is_contiguous",
                    "element_size", "get_device", "is_floating_point", "is_complex",
                    "dtype"):
            return t_metadata_method(tx, t, name, args, kwargs)
        if name == "type" and not args and not kwargs:
            return ConstantVariable(t.fake.type())
        if name in _ADDC and isinstance(kwargs.get("value"), TensorVariable):
            return addc_with_tensor_value(tx, name, t, *args, value=kwargs["value"])
        if name == "new_full":
            filled = full_with_tensor_value(tx, "call_method", name, [t, *args], kwargs)
            if filled is not None:
                return filled
        if name == "fill_diagonal_":
            # ``sim.fill_diagonal_(0)`` (pytorch-metric-learning's and lightly's losses)
            # is a write through the main diagonal's view, which AOT functionalizes. A
            # tall matrix with ``wrap=True`` starts the diagonal again, and more
            # dimensions fill ``t[i, i, i]``: no one view, so a break
            wrap = kwargs.get("wrap", args[1] if len(args) > 1 else ConstantVariable(False))
            if t.fake.dim() != 2 or not args or not wrap.is_python_constant() or (
                    wrap.as_python_constant() and t.fake.shape[0] > t.fake.shape[1] + 1):
                raise Unsupported("tensor.fill_diagonal_ of other than a matrix's main "
                                  "diagonal (more dimensions, or a tall matrix with wrap)")
            view = tx.output.create_node("call_method", "diagonal", (t,), {})
            tx.output.create_node("call_method", "fill_", (view, args[0]), {})
            return t
        return tx.output.create_node("call_method", name, (t, *args), kwargs)

    def reconstruct(self, rc):
        return getattr(rc(self.tensor), self.name)

    def children(self):
        return [self.tensor]


_ADDC = {"addcdiv": operator.truediv, "addcdiv_": operator.truediv,
         "addcmul": operator.mul, "addcmul_": operator.mul}


def addc_with_tensor_value(tx, name: str, t: TensorVariable, t1: VariableTracker,
                           t2: VariableTracker, value: TensorVariable) -> VariableTracker:
    """``t.addcdiv_(t1, t2, value=v)`` with ``v`` a tensor (Adam's ``-step_size`` while
    compiling, where ``_get_value(step)`` keeps the step a tensor): the ``value`` Scalar
    would be read with ``.item()``, which a graph cannot do, so it is spelled as
    ``t.add_(v * (t1 / t2))`` -- the same value, up to rounding -- as PyTorch's Dynamo
    rewrites it."""
    term = tx.binary_op(operator.mul, value, tx.binary_op(_ADDC[name], t1, t2))
    add = "add_" if name.endswith("_") else "add"
    return tx.output.create_node("call_method", add, (t, term), {})


# the position of ``fill_value`` among the arguments of the calls that fill a new tensor
FILL_VALUE_POSITION = {torch.full: 1, torch.full_like: 1, "new_full": 2}


def full_with_tensor_value(tx, op: str, target, args: list, kwargs: dict
                           ) -> VariableTracker | None:
    """``torch.full(size, v)``, ``t.new_full(size, v)``, ``torch.full_like(t, v)`` with
    ``v`` a 0-d tensor (ultralytics' anchors: ``new_full((h * w, 1), stride)`` of one
    element of the strides buffer): the ``fill_value`` Scalar would be read with
    ``.item()``, which a graph cannot do, so it is spelled as the same call filled with a
    number of ``v``'s kind (which fixes the dtype as eager infers it) and then
    ``.fill_(v)`` -- the kernel of a tensor fill value reads it the same way. None (the
    call as it is, which raises as eager does for a ``v`` that requires grad) otherwise."""
    position = FILL_VALUE_POSITION[target if op == "call_function" else "new_full"]
    in_kwargs = "fill_value" in kwargs
    value = kwargs["fill_value"] if in_kwargs else (
        args[position] if len(args) > position else None)
    if not isinstance(value, TensorVariable) or value.fake.dim() != 0 or \
            value.fake.requires_grad or "requires_grad" in kwargs or "out" in kwargs:
        return None  # (eager refuses a value that requires grad: "must be Number")
    like = args[0] if target is not torch.full and args else None
    if value.fake.device.type != "cpu" and not (isinstance(like, TensorVariable) and
                                                 like.fake.device == value.fake.device):
        return None  # (a fill value on another device than the result's: as it is)
    dtype = value.fake.dtype
    number = True if dtype == torch.bool else 1j if dtype.is_complex else \
        1.0 if dtype.is_floating_point else 1
    if in_kwargs:
        kwargs = {**kwargs, "fill_value": ConstantVariable(number)}
    else:
        args = [*args[:position], ConstantVariable(number), *args[position + 1:]]
    filled = tx.output.create_node(op, target, tuple(args), kwargs)
    return tx.output.create_node("call_method", "fill_", (filled, value), {})


def t_metadata_method(tx, t: TensorVariable, name: str, args, kwargs) -> VariableTracker:
    consts = [a.as_python_constant() for a in args]
    if name == "size":
        sizes = t.size_vars(tx)
        if "dim" in kwargs:
            consts = [kwargs["dim"].as_python_constant()]
        return sizes[consts[0]] if consts else SizeVariable(sizes)
    if name in ("numel", "nelement"):
        sizes = t.size_vars(tx)
        result: VariableTracker = ConstantVariable(1)
        for s in sizes:
            result = tx.binary_op(operator.mul, result, s)
        return result
    if name in ("dim", "ndimension"):
        return ConstantVariable(t.fake.dim())
    if tx.output.is_dynamic_tensor(t) and name in ("stride",):
        raise Unsupported("strides of a dynamically shaped tensor")
    return ConstantVariable(getattr(t.fake, name)(*consts))


__all__ = ['SymIntVariable', 'TensorMethodVariable', 'TensorVariable', 'addc_with_tensor_value',
           't_metadata_method']


LATE_BOUND["TensorVariable"] = TensorVariable
