"""Iterators as values: lazy, consumed once, advanced exactly when CPython advances them.

An iterator tracker yields one item per :meth:`IteratorVariable.next` and raises
``StopIteration`` when it is exhausted -- the protocol ``FOR_ITER``, ``next()``,
unpacking and every consumer (``list``, ``sum``, ``any``...) use. Nothing is computed ahead:
``a, b = map(f, xs)`` calls ``f`` twice, in order, interleaved with whatever the consumer does
between items; ``any(p(m) for m in mods)`` stops at the first true one; ``zip(count(), xs)``
is finite. That is what makes a generator whose body writes (to a list, a tensor in place, an
attribute) traceable at all: it runs when its consumer asks, as it does in CPython.

==========================  ===============================================================
ListIteratorVariable        ``iter(list)``, ``iter(tuple)``...: a position in known items
MapVariable                 ``map(fn, *iterables)``
FilterVariable              ``filter(fn | None, iterable)``
ZipVariable                 ``zip(*iterables, strict=...)``
EnumerateVariable           ``enumerate(iterable, start)``
GeneratorVariable           a generator: a suspended frame of the VM, resumed by ``next``,
                            ``send`` and ``throw``; generator expressions are generators,
                            and so are the ``itertools`` polyfills (``..polyfills``)
==========================  ===============================================================

Each can be rebuilt after a graph break from what is left (``map(f, rest)``); a generator
can be while it has not started (called again) or after it has finished, not while it is
suspended in the middle of its body -- the capture that meets one of those at a break runs
the frame uncompiled from there instead (``suspended_generator``).

Mirrors: torch/_dynamo/variables/iter.py and the generator support of
torch/_dynamo/symbolic_convert.py (``InliningGeneratorInstructionTranslator``).
"""

from __future__ import annotations

import types
from typing import Any

from ..exc import TracedException, Unsupported
from .base import VariableTracker
from .containers import ConstantVariable, TupleVariable


class IteratorVariable(VariableTracker):
    """Base of the lazy iterators: ``next`` gives the next item or raises StopIteration."""
    is_iterator = True

    def next(self, tx) -> VariableTracker:
        raise NotImplementedError

    def unpack(self, tx) -> list[VariableTracker]:
        items = []
        while True:
            try:
                items.append(self.next(tx))
            except StopIteration:
                return items

    def var_getattr(self, tx, name):
        if name in ("__next__", "__iter__"):
            return _IteratorMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self}")


class _IteratorMethod(VariableTracker):
    """``it.__next__`` / ``it.__iter__`` before the call."""

    def __init__(self, it: IteratorVariable, name: str):
        self.it, self.name = it, name

    def call_function(self, tx, args, kwargs):
        if self.name == "__iter__":
            return self.it
        try:
            return self.it.next(tx)
        except StopIteration:
            raise TracedException(StopIteration()) from None

    def children(self):
        return [self.it]


class ResumeIterator:
    """A real iterator over a known list, put on a rebuilt stack at a graph break.

    ``items`` is what is left, so the next capture can see (and guard) the rest of the loop.
    """

    def __init__(self, items: list):
        self.items = list(items)

    def __iter__(self):
        return self

    def __next__(self):
        if not self.items:
            raise StopIteration
        return self.items.pop(0)

    def __repr__(self):
        return f"ResumeIterator({self.items!r})"


class ListIteratorVariable(IteratorVariable):
    """An iterator over a known list of trackers (a list's, a tuple's, a dict's keys...)."""

    def __init__(self, items: list[VariableTracker]):
        self.items, self.index = list(items), 0

    def python_type(self):
        return type(iter([]))

    def next(self, tx) -> VariableTracker:
        if self.index >= len(self.items):
            raise StopIteration
        tx.record_mutation(self)
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx):
        tx.record_mutation(self)
        rest, self.index = self.items[self.index:], len(self.items)
        return rest

    def children(self):
        return self.items[self.index:]

    def reconstruct(self, rc):
        return ResumeIterator([rc(i) for i in self.items[self.index:]])

    def __repr__(self):
        return f"ListIteratorVariable({len(self.items) - self.index} left)"


def advance(iterator: Any, n: int) -> None:
    """Take ``n`` items from a real iterator: what a graph took from an input iterator."""
    for _ in range(n):
        next(iterator)


class InputIteratorVariable(ListIteratorVariable):
    """A real iterator over a range, list or tuple that came in from outside: the ``.0``
    argument of a comprehension's own frame (compiled by itself when it is called after a
    graph break), or ``iter(xs)`` passed to a function. Its remaining items are read through
    ``__reduce__`` and guarded there; each item the graph takes is taken from the real
    iterator after the graph, so whoever else holds it sees it advanced; on a rebuilt stack
    it is the real iterator, in the state the graph left it.

    Over a list it reads the list's tracker as it is at each step (``sequence``), as
    CPython's list iterator reads the list: a write to the list before the next ``next()``
    is seen, and once exhausted it lets the list go (what is appended later is not)."""

    def __init__(self, items: list[VariableTracker], real: VariableTracker,
                 sequence: Any = None, position: int = 0):   # a ListVariable
        super().__init__(items)
        self.real = real   # the real iterator, through its source
        self.sequence = sequence
        if sequence is not None:
            self.index = position

    def _items(self) -> list[VariableTracker]:
        return self.sequence.items if self.sequence is not None else self.items

    def python_type(self):
        return self.real.python_type()

    def next(self, tx) -> VariableTracker:
        items = self._items()
        if self.index >= len(items):
            if self.sequence is not None:
                tx.record_mutation(self)
                self.sequence, self.items, self.index = None, [], 0
            raise StopIteration
        tx.record_mutation(self)
        self.index += 1
        tx.defer_call(ConstantVariable(advance), [self.real, ConstantVariable(1)], {})
        return items[self.index - 1]

    def unpack(self, tx):
        items = self._items()
        tx.record_mutation(self)
        rest = items[self.index:]
        self.sequence, self.items, self.index = None, [], 0
        if rest:
            tx.defer_call(ConstantVariable(advance), [self.real, ConstantVariable(len(rest))],
                          {})
        return rest

    def children(self):
        return self._items()[self.index:]

    def reconstruct(self, rc):
        return rc(self.real)

    def __repr__(self):
        return f"InputIteratorVariable({len(self._items()) - self.index} left)"


class MapVariable(IteratorVariable):
    def __init__(self, fn: VariableTracker, iterators: list[IteratorVariable]):
        self.fn, self.iterators = fn, iterators

    def python_type(self):
        return map

    def next(self, tx):
        args = [it.next(tx) for it in self.iterators]  # the first exhausted one stops it
        return tx.call(self.fn, args, {})

    def children(self):
        return [self.fn, *self.iterators]

    def reconstruct(self, rc):
        return map(rc(self.fn), *[rc(it) for it in self.iterators])


class FilterVariable(IteratorVariable):
    def __init__(self, fn: VariableTracker, iterator: IteratorVariable):
        self.fn, self.iterator = fn, iterator

    def python_type(self):
        return filter

    def next(self, tx):
        identity = self.fn.is_python_constant() and self.fn.as_python_constant() is None
        while True:
            item = self.iterator.next(tx)
            if tx.truth(item if identity else tx.call(self.fn, [item], {})):
                return item

    def children(self):
        return [self.fn, self.iterator]

    def reconstruct(self, rc):
        return filter(rc(self.fn), rc(self.iterator))


class ZipVariable(IteratorVariable):
    def __init__(self, iterators: list[IteratorVariable], strict: bool = False):
        self.iterators, self.strict = iterators, strict

    def python_type(self):
        return zip

    def next(self, tx):
        if not self.iterators:
            raise StopIteration
        items = []
        for i, it in enumerate(self.iterators):
            try:
                items.append(it.next(tx))
            except StopIteration:
                if self.strict:
                    self._check_lengths(tx, i)
                raise
        return TupleVariable(items)

    def _check_lengths(self, tx, ended: int) -> None:
        """``zip(..., strict=True)`` stopped at iterable ``ended``: CPython's ValueError
        when the lengths differ (a later one still has items, or an earlier one had)."""
        def mismatch(i: int, how: str) -> TracedException:
            others = "argument 1" if i == 2 else f"arguments 1-{i - 1}"
            return TracedException(ValueError(f"zip() argument {i} is {how} than {others}"))
        if ended:
            raise mismatch(ended + 1, "shorter")
        for i, it in enumerate(self.iterators[1:], 2):
            try:
                it.next(tx)
            except StopIteration:
                continue
            raise mismatch(i, "longer")

    def children(self):
        return list(self.iterators)

    def reconstruct(self, rc):
        return zip(*[rc(it) for it in self.iterators], strict=self.strict)


class EnumerateVariable(IteratorVariable):
    def __init__(self, iterator: IteratorVariable, start: int = 0):
        self.iterator, self.count = iterator, start

    def python_type(self):
        return enumerate

    def next(self, tx):
        item = self.iterator.next(tx)
        tx.record_mutation(self)
        self.count += 1
        return TupleVariable([ConstantVariable(self.count - 1), item])

    def children(self):
        return [self.iterator]

    def reconstruct(self, rc):
        return enumerate(rc(self.iterator), self.count)


class GeneratorVariable(IteratorVariable):
    """A generator made while tracing: ``frame`` is its body, suspended (a VM frame, which
    is a continuation). ``next`` resumes it until its next ``yield``
    (:meth:`InstructionTranslator.resume_generator`); the frame is copied before each
    resume so that an instruction rolled back after a graph break leaves it as it was.

    ``call`` is how it was made (the function tracker and its arguments), to make it again
    after a graph break while it has not started."""

    def __init__(self, frame: Any, call: tuple[VariableTracker, list, dict]):
        self.frame, self.call = frame, call
        self.started = self.done = False

    def python_type(self):
        return types.GeneratorType

    @property
    def suspended(self) -> bool:
        """Started and not finished: its state is a frame of ours, not rebuildable."""
        return self.started and not self.done

    def next(self, tx):
        return tx.resume_generator(self, ConstantVariable(None))

    def var_getattr(self, tx, name):
        if name in ("send", "throw", "close"):
            return _GeneratorMethod(self, name)
        if name == "gi_running":
            return ConstantVariable(False)
        return super().var_getattr(tx, name)

    def children(self):
        fn, args, kwargs = self.call
        return [fn, *args, *kwargs.values()] if not self.done else []

    def reconstruct(self, rc):
        if self.done:
            return iter(())
        if self.started:
            raise Unsupported("a generator suspended in the middle of its body cannot be "
                              "rebuilt after the graph")
        fn, args, kwargs = self.call
        return rc(fn)(*[rc(a) for a in args], **{k: rc(v) for k, v in kwargs.items()})

    def __repr__(self):
        state = "done" if self.done else "suspended" if self.started else "new"
        return f"GeneratorVariable({self.frame.name}, {state})"


class _GeneratorMethod(VariableTracker):
    """``gen.send(v)``, ``gen.throw(exc)``, ``gen.close()``."""

    def __init__(self, gen: GeneratorVariable, name: str):
        self.gen, self.name = gen, name

    def call_function(self, tx, args, kwargs):
        gen = self.gen
        try:
            if self.name == "send":
                return tx.resume_generator(gen, args[0])
            if self.name == "throw":
                exc = args[0].as_python_constant() if args[0].is_python_constant() else None
                if isinstance(exc, type):
                    exc = exc()
                if not isinstance(exc, BaseException):
                    raise Unsupported(f"generator.throw({args[0]})")
                return tx.resume_generator(gen, None, throw=exc)
        except StopIteration as stop:
            raise TracedException(StopIteration(*stop.args)) from None
        return tx.close_generator(gen)

    def children(self):
        return [self.gen]


def suspended_generator(values: list[Any]) -> GeneratorVariable | None:
    """A generator suspended mid-body among ``values`` and what they hold, if any."""
    seen: set[int] = set()
    todo = [v for v in values if isinstance(v, VariableTracker)]
    while todo:
        vt = todo.pop()
        if id(vt) in seen:
            continue
        seen.add(id(vt))
        if isinstance(vt, GeneratorVariable) and vt.suspended:
            return vt
        todo += [c for c in vt.children() if isinstance(c, VariableTracker)]
        items = vt.__dict__.get("items")   # (never a lazy dict's: reading it realizes all)
        if isinstance(items, list):
            todo += [i for i in items if isinstance(i, VariableTracker)]
    return None


__all__ = [
    'EnumerateVariable', 'FilterVariable', 'GeneratorVariable', 'InputIteratorVariable',
    'IteratorVariable', 'ListIteratorVariable', 'MapVariable', 'ResumeIterator', 'ZipVariable',
    'suspended_generator',
]
