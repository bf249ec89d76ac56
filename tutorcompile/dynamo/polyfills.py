"""Python versions of C iterators and callables, traced in their place.

``itertools`` is written in C, so the tracer cannot look inside ``itertools.chain``. Each
function here computes what its C original computes, written as a plain Python generator
(most follow the "roughly equivalent to" code of the itertools documentation). A call of the
original while tracing inlines the version here instead (``variables/callables.py`` maps one
to the other), so the result is a :class:`~.variables.iter.GeneratorVariable`: lazy, consumed
once, advanced item by item as its consumer asks -- exactly when the C iterator would be.

Where the C original reads its whole input when it is made (``product``, ``combinations``,
``permutations``: ``tuple(pool)`` up front), so does the version here, before the generator
starts. These functions run only while tracing; a suspended one never outlives a graph.
``operator.itemgetter``, ``attrgetter`` and ``methodcaller`` are C callables too: their
versions here are closures that do the same reads.

Mirrors: torch/_dynamo/polyfills/itertools.py and builtins.py.
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import itertools
import operator
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any


def chain(*iterables: Iterable) -> Iterator:
    for iterable in iterables:
        yield from iterable


def chain_from_iterable(iterables: Iterable[Iterable]) -> Iterator:
    for iterable in iterables:
        yield from iterable


def count(start: Any = 0, step: Any = 1) -> Iterator:
    n = start
    while True:
        yield n
        n += step


def cycle(iterable: Iterable) -> Iterator:
    saved = []
    for element in iterable:
        yield element
        saved.append(element)
    while saved:
        for element in saved:
            yield element


def repeat(obj: Any, times: int | None = None) -> Iterator:
    if times is None:
        while True:
            yield obj
    for _ in range(times):
        yield obj


def islice(iterable: Iterable, *args: int | None) -> Iterator:
    s = slice(*args)
    start, stop, step = s.start or 0, s.stop, s.step or 1
    if start < 0 or (stop is not None and stop < 0) or step <= 0:
        raise ValueError("Indices for islice() must be None or an integer: "
                         "0 <= x <= sys.maxsize.")
    return _islice(iter(iterable), start, stop, step)


def _islice(it: Iterator, start: int, stop: int | None, step: int) -> Iterator:
    index, next_i = 0, start
    if stop is not None and stop <= start:
        return
    for element in it:
        if index == next_i:
            yield element
            next_i += step
            if stop is not None and next_i >= stop:
                return
        index += 1


def accumulate(iterable: Iterable, func: Callable | None = None, *,
               initial: Any = None) -> Iterator:
    it = iter(iterable)
    total = initial
    if initial is None:
        try:
            total = next(it)
        except StopIteration:
            return
    yield total
    for element in it:
        total = func(total, element) if func is not None else total + element
        yield total


def pairwise(iterable: Iterable) -> Iterator:
    it = iter(iterable)
    try:
        a = next(it)
    except StopIteration:
        return
    for b in it:
        yield a, b
        a = b


def starmap(function: Callable, iterable: Iterable) -> Iterator:
    for args in iterable:
        yield function(*args)


def takewhile(predicate: Callable, iterable: Iterable) -> Iterator:
    for element in iterable:
        if not predicate(element):
            return
        yield element


def dropwhile(predicate: Callable, iterable: Iterable) -> Iterator:
    it = iter(iterable)
    for element in it:
        if not predicate(element):
            yield element
            break
    for element in it:
        yield element


def filterfalse(predicate: Callable | None, iterable: Iterable) -> Iterator:
    for element in iterable:
        if not (bool(element) if predicate is None else predicate(element)):
            yield element


def compress(data: Iterable, selectors: Iterable) -> Iterator:
    for d, s in zip(data, selectors):
        if s:
            yield d


def zip_longest(*iterables: Iterable, fillvalue: Any = None) -> Iterator:
    iterators = [iter(it) for it in iterables]
    active = len(iterators)
    if not active:
        return
    while True:
        values = []
        for i, it in enumerate(iterators):
            try:
                value = next(it)
            except StopIteration:
                active -= 1
                if not active:
                    return
                iterators[i] = repeat(fillvalue)
                value = fillvalue
            values.append(value)
        yield tuple(values)


def product(*iterables: Iterable, repeat: int = 1) -> Iterator:
    pools = [tuple(pool) for pool in iterables] * repeat  # read up front, as C does
    return _product(pools)


def _product(pools: list[tuple]) -> Iterator:
    result: list[tuple] = [()]
    for pool in pools:
        result = [x + (y,) for x in result for y in pool]
    yield from result


def combinations(iterable: Iterable, r: int) -> Iterator:
    pool = tuple(iterable)
    return _combinations(pool, r)


def _combinations(pool: tuple, r: int) -> Iterator:
    n = len(pool)
    if r > n:
        return
    indices = list(range(r))
    yield tuple(pool[i] for i in indices)
    while True:
        for i in reversed(range(r)):
            if indices[i] != i + n - r:
                break
        else:
            return
        indices[i] += 1
        for j in range(i + 1, r):
            indices[j] = indices[j - 1] + 1
        yield tuple(pool[i] for i in indices)


def combinations_with_replacement(iterable: Iterable, r: int) -> Iterator:
    pool = tuple(iterable)
    return _combinations_with_replacement(pool, r)


def _combinations_with_replacement(pool: tuple, r: int) -> Iterator:
    n = len(pool)
    if not n and r:
        return
    indices = [0] * r
    yield tuple(pool[i] for i in indices)
    while True:
        for i in reversed(range(r)):
            if indices[i] != n - 1:
                break
        else:
            return
        indices[i:] = [indices[i] + 1] * (r - i)
        yield tuple(pool[i] for i in indices)


def permutations(iterable: Iterable, r: int | None = None) -> Iterator:
    pool = tuple(iterable)
    return _permutations(pool, len(pool) if r is None else r)


def _permutations(pool: tuple, r: int) -> Iterator:
    n = len(pool)
    if r > n:
        return
    indices = list(range(n))
    cycles = list(range(n, n - r, -1))
    yield tuple(pool[i] for i in indices[:r])
    while n:
        for i in reversed(range(r)):
            cycles[i] -= 1
            if cycles[i] == 0:
                indices[i:] = indices[i + 1:] + indices[i:i + 1]
                cycles[i] = n - i
            else:
                j = cycles[i]
                indices[i], indices[-j] = indices[-j], indices[i]
                yield tuple(pool[i] for i in indices[:r])
                break
        else:
            return


def groupby(iterable: Iterable, key: Callable | None = None) -> Iterator:
    """Each group is read whole before it is handed out (C's groups share one iterator,
    which only differs for a consumer that skips a group half-read)."""
    it = iter(iterable)
    try:
        current = next(it)
    except StopIteration:
        return
    current_key = current if key is None else key(current)
    while True:
        group = [current]
        ended = True
        for current in it:
            k = current if key is None else key(current)
            if k != current_key:
                ended = False
                break
            group.append(current)
        yield current_key, iter(group)
        if ended:
            return
        current_key = k


def tee(iterable: Iterable, n: int = 2) -> tuple:
    it = iter(iterable)
    queues: list[collections.deque] = [collections.deque() for _ in range(n)]

    def gen(queue: collections.deque) -> Iterator:
        while True:
            if not queue:
                try:
                    value = next(it)
                except StopIteration:
                    return
                for q in queues:
                    q.append(value)
            yield queue.popleft()
    return tuple(gen(q) for q in queues)


def batched(iterable: Iterable, n: int) -> Iterator:
    if n < 1:
        raise ValueError("n must be at least one")
    it = iter(iterable)
    while True:
        batch = tuple(islice(it, n))
        if not batch:
            return
        yield batch


def sequence_iter(sequence: Any) -> Iterator:
    """``iter(obj)`` of a class with ``__getitem__`` and no ``__iter__``: indexes 0, 1, 2...
    until IndexError (the sequence protocol CPython falls back to)."""
    i = 0
    while True:
        try:
            value = sequence[i]
        except IndexError:
            return
        yield value
        i += 1


def count_elements(mapping: Any, iterable: Iterable) -> None:
    """``collections._count_elements`` (what ``Counter.update`` calls)."""
    for element in iterable:
        mapping[element] = mapping.get(element, 0) + 1


def iter_until(function: Callable, sentinel: Any) -> Iterator:
    """``iter(function, sentinel)``: call until the sentinel comes back."""
    while True:
        value = function()
        if value == sentinel:
            return
        yield value


def itemgetter(*items: Any) -> Callable:
    if len(items) == 1:
        item = items[0]

        def get_item(obj):
            return obj[item]
        return get_item

    def get_items(obj):
        return tuple(obj[i] for i in items)
    return get_items


def attrgetter(*names: str) -> Callable:
    def resolve(obj, name):
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj
    if len(names) == 1:
        name = names[0]

        def get_attr(obj):
            return resolve(obj, name)
        return get_attr

    def get_attrs(obj):
        return tuple(resolve(obj, name) for name in names)
    return get_attrs


def methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Callable:
    def call_method(obj):
        return getattr(obj, name)(*args, **kwargs)
    return call_method


def as_python(obj: Any) -> Callable | None:
    """A Python function computing what the C callable object ``obj`` computes (an
    ``operator.itemgetter(1)`` made outside the traced code), from how it pickles; None
    for objects of other kinds."""
    kind = type(obj)
    if kind not in (operator.itemgetter, operator.attrgetter, operator.methodcaller):
        return None
    made_by, args = obj.__reduce__()[:2]
    if kind is operator.methodcaller:  # (partial(methodcaller, name, **kw), args)
        return methodcaller(*made_by.args, *args, **made_by.keywords)
    return POLYFILLS[kind](*args)


# C original -> the Python function traced in its place
POLYFILLS: dict[Any, Callable] = {
    itertools.chain: chain, itertools.chain.from_iterable: chain_from_iterable,
    itertools.count: count, itertools.cycle: cycle, itertools.repeat: repeat,
    itertools.islice: islice, itertools.accumulate: accumulate,
    itertools.starmap: starmap, itertools.takewhile: takewhile,
    itertools.dropwhile: dropwhile, itertools.filterfalse: filterfalse,
    itertools.compress: compress, itertools.zip_longest: zip_longest,
    itertools.product: product, itertools.combinations: combinations,
    itertools.combinations_with_replacement: combinations_with_replacement,
    itertools.permutations: permutations, itertools.groupby: groupby, itertools.tee: tee,
    itertools.pairwise: pairwise,
    operator.itemgetter: itemgetter, operator.attrgetter: attrgetter,
    operator.methodcaller: methodcaller,
    collections._count_elements: count_elements,  # type: ignore[attr-defined]
}
if hasattr(itertools, "batched"):  # 3.12+
    POLYFILLS[itertools.batched] = batched


def _without_accelerator(name: str, accelerator: str) -> types.ModuleType:
    """A fresh copy of the standard-library module ``name`` as its Python source defines it,
    imported while its C accelerator is hidden (heapq ends ``from _heapq import *`` inside
    ``try``: the import fails and the Python definitions stay)."""
    saved = sys.modules.get(accelerator)
    sys.modules[accelerator] = None  # type: ignore[assignment]  # its import raises ImportError
    try:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.loader is not None   # (a standard-library module)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules[accelerator]
        else:
            sys.modules[accelerator] = saved
    return module


# Modules whose C accelerator replaces Python functions of the same name and meaning: those
# functions (heapq.heappush, bisect.insort, ...) are traced as the Python versions
for _name, _accelerator in (("heapq", "_heapq"), ("bisect", "_bisect")):
    _python = _without_accelerator(_name, _accelerator)
    for _attr, _c in vars(importlib.import_module(_name)).items():
        _twin = getattr(_python, _attr, None)
        if isinstance(_c, types.BuiltinFunctionType) and isinstance(_twin, types.FunctionType):
            POLYFILLS[_c] = _twin

__all__ = ["POLYFILLS", "as_python", "iter_until", "sequence_iter"]
