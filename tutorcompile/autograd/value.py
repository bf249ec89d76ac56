"""``Value``: reverse-mode autodiff on single numbers, the smallest version of the idea.

Before tensors, broadcasting and an op table, the whole of backpropagation fits on a page:
each ``Value`` remembers the values it was computed from (``_prev``) and a small closure
(``_backward``) that pushes its gradient to them by the chain rule. ``backward()`` orders the
graph topologically and calls the closures from the output back to the inputs.

Each operation below states its local derivative next to its forward formula; the
tensor version (``tensor.py``) takes the same steps with the VJP rules of ``tutorcompile.ops``.

Mirrors: the design of karpathy/micrograd (engine.py), in the course's own words and code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


class Value:
    """A float that records how it was computed, so ``backward()`` can find d(out)/d(self)."""

    __slots__ = ("data", "grad", "_prev", "_op", "_backward", "label")

    def __init__(self, data: float, _prev: tuple[Value, ...] = (), _op: str = "",
                 label: str = ""):
        self.data = float(data)
        self.grad = 0.0
        self._prev = _prev
        self._op = _op
        self._backward: Callable[[], None] = lambda: None
        self.label = label

    @staticmethod
    def _wrap(x: Value | float) -> Value:
        return x if isinstance(x, Value) else Value(x)

    def __add__(self, other: Value | float) -> Value:
        other = self._wrap(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():  # d(a+b)/da = 1, d(a+b)/db = 1
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other: Value | float) -> Value:
        other = self._wrap(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():  # d(ab)/da = b, d(ab)/db = a
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def __pow__(self, exponent: float) -> Value:
        if isinstance(exponent, Value):
            raise TypeError("Value ** Value is not supported; the exponent must be a number")
        out = Value(self.data ** exponent, (self,), f"**{exponent}")

        def _backward():  # d(a^k)/da = k a^(k-1)
            self.grad += exponent * self.data ** (exponent - 1) * out.grad
        out._backward = _backward
        return out

    def exp(self) -> Value:
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward():  # d(e^a)/da = e^a
            self.grad += out.data * out.grad
        out._backward = _backward
        return out

    def log(self) -> Value:
        out = Value(math.log(self.data), (self,), "log")

        def _backward():  # d(log a)/da = 1/a
            self.grad += out.grad / self.data
        out._backward = _backward
        return out

    def tanh(self) -> Value:
        out = Value(math.tanh(self.data), (self,), "tanh")

        def _backward():  # d(tanh a)/da = 1 - tanh(a)^2
            self.grad += (1.0 - out.data ** 2) * out.grad
        out._backward = _backward
        return out

    def relu(self) -> Value:
        out = Value(max(self.data, 0.0), (self,), "relu")

        def _backward():  # 1 where a > 0, else 0
            self.grad += (out.data > 0) * out.grad
        out._backward = _backward
        return out

    def sigmoid(self) -> Value:
        out = Value(1.0 / (1.0 + math.exp(-self.data)), (self,), "sigmoid")

        def _backward():  # s(a) (1 - s(a))
            self.grad += out.data * (1.0 - out.data) * out.grad
        out._backward = _backward
        return out

    # Everything else is made of the operations above.
    def __neg__(self) -> Value:
        return self * -1.0

    def __sub__(self, other: Value | float) -> Value:
        return self + (-self._wrap(other))

    def __truediv__(self, other: Value | float) -> Value:
        return self * self._wrap(other) ** -1.0

    def __radd__(self, other: float) -> Value:
        return self + other

    def __rmul__(self, other: float) -> Value:
        return self * other

    def __rsub__(self, other: float) -> Value:
        return self._wrap(other) - self

    def __rtruediv__(self, other: float) -> Value:
        return self._wrap(other) / self

    def topological_order(self) -> list[Value]:
        """Every Value this one depends on, each after the values it was computed from."""
        return postorder(self, lambda v: v._prev)

    def backward(self) -> None:
        """Set ``.grad`` of every value in the graph to d(self)/d(value)."""
        order = self.topological_order()
        for v in order:
            v.grad = 0.0
        self.grad = 1.0
        for v in reversed(order):
            v._backward()

    def __repr__(self) -> str:
        label = f"{self.label}: " if self.label else ""
        return f"Value({label}data={self.data:.4f}, grad={self.grad:.4f})"


def postorder(root: T, inputs: Callable[[T], Iterable[T]]) -> list[T]:
    """Every node ``root`` depends on through ``inputs``, each after all of its inputs: the
    order a backward sweep reverses (for :class:`Value` and for the tape's ``Tensor``).

    Depth-first search, appending a node once all its inputs are done (post-order); an
    explicit stack instead of recursion keeps deep graphs (long RNN loops) from overflowing.
    """
    order: list[T] = []
    seen: set[int] = set()
    stack: list[tuple[T, bool]] = [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((i, False) for i in reversed(list(inputs(node))) if id(i) not in seen)
    return order
