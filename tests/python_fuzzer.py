"""Random *Python* programs through the capture stage, checked against eager, side effects too.

``tests/program_fuzzer.py`` draws straight lines of tensor calls; this one draws the Python
around them. Each seed makes one function ``program(x, y, acc, k)`` -- two tensors, a list the
caller owns and a Python int -- whose body is a random sequence of *snippets*, some nested in
a block (a loop, a branch on a tensor's shape, a ``with``, a ``try``). The snippets mix tensor
calls (``program_fuzzer.UNARY``) with control flow on Python values and on tensor properties,
for/while over range/lists/dict items/enumerate/zip/reversed with break and continue, early
returns and ternaries; containers built and mutated (append, insert, pop, slice assignment,
``del``, dict update/setdefault/get/pop, comprehensions, starred unpacking), namedtuples,
dataclasses, a small class with a property and chained methods; closures and ``nonlocal``,
lambdas with defaults, ``*args``/``**kwargs`` calls, ``functools.partial``, generators and
``yield from``, ``sorted(key=)``, ``min``/``max``/``sum``/``any``/``all``, ``isinstance``,
f-strings, ``try``/``except``/``finally`` with an exception raised and caught inside, ``with``
on a ``contextmanager``; and side effects that escape the function: a global list and dict, a
module-level object's attributes, a dataclass instance, a closure cell of a module-level
function, the caller's list, in-place ops on the input tensors, attributes of an nn.Module.
``IDIOMS`` adds the Python that model libraries write around tensors: unbound ``str``
methods (``str.lower(name)``), ``map``/``filter`` with unpacking, ``functools.wraps`` and
``reduce``, ``operator.itemgetter``/``attrgetter``, ``itertools`` (chain, product,
accumulate, islice, groupby, zip_longest, combinations, pairwise), ``collections``
(OrderedDict, defaultdict, deque, Counter, ChainMap), ``enum`` members (Enum, IntEnum, a
``str`` mix-in), ``typing.cast``, ``math`` on Python numbers, walrus, ``match`` on tuples,
mappings, sequences and classes, ``dict | dict``, set operators, string formatting and
``split``/``join``, closures over loop variables, classmethod/staticmethod/``super()``,
``__getitem__``/``__call__``/``__iter__`` on user classes, ``getattr`` with a default,
``hasattr``, ``vars``, ``isinstance`` with a tuple, grad modes, ``torch.Size`` arithmetic,
``.item()``/``.tolist()`` then Python math, and tuple comparisons.

The function lives in a module's source (``PRELUDE`` + the function), compiled with a file
name registered in ``linecache`` so break reasons name a real line. Every snippet is kept only
if the whole program still runs eagerly on every call the check makes, so every program is
valid. ``check()`` executes the module source afresh for each run -- one namespace for eager,
one for the compiled function, one for each ``explain`` -- so each starts from the same
initial state (the source *is* the deep copy). It calls eager and compiled four times in step
(the compile; a cache hit with fresh values; another ``k``, which a guard must catch; another
leading size) and after each call compares the return values (tensors by
``torch.testing.assert_close``, nested containers, Python scalars), the caller's list, the
input tensors (in-place ops) and every global's state. A difference is a silent wrong answer;
an exception only the compiled function raises is a crash. Under a backend that generates
code, float32 rounding differs from eager's; so, as ``tests/program_fuzzer.py`` does (with
its ``same``: PyTorch's accuracy rule), a float64 run of the same program, in step, is a
*referee*: a tensor or float not close to eager's is still right if it is no further from
the referee than eager's own. The referee counts only where its run ended where eager's did
(the same structure, ints and strings), and programs whose float32 result is already far
from the float64 one (ill-conditioned: ``sin`` of 1e5) are not drawn. It also counts graphs
and break reasons (``tutorcompile.explain``) and, with ``--torch``, whether
``torch.compile(fn, backend="eager", fullgraph=True)`` captures the same program whole, and
``torch._dynamo.explain`` finds no break in it (its error or break reason if not), so a break
torch.compile does not have shows up.

    python -m tests.python_fuzzer --seeds 0:300            # backend "eager", report failures
    python -m tests.python_fuzzer --seeds 17 --show        # one program's source
    python -m tests.python_fuzzer --seeds 0:100 --torch    # also torch.compile, fullgraph
    python -m tests.python_fuzzer --seeds 0:50 --backend inductor

The unit tests (``tests/test_stage3_python_fuzzer.py``) run fixed seeds.
"""

from __future__ import annotations

import argparse
import collections
import enum
import linecache
import logging
import random
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from tests.program_fuzzer import TOL, UNARY, same, seed_range

# The module every program lives in: the state its side effects reach.
PRELUDE = '''\
import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import math
import operator
import typing

import torch
import torch.nn.functional as F

G_LIST = []
G_DICT = {"n": 0}
G_DEQUE = collections.deque([0], maxlen=4)
G_COUNTER = collections.Counter()
G_ODICT = collections.OrderedDict(a=1)
G_DDICT = collections.defaultdict(list)
G_IT = iter(range(1000))
Point = collections.namedtuple("Point", ["a", "b"])


@dataclasses.dataclass
class Cfg:
    scale: float = 2.0
    steps: int = 2
    name: str = "cfg"


class Acc:
    def __init__(self):
        self.total = 0
        self.items = []

    @property
    def count(self):
        return len(self.items)

    def add(self, v):
        self.items.append(v)
        self.total += 1
        return self


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0
        self.calls = 0

    def forward(self, v):
        self.calls += 1
        return v * self.scale


def make_counter():
    n = 0

    def bump():
        nonlocal n
        n += 1
        return n
    return bump


STATE = Acc()
CFG = Cfg()
MOD = Net()
COUNTER = make_counter()


@contextlib.contextmanager
def scaled(factor):
    G_LIST.append("enter")
    try:
        yield factor
    finally:
        G_LIST.append("exit")


def gen(t, n):
    for i in range(n):
        yield t * i


def gen2(t):
    yield from gen(t, 2)
    yield t + 1


def helper(t, *args, scale=1.0, **kwargs):
    return t * scale + sum(args) + len(kwargs)


COUNT = 0


class Boom(Exception):
    pass


def raise_boom(v):
    if v > 0:
        raise Boom(f"boom {v}")
    return v


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int = 1
    tags: tuple = ()


@dataclasses.dataclass
class WithPost:
    base: float = 1.0
    items: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.double = self.base * 2


class Base:
    def __init__(self, w):
        self._w = w

    @property
    def w(self):
        return self._w

    @w.setter
    def w(self, value):
        self._w = value * 2

    def apply(self, v):
        return v * self.w

    @classmethod
    def make(cls, w):
        return cls(w)

    @staticmethod
    def shift(v):
        return v + 1


class Child(Base):
    def apply(self, v):
        return super().apply(v) + 1

    def __call__(self, v):
        return self.apply(v)

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return i * self.w

    def __iter__(self):
        return iter([self.w, 1])


SHARED = Child(2)


def side_and_break(t):
    G_LIST.append("pre")
    v = t.sum().item()
    STATE.total += 1
    return t + v


def gen_side(t):
    for i in range(2):
        G_DICT["n"] += 1
        yield t + i


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Act(str, enum.Enum):
    RELU = "relu"
    GELU = "gelu"


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        G_DICT["logged"] = G_DICT.get("logged", 0) + 1
        return fn(*args, **kwargs)
    return wrapper


@logged
def double(v, factor=2):
    """Doubles."""
    return v * factor


class Scaled(Child):   # a third level: super() through __init__, __call__ and methods
    def __init__(self, w, scale=2):
        super().__init__(w)
        self.scale = scale

    def describe(self):
        return "Scaled<" + type(self).__name__ + ">"

    def __call__(self, v):
        return super().__call__(v) * self.scale


class Seq:
    def __init__(self, *items):
        self.items = list(items)

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

'''

# The globals whose state is compared after every call.
STATE_NAMES = ["G_LIST", "G_DICT", "STATE", "CFG", "MOD", "COUNTER", "COUNT", "SHARED",
               "G_DEQUE", "G_COUNTER", "G_ODICT", "G_DDICT", "G_IT"]

# Snippets: lines of the body that read and rebind ``t`` (a tensor of x's shape), may append
# to ``out`` (returned), and use ``x``, ``y``, ``acc``, ``k``. ``{u}`` is a tensor expression
# of ``t`` (one of program_fuzzer's UNARY calls), ``{c}`` a small int, ``{s}`` a float.
CONTROL = [
    "if t.dim() > 1 and t.size(0) > 2:\n    t = t * 2\nelse:\n    t = t - 1",
    "t = {u} if t.dtype in (torch.float32, torch.float64) else t",
    "if t.shape[-1] % 2 == 0:\n    t = t.flip(-1)",
    "if t.ndim == 2 and x.shape[0] != {c}:\n    t = t + {c}",
    "for i in range({c}):\n    if i == 1:\n        continue\n    t = t + i",
    "n = 0\nwhile n < 3:\n    t = t * 0.5\n    n += 1\n    if n > k:\n        break",
    "for i, v in enumerate([0.5, 1.5]):\n    t = t + v * i",
    "for a, b in zip([1, 2], [3.0, 4.0]):\n    t = t * a + b",
    "for key, val in {{'a': 1, 'b': {c}}}.items():\n    t = t + val\n    out.append(key)",
    "for v in reversed([1, 2, {c}]):\n    t = t - v",
    "for row in t:\n    out.append(row.sum())\n    if len(out) > 3:\n        break",
    "i = 0\nwhile True:\n    i += 1\n    if i >= k:\n        break\nt = t + i",
    "for i in range(3):\n    pass\nelse:\n    t = t + i",
    "if k > 1:\n    t = t * k\nelif k == 1:\n    t = t + 1\nelse:\n    t = -t",
    "if not out:\n    out.append(0)",
    "if t.numel() > 10000:\n    return t * 0, out",
    "t = t if t.is_floating_point() else t.float()",
    "t = t + (1 if t.requires_grad else 2)",
    "if t.device.type == 'cpu':\n    t = t + 0.5",
]
CONTAINERS = [
    "out.append(t.sum())",
    "lst = [t, t * 2, t + 1]\nlst.insert(1, t - 1)\nlst.pop(0)\nt = sum(lst) / len(lst)",
    "lst = [t * i for i in range(4)]\nlst[1:3] = [t]\ndel lst[0]\nt = lst[-1] + len(lst)",
    "lst = [1, 2]\nlst.extend([3, k])\nlst += [4]\nt = t * lst[-2] + lst.index(2)",
    "d = {{'a': t}}\nd.update(b=t * 2)\nd.setdefault('c', t + 1)\n"
    "t = d.get('z', t) + d['b'] - d.pop('a') + len(d)",
    "d = dict(a=1, b={c})\nd['c'] = d.get('a', 0) + d['b']\ndel d['a']\n"
    "t = t * sum(d.values()) + len(list(d.keys()))",
    "a, *rest = [t, t * 2, t * 3]\nt = a + sum(rest)",
    "*init, last = (1, 2, {c})\nt = t * last + len(init)",
    "first, (second, third) = t, (t + 1, t * 2)\nt = first * second - third",
    "s = {{1, 2, k}}\ns.add(3)\ns.discard(1)\nt = t * len(s)",
    "tup = (t, k)\nt = tup[0] * tup[1] + len(tup[1:])",
    "p = Point(t, 2)\nt = p.a * p.b + p._replace(b=3).b",
    "a, b = Point(1, {c})\nt = t + a * b",
    "cfg = Cfg(scale=1.5)\nt = t * cfg.scale + CFG.steps",
    "cfg = dataclasses.replace(CFG, steps={c})\nt = t + cfg.steps",
    "obj = Acc()\nobj.add(t).add(t * 2)\nt = t + obj.count + obj.total",
    "t = {{kk: vv for kk, vv in zip('ab', [t, t * 2])}}['b']",
    "t = torch.stack([t[i] for i in range(t.size(0))])",
    "t = torch.cat([r.unsqueeze(0) for r in t.unbind(0)], 0)",
    "pairs = [(i, i * 2) for i in range({c}) if i % 2 == 0]\nt = t + len(pairs)",
    "t = t + sum(v for v in [1, 2, 3] if v > 1)",
    "nested = {{'a': [t, {{'b': (t, 1)}}]}}\nt = nested['a'][1]['b'][0] + nested['a'][1]['b'][1]",
    "acc_copy = list(acc)\nacc_copy.append(1)\nt = t + len(acc_copy)",
]
FUNCTIONS = [
    "def make():\n    count = 0\n\n    def inc(v):\n        nonlocal count\n        count += 1\n"
    "        return v + count\n    return inc\nf = make()\nt = f(f(t))",
    "calls = [0]\n\ndef bump(v):\n    calls[0] += 1\n    return v * 2\nt = bump(t) + calls[0]",
    "scale = {c}\n\ndef mul(v):\n    return v * scale\nt = mul(t)",
    "sq = lambda v, p=2: v ** p\nt = sq(t) + sq(t, 1)",
    "t = helper(t, 1, 2, scale=0.5, extra=3)",
    "args = (1.0, 2.0)\nkw = {{'scale': 2.0}}\nt = helper(t, *args, **kw)",
    "f = functools.partial(helper, scale=3.0)\nt = f(t, 1)",
    "t = sum(gen(t, 3))",
    "t = sum(gen2(t))",
    "t = sum(t * i for i in range(3))",
    "t = list(gen(t, 2))[-1] + next(iter(gen2(t)))",
    "vals = sorted([3, 1, {c}], key=lambda v: -v)\nt = t * vals[0]",
    "vals = sorted({{'a': 2, 'b': 1}}.items(), key=lambda kv: kv[1])\nt = t + vals[0][1]",
    "t = t * max(1, k) + min([2, 3]) + sum([1, 2])",
    "if any(d > 3 for d in t.shape):\n    t = t * 2",
    "if all(isinstance(v, int) for v in t.shape):\n    t = t + 1",
    "if isinstance(t, torch.Tensor) and not isinstance(k, float):\n    t = t + k",
    "name = f'{{CFG.name}}:{{t.shape[-1]}}'\nt = t * len(name)",
    "key = f'step{{k}}_{{t.dim()}}'\nG_DICT[key] = t.shape[0]",
    "try:\n    raise ValueError('boom')\nexcept ValueError:\n    t = t + 1\n"
    "finally:\n    t = t * 2",
    "try:\n    v = {{'a': 1}}['b']\nexcept KeyError:\n    t = t - 1",
    "try:\n    t = t + 1\nfinally:\n    out.append(len(out))",
    "try:\n    t = t / {c}\nexcept ZeroDivisionError:\n    t = t * 0",
    "with scaled(2.0) as fac:\n    t = t * fac",
    "with torch.no_grad():\n    t = t + 1",
    "def inner(v, *rest, **opts):\n    return v + len(rest) + opts.get('z', 0)\n"
    "t = inner(t, 1, 2, z={c})",
    "m = map(lambda v: v * 2, [1, 2])\nt = t + sum(m)",
    "t = t + len([v for v in filter(None, [0, 1, 2])])",
]
SIDE_EFFECTS = [
    "G_LIST.append(t.shape[0])",
    "G_LIST.append(t * 1)",
    "G_DICT['n'] += 1",
    "G_DICT['last'] = t.sum()",
    "G_DICT.setdefault('seen', []).append(k)",
    "STATE.total += 1",
    "STATE.add(k)",
    "CFG.steps = CFG.steps + 1",
    "acc.append(t.mean())",
    "acc.extend([1, 2])",
    "acc[0] = acc[0] + 1",
    "acc.pop()",
    "acc.insert(0, t.shape[-1])",
    "x.add_(1)",
    "y.mul_(2)",
    "x[0] = 0.0",
    "MOD.calls += 1",
    "MOD.scale = 0.5\nt = MOD(t)",
    "t = MOD(t)",
    "MOD.last_shape = tuple(t.shape)",
    "t = t + COUNTER()",
    "global G_LIST\nG_LIST = G_LIST + [k]",
    "acc.sort(reverse=True)", "acc.reverse()", "acc[:] = [k, 1]", "del acc[0]", "acc *= 2",
    "acc.clear()\nacc.append(k)", "G_LIST.append(acc)", "G_DICT['acc'] = acc\nacc.append(3)",
    "STATE.items.append(t)", "STATE.items.clear()", "Acc.flag = k", "G_DICT.pop('n', None)",
    "G_DICT.update(k=k)", "del G_DICT['n']", "G_DICT.clear()", "setattr(STATE, 'extra', k)",
    "x[:, 0].mul_(2)", "x.t_()", "y.unsqueeze_(0)", "x.clamp_(min=0)", "MOD.train(False)",
    "t = side_and_break(t)", "t = sum(gen_side(t))", "for v in gen_side(t):\n    t = t + v",
    # the collections' own containers and an iterator, held by the module
    "G_DEQUE.append(k)", "G_DEQUE.appendleft(t.shape[0])",
    "G_DEQUE.extend([1, k])\nt = t + len(G_DEQUE)", "G_DEQUE.rotate(1)",
    "if G_DEQUE:\n    t = t + G_DEQUE.pop()", "G_COUNTER[k] += 1",
    "G_COUNTER.update('ab')\nt = t + G_COUNTER['a']", "G_COUNTER.subtract({{k: 1}})",
    "G_ODICT[k] = t.shape[-1]\nG_ODICT.move_to_end(k, last=False)",
    "if len(G_ODICT) > 1:\n    G_ODICT.popitem(last=False)", "G_ODICT.update(b=k)",
    "G_DDICT[k].append(t.shape[-1])", "t = t + len(G_DDICT[k])", "G_DDICT['n'].extend(acc)",
    "G_DICT[Mode.FAST] = k", "t = t + next(G_IT)", "t = t + sum(itertools.islice(G_IT, 2))",
]
# reads of state earlier calls changed: a guard must notice when it changed
READS = [
    "t = t * len(G_LIST)", "if len(G_LIST) > 3:\n    t = t + 1",
    "if G_DICT.get('n', 0) > 2:\n    t = t - 1", "t = t + STATE.total + STATE.count",
    "t = t * MOD.calls", "if CFG.steps > 3:\n    t = t * 2", "t = t + len(acc)",
    "if MOD.training:\n    t = t + 1", "t = t + COUNTER.__closure__[0].cell_contents",
    "t = t + len(G_DICT)", "if 'acc' in G_DICT:\n    t = t + len(G_DICT['acc'])",
    "t = t + getattr(Acc, 'flag', 0)", "t = t + sum(v for v in acc if isinstance(v, int))",
    "t = t * x.shape[0]", "t = t + sum(G_DEQUE) + len(G_DEQUE)",
    "t = t + sum(G_COUNTER.values()) + len(G_COUNTER)",
    "t = t + sum(G_ODICT.values()) + len(list(G_ODICT))",
    "t = t + sum(len(v) for v in G_DDICT.values())", "t = t + G_DICT.get(Mode.FAST, 0)",
]
# graph breaks in both compilers (a branch on a tensor's value, a tensor's value as a Python
# number): the side effects pending at the break must be replayed before the rest runs
BREAKS = [
    "if t.sum() > 0:\n    t = t + 1\nelse:\n    t = t - 1",
    "v = t.max().item()\nt = t + v",
    "vals = t[0].tolist()\nt = t + len(vals) + vals[0]",
    "if (t > 0).any():\n    G_LIST.append(len(out))",
    "while t.abs().max() > 2:\n    t = t * 0.5",
]
# more of the language: classes with properties, setters, super(), dunders; frozen and
# post-init dataclasses; exceptions across calls and context managers; recursion; walrus,
# match, partially consumed generators, string formatting, contextlib helpers
LANGUAGE = [
    "c = Child.make(3)\nc.w = 2\nt = c(t) + len(c) + c[1] + sum(c) + Child.shift(1)",
    "SHARED.w = k\nt = SHARED.apply(t)",
    "t = t * SHARED.w + Base.shift(k)",
    "fr = Frozen(2, ('a',))\nfr2 = dataclasses.replace(fr, a=3)\nt = t * fr2.a + len(fr.tags)",
    "wp = WithPost(1.5)\nwp.items.append(k)\nt = t * wp.double + len(wp.items)",
    "try:\n    raise_boom(k)\nexcept Boom as e:\n    t = t + len(str(e))",
    "try:\n    raise_boom(-1)\nexcept (Boom, KeyError):\n    t = t * 0\nelse:\n    t = t + 1",
    "try:\n    with scaled(2.0):\n        raise KeyError('a')\nexcept KeyError:\n    t = t + 1",
    "try:\n    try:\n        raise ValueError('in')\n    except ValueError as e:\n"
    "        raise Boom('out') from e\nexcept Boom as e:\n    t = t + (e.__cause__ is not None)",
    "with contextlib.suppress(KeyError):\n    t = t + {{'a': 1}}['b']",
    "with contextlib.nullcontext(3) as v, scaled(1.0) as w:\n    t = t * v * w",
    "t = t + fact({c})",
    "if (n := t.size(0)) > 2:\n    t = t + n",
    "match k:\n    case 1:\n        t = t + 1\n    case 2 | 3:\n        t = t * 2\n"
    "    case _:\n        t = t - 1",
    "match t.shape:\n    case (a, b):\n        t = t + a - b\n    case _:\n        pass",
    "g = gen(t, 3)\nfirst = next(g)\nt = t + first\nt = t + next(g)",
    "label = '-'.join(str(d) for d in t.shape)\nt = t + len(label) + len('%d:%s' % (k, 'a'))",
    "t = t + len('{{}}/{{}}'.format(k, t.dim()))",
    "n, m = t.shape\nt = t.reshape(m, n).t() + t.new_zeros(n, m)",
    "for i, row in enumerate(t, start=1):\n    out.append(i)",
    "t = t + len({{v % 2 for v in range(5)}}) + len({{v: v for v in range(3) if v}})",
    "global COUNT\nCOUNT += 1\nt = t + COUNT",
    "t = functools.reduce(lambda p, q: p + q, [t, t, 1])",
    "for a, (b, c2) in zip(range(2), [(1, 2), (3, 4)]):\n    t = t + a * b - c2",
]
# idioms of model libraries' Python: unbound str methods, map/filter with unpacking,
# functools.wraps and reduce, operator getters, itertools, collections, enum members, typing
# casts, math on Python numbers, walrus, match, dict and set operators, string formatting,
# closures over loop variables, classmethod/staticmethod/super(), dunders of user classes,
# getattr/hasattr/vars, grad modes, torch.Size arithmetic, tuple comparisons
IDIOMS = [
    "name = 'Layer_Norm'\nt = t * len(str.lower(name).split('_')) + str.isupper(name[0])",
    "names = list(map(str.upper, ['a', 'bc']))\nt = t + len(names[1]) + sum(map(len, names))",
    "t = t + str.lower('AB').count('a') + len(str.join('-', ['a', 'b'])) + "
    "str.startswith('ab', 'a')",
    "t = t + sum(map(lambda a, b: a * b, [1, 2], [3, {c}]))",
    "t = t + sum(map(operator.mul, [1, 2], [k, 3]))",
    "for i, (a, b) in enumerate(map(lambda v: (v, v * 2), [1, {c}])):\n    t = t + i * a - b",
    "t = t + sum(a for a, _ in filter(lambda p: p[1], [(1, True), ({c}, False)]))",
    "t = sum(map(lambda tv: tv[0] * tv[1], zip([t, x], [1.0, 2.0])))",
    "pairs = list(filter(lambda kv: kv[1] > 1, {{'a': 1, 'b': {c}}}.items()))\n"
    "t = t + len(pairs)",
    "t = double(t) + double(t, factor={c})",
    "t = t + len(double.__name__) + (double.__wrapped__ is not None) + len(double.__doc__)",
    "t = t + functools.reduce(operator.mul, [1, 2, {c}], 1)",
    "t = functools.reduce(lambda p, q: p * 0.5 + q, [t, x, t])",
    "t = t + functools.reduce(lambda p, q: p + q, map(len, ['a', 'bb']), k)",
    "get = operator.itemgetter(1)\nt = t + get([0, {c}, 2]) + get(t.shape)",
    "a, b = operator.itemgetter(0, -1)(t.shape)\nt = t + a * b",
    "t = t * operator.attrgetter('scale')(CFG) + operator.attrgetter('w')(SHARED)",
    "vals = sorted([Point(2, 1), Point(1, {c})], key=operator.attrgetter('a'))\n"
    "t = t + vals[0].b",
    "vals = sorted([(2, 'b'), (1, 'a')], key=operator.itemgetter(0))\nt = t + vals[0][0]",
    "t = t + sum(itertools.chain([1, 2], ({c},))) + len(list(itertools.chain.from_iterable("
    "[[1], [2, 3]])))",
    "t = sum(itertools.chain([t], [x, y]))",
    "t = t + sum(a * b for a, b in itertools.product(range(2), [1, {c}]))",
    "t = t + list(itertools.accumulate([1, 2, {c}]))[-1]",
    "t = list(itertools.accumulate([t, x, t], lambda p, q: p * q))[-1]",
    "t = t + sum(itertools.islice(itertools.count(1), 3)) + len(list(itertools.islice('abcd', "
    "1, None, 2)))",
    "for key, grp in itertools.groupby([1, 1, 2, {c}]):\n    t = t + key * len(list(grp))",
    "for a, b in itertools.zip_longest([1, 2], [3], fillvalue={c}):\n    t = t + a * b",
    "t = t + len(list(itertools.combinations(range(4), 2))) + "
    "len(list(itertools.permutations('ab')))",
    "for a, b in itertools.pairwise([1, 2, {c}]):\n    t = t + (b - a)",
    "for i, v in zip(itertools.count(), [t, x]):\n    t = t + v * i",
    "od = collections.OrderedDict(a=t, b=x)\nod.move_to_end('a')\n"
    "t = list(od.values())[-1] + len(od) + (next(iter(od)) == 'b')",
    "dd = collections.defaultdict(list)\nfor i in range({c} + 1):\n    dd[i % 2].append(i)\n"
    "t = t + len(dd) + sum(dd[0])",
    "dd = collections.defaultdict(int)\nfor w in 'a b a'.split():\n    dd[w] += 1\n"
    "t = t + dd['a'] + dd['z'] + len(dd)",
    "dq = collections.deque([t, x], maxlen=3)\ndq.appendleft(t * 2)\ndq.append(y)\n"
    "t = dq[0] + dq[-1] + len(dq)",
    "dq = collections.deque(range({c}))\ndq.rotate(1)\nt = t + dq.popleft() + len(dq)",
    "cnt = collections.Counter('abca')\nt = t + cnt['a'] + cnt.most_common(1)[0][1] + cnt['z']",
    "cnt = collections.Counter([k, 1, k])\ncnt.update([1])\nt = t * cnt[1] + len(cnt)",
    "ch = collections.ChainMap({{'a': 1}}, {{'a': 2, 'b': {c}}})\nt = t + ch['a'] + ch['b']",
    "mode = Mode.FAST if k > 2 else Mode.SLOW\nif mode is Mode.FAST:\n    t = t * 2\n"
    "t = t + mode.value + len(mode.name)",
    "t = t + Mode(2).value + len(list(Mode)) + (Mode['FAST'] == Mode.FAST)",
    "t = t * {{Mode.FAST: 1, Mode.SLOW: {c}}}[Mode.SLOW] + isinstance(Mode.FAST, Mode)",
    "t = t + Level.HIGH + (Level.LOW < Level.HIGH) + len(Act.RELU) + (Act.RELU == 'relu')",
    "v = typing.cast(torch.Tensor, t)\nn = typing.cast(int, k)\nt = v * n",
    "if typing.TYPE_CHECKING:\n    t = t * 0\nelse:\n    t = t + 1",
    "t = t * math.sqrt(k) + math.floor(2.5) + math.log2(8) + math.ceil(k / 2)",
    "t = t / math.prod(t.shape) + math.gcd(k, 6) + math.isclose(0.1 + 0.2, 0.3)",
    "t = t * math.cos(math.pi / {c}) + math.exp(-k) + math.hypot(3, 4)",
    "t = t / math.sqrt(t.shape[-1]) + math.log(k + 1) + math.isinf(-math.inf)",
    "t = t + math.comb({c} + 2, 2) + math.factorial(k) + math.fsum([0.1] * 3) + math.trunc(-1.5)",
    "if (m := max(t.shape)) > 3:\n    t = t + m",
    "vals = [w for v in range(4) if (w := v * k) > 2]\nt = t + len(vals)",
    "while (n := len(out)) < 2:\n    out.append(n)",
    "match (k, t.dim()):\n    case (2, d):\n        t = t * d\n    case (_, 2):\n"
    "        t = t + 1\n    case _:\n        pass",
    "match {{'kind': 'scale', 'v': k}}:\n    case {{'kind': 'scale', 'v': int(v)}}:\n"
    "        t = t * v\n    case _:\n        t = t - 1",
    "match [t, k]:\n    case [tt, 2]:\n        t = tt + 1\n    case [tt, *rest]:\n"
    "        t = tt - len(rest)",
    "match CFG:\n    case Cfg(steps=s, name=nm):\n        t = t + s + len(nm)",
    "match Point(1, k):\n    case Point(a=1, b=b):\n        t = t + b\n    case _:\n        pass",
    "match Mode(k % 2 + 1):\n    case Mode.FAST:\n        t = t + 1\n    case Mode.SLOW:\n"
    "        t = t * 2",
    "match k:\n    case int() if k > 2:\n        t = t + k\n    case float() | str():\n"
    "        pass\n    case _:\n        t = t - 1",
    "d = {{'a': 1}} | {{'b': k}}\nd |= {{'a': {c}}}\nt = t + d['a'] + d['b'] + len(d)",
    "base = {{'x': t}}\nmerged = {{**base, 'y': t * 2}}\nt = merged['y'] - merged['x']",
    "s = {{1, 2, k}} & {{2, 3}} | {{4}}\nt = t + len(s) + len(s - {{4}}) + len({{1}} ^ {{1, 2}})",
    "s = set(range(k))\ns |= {{5}}\ns -= {{0}}\nt = t + sum(sorted(s)) + (2 in s) + "
    "s.issubset(range(10))",
    "fs = frozenset('abc')\nt = t + len(fs.union('d')) + fs.isdisjoint({{'z'}}) + "
    "len(fs & {{'a'}})",
    "name = 'encoder.layer.{c}.weight'\nparts = name.split('.')\n"
    "t = t * int(parts[2]) + len('.'.join(parts[:2])) + name.rsplit('.', 1)[-1].isalpha()",
    "s = ', '.join(f'{{d}}' for d in t.shape)\nt = t + len(s)",
    "key = 'layer_{{}}'.format(k)\nt = t + key.startswith('layer') + len(key.upper()) + "
    "key.count('_')",
    "s = f'{{k:03d}}|{{1.5:.2f}}|{{\"ab\"!r}}|{{t.dim():>4}}'\nt = t + len(s)",
    "t = t + 'abc'.replace('b', 'xy').find('x') + 'A-B'.lower().split('-').index('b')",
    "s = '%s=%.2f' % ('a', 1.5)\nt = t + len(s.strip().rstrip('0')) + len('%(n)d' % {{'n': k}})",
    "t = t + int('12') + float('1.5') + len(str(k).zfill(3)) + len(repr(t.shape))",
    "fns = []\nfor i in range(3):\n    def f(v, i=i):\n        return v * i\n    fns.append(f)\n"
    "t = sum(f(t) for f in fns)",
    "fns = [lambda v, i=i: v + i for i in range({c})]\nt = fns[-1](t) + len(fns)",
    "fns = [lambda v: v + i for i in range({c})]\nt = fns[0](t)",
    "layer = Scaled.make({c})\nt = layer(t) + Base.shift(k) + Scaled.shift(1) + len(layer)",
    "t = Scaled({c}, scale=0.5)(t) + isinstance(Scaled(1), Base) + issubclass(Scaled, Child)",
    "t = t + (type(Scaled(1)).__name__ == 'Scaled') + len(Scaled.__mro__) + "
    "Scaled(1).describe().count('S')",
    "sq = Seq(t, x, 1)\nt = sq[0] + sq[1] * len(sq) + sum(v for v in sq if isinstance(v, int))",
    "a, b, c2 = Seq(1, 2, {c})\nt = t * c2 + a + sum(Seq(1, 2)[::-1]) + (2 in Seq(1, 2))",
    "t = t * getattr(CFG, 'missing', {c}) + getattr(CFG, 'steps') + getattr(MOD, 'nope', 0)",
    "if hasattr(MOD, 'scale') and not hasattr(MOD, 'nope'):\n    t = t + 1",
    "t = t + len(vars(Cfg(scale=1.0))) + vars(CFG)['steps']",
    "t = t + sum(v for v in vars(Scaled(k)).values()) + sum(Scaled(k))",
    "if isinstance(k, (float, int)) and not isinstance(t, (list, tuple)):\n    t = t + k",
    "t = t + sum(1 for v in [1, 2.0, 'a', t] if isinstance(v, (int, float)))",
    "with torch.no_grad():\n    t2 = t * 2\nt = t + t2 + t2.requires_grad",
    "with torch.enable_grad():\n    t = t + 1",
    "with torch.no_grad():\n    with torch.enable_grad():\n        t = t * 2\n"
    "    t = t + torch.is_grad_enabled()",
    "w = t.detach().requires_grad_()\nwith torch.no_grad():\n    v = w * 2\n"
    "t = t + v.requires_grad + (w * 2).requires_grad + v",
    "with torch.set_grad_enabled(k > 2):\n    t = t * 2\nt = t + torch.is_grad_enabled()",
    "s = t.shape + (1,)\nt = t.reshape(s).squeeze(-1) + len(s)",
    "t = t + t.shape.numel() + t.shape[-1:].numel()",
    "s = t.shape\nt = t.expand(2, *s).sum(0) + (s == torch.Size(list(s)))",
    "t = t.view(*t.shape[:-1], -1, 1).squeeze(-1) + t.shape.count(t.size(0))",
    "t = t.new_zeros(torch.Size([1]) + t.shape[1:]) + t",
    "v = t.sum().item()\nt = t + math.tanh(v) + abs(v) ** 0.5",
    "vals = t.flatten().tolist()\nt = t + max(vals) - min(vals) + math.fsum(vals) / len(vals)",
    "if (t.dim(), k) >= (2, 2):\n    t = t + 1",
    "if tuple(t.shape) < (4, 10):\n    t = t * 2",
    "t = t + max([(1, 'b'), (1, 'a'), (0, 'z')])[0] + sorted([(k, 1), (1, 2)])[0][1]",
    "if (1, 2) < (1, k, 0) and t.shape >= (1,):\n    t = t - 1",
]
TENSOR = ["t = " + template.replace("{a}", "t") for template in UNARY] + [
    "t = t + y", "t = t * x", "t = t.relu() + y.sum()", "t = t.clone()", "t = t.t().t()",
]
KINDS = [(CONTROL, 3), (CONTAINERS, 3), (FUNCTIONS, 3), (SIDE_EFFECTS, 4), (READS, 2),
         (BREAKS, 1), (LANGUAGE, 3), (TENSOR, 3), (IDIOMS, 5)]
# blocks a snippet may be nested in
BLOCKS = [
    "for j in range(2):", "if t.size(0) > 2:", "if k % 2 == 0:", "with scaled(1.0):",
    "if isinstance(acc, list):", "while len(out) < 2:\n    out.append(t.dim())",
]


@dataclass
class Program:
    seed: int
    shape: tuple[int, int]
    snippets: list[str]
    tail: str = "return t, out"

    @property
    def filename(self) -> str:
        return f"<python_fuzzer seed {self.seed}>"

    @property
    def source(self) -> str:
        body = ["t = x + 0", "out = []", *self.snippets, self.tail]
        text = "\n".join(body)
        return PRELUDE + "\ndef program(x, y, acc, k):\n" + _indent(text) + "\n"

    def module(self) -> dict[str, Any]:
        """A fresh namespace: the program and its own, untouched, initial state."""
        source = self.source
        linecache.cache[self.filename] = (len(source), None, source.splitlines(True),
                                          self.filename)
        module = types.ModuleType(f"python_fuzzer_seed_{self.seed}")
        sys.modules[module.__name__] = module   # dataclasses look their module up
        exec(compile(source, self.filename, "exec"), module.__dict__)
        return module.__dict__

    def calls(self, dtype: torch.dtype = torch.float32) -> list[tuple[str, tuple]]:
        """The calls ``check`` makes, in order: (what, (x, y, acc, k)); the float64
        referee's calls with ``dtype=torch.float64`` (the same values)."""
        n, m = self.shape
        return [("first call", self.inputs(self.seed, n, m, 2, dtype)),
                ("cache hit", self.inputs(self.seed + 1, n, m, 2, dtype)),
                ("another k", self.inputs(self.seed + 2, n, m, 3, dtype)),
                ("another leading size", self.inputs(self.seed + 3, n + 3, m, 2, dtype))]

    @staticmethod
    def inputs(seed: int, n: int, m: int, k: int, dtype: torch.dtype = torch.float32) -> tuple:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, m, generator=g)
        y = torch.randn(m, generator=g)
        return x.to(dtype), y.to(dtype), [1, 2], k


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in text.splitlines())


def _runs_eagerly(program: Program) -> bool:
    """Does ``program`` run eagerly on every call ``check`` makes, to a finite result that
    float32 rounding does not already blur? A program whose float32 result is far from its
    float64 one (``sin`` of 1e5, a difference of near-equal large numbers) is
    ill-conditioned: any two correct float32 computations of it differ as much, and
    comparing them says nothing about the compiler."""
    try:
        namespace, referee = program.module(), program.module()
        for (_, args), (_, args64) in zip(program.calls(), program.calls(torch.float64)):
            t, out = namespace["program"](*args)
            if not isinstance(t, torch.Tensor) or not torch.isfinite(t).all() or \
                    t.abs().max() > 1e6:
                return False
            try:
                t64, _ = referee["program"](*args64)
            except Exception:   # noqa: BLE001 -- float64 takes another path: no referee
                continue
            if isinstance(t64, torch.Tensor) and t64.shape == t.shape and \
                    not torch.allclose(t.double(), t64.double(), rtol=1e-3, atol=1e-3):
                return False
    except Exception:   # noqa: BLE001 -- Python or PyTorch refuses it: pick again
        return False
    return True


def make_program(seed: int, snippets: int = 12) -> Program:
    """A valid random program: each snippet is kept only if the whole program still runs
    eagerly on every call ``check`` makes."""
    rng = random.Random(seed)
    program = Program(seed, (rng.choice([2, 3, 4, 5]), rng.choice([3, 4])), [])
    attempts = 0
    while len(program.snippets) < snippets and attempts < snippets * 10:
        attempts += 1
        templates = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
        text = rng.choice(templates).format(
            u=rng.choice(UNARY).format(a="t", s=round(rng.uniform(-2, 2), 2)),
            c=rng.randint(1, 4), s=round(rng.uniform(-2, 2), 2))
        if rng.random() < 0.25 and not text.startswith(("def ", "global ", "calls = ")):
            text = rng.choice(BLOCKS) + "\n" + _indent(text)
        program.snippets.append(text)
        if not _runs_eagerly(program):
            program.snippets.pop()
    if rng.random() < 0.3:   # an early return taken on some calls
        for tail in ("if t.size(0) > 3:\n    return t.sum(0), out\nreturn t, out",
                     "return (t, out) if k > 2 else (t * 2, out)"):
            candidate = Program(seed, program.shape, program.snippets, tail)
            if _runs_eagerly(candidate):
                program = candidate
                break
    return program


# --- comparison -------------------------------------------------------------------------------
def differences(got: Any, want: Any, path: str = "", ref64: Any = None) -> list[str]:
    """Where ``got`` differs from ``want``: tensors to TOL, containers item by item, objects
    attribute by attribute, everything else by ``==``. ``ref64``, where given, is the same
    value from a float64 run of the program (a *referee*): a tensor or float that is not
    close to eager's is still right when it is no further from the referee than eager's own
    float32 result is (``program_fuzzer.same``, PyTorch's accuracy rule) -- a compiled
    ``sin`` of 1e5 rounds differently from eager's, and neither is more right. The referee
    counts only where its run took eager's path (:func:`_agrees`)."""
    ref64 = ref64 if ref64 is not None and _agrees(ref64, want) else None
    return _differences(got, want, path, ref64)


def _children(value: Any) -> list[tuple[str, Any]] | None:
    """The items ``differences`` compares one by one, with their path suffixes (None for a
    value compared whole)."""
    if isinstance(value, (list, tuple, collections.deque)):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return [(f"[{_key(key)!r}]", v) for key, v in value.items()]
    if type(value) in _SEQUENCE_ITERATORS:   # what is left, and where
        return [(".__reduce__()", value.__reduce__()[1:])]
    if isinstance(value, torch.nn.Module):
        return [*_children(_public(value)), (".training", value.training)]
    if callable(value) and getattr(value, "__closure__", None):
        return [(".<cells>", [c.cell_contents for c in value.__closure__])]
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return _children(_public(value))
    return None


_SEQUENCE_ITERATORS = (type(iter(range(0))), type(iter([])), type(iter(())))


def _key(key: Any) -> Any:
    """A key as the runs can compare it: each run has its own enum classes."""
    return (type(key).__qualname__, key.name) if isinstance(key, enum.Enum) else key


def _agrees(ref64: Any, want: Any) -> bool:
    """Did the float64 run end where eager did: the same structure, the same keys, lengths,
    ints and strings, tensors of the same shape, floats where eager has floats? (A branch on
    ``t.dtype`` takes another path in float64; then the referee says nothing.)"""
    if isinstance(want, torch.Tensor):
        return isinstance(ref64, torch.Tensor) and ref64.shape == want.shape
    if type(ref64).__qualname__ != type(want).__qualname__:
        return False
    if isinstance(want, float):
        return True
    children, ref_children = _children(want), _children(ref64)
    if children is None or ref_children is None:
        try:
            return children is None and ref_children is None and bool(_key(ref64) == _key(want))
        except Exception:   # noqa: BLE001 -- not comparable: no referee
            return False
    return [p for p, _ in children] == [p for p, _ in ref_children] and \
        all(_agrees(r, w) for (_, r), (_, w) in zip(ref_children, children))


def _refereed(got: Any, want: Any, ref64: Any) -> bool:
    """Is ``got`` (a tensor or float) as close to the float64 referee as eager is?"""
    if ref64 is None:
        return False
    if isinstance(want, float):
        got, want, ref64 = (torch.tensor(v, dtype=torch.float64) for v in (got, want, ref64))
    return isinstance(got, torch.Tensor) and got.is_floating_point() and \
        same(got, want, ref64)


def _differences(got: Any, want: Any, path: str, ref64: Any) -> list[str]:
    if type(got).__qualname__ != type(want).__qualname__:   # each run has its own classes
        return [f"{path}: {type(got).__name__} vs {type(want).__name__}"]
    if isinstance(want, torch.Tensor):
        try:
            torch.testing.assert_close(got, want, rtol=TOL, atol=TOL, equal_nan=True)
        except AssertionError as e:
            if _refereed(got, want, ref64):
                return []
            return [f"{path}: " + " ".join(str(e).split())[:200]]
        return []
    if isinstance(want, float) and got != want and _refereed(got, want, ref64):
        return []
    children, got_children = _children(want), _children(got)
    if children is None or got_children is None:
        return [] if _key(got) == _key(want) else [f"{path}: {got!r} vs {want!r}"]
    if isinstance(want, (list, tuple, collections.deque)) and len(got) != len(want):
        return [f"{path}: length {len(got)} vs {len(want)}"]
    if isinstance(want, dict) and list(map(_key, got)) != list(map(_key, want)):
        return [f"{path}: keys {list(got)} vs {list(want)}"]
    if [p for p, _ in children] != [p for p, _ in got_children]:
        return [f"{path}: attributes {[p for p, _ in got_children]} vs "
                f"{[p for p, _ in children]}"]
    refs = [r for _, r in _children(ref64) or []]
    refs = refs if len(refs) == len(children) else [None] * len(children)
    return [d for (suffix, w), (_, g), r in zip(children, got_children, refs)
            for d in _differences(g, w, path + suffix, r)]


def _public(obj) -> dict:
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def _state(namespace: dict[str, Any], args: tuple) -> dict[str, Any]:
    x, y, acc, _ = args
    return {"x": x, "y": y, "acc": acc, **{n: namespace[n] for n in STATE_NAMES}}


@dataclass
class Result:
    seed: int
    wrong: list[str] = field(default_factory=list)     # silent wrong answers
    crashed: list[str] = field(default_factory=list)   # the compiled function raised
    graphs: int = 0
    breaks: list[str] = field(default_factory=list)
    torch_graphs: int | None = None   # 1: whole under fullgraph=True, 2: not
    torch_breaks: list[str] = field(default_factory=list)   # its fullgraph error or breaks

    @property
    def ok(self) -> bool:
        return not self.wrong and not self.crashed


def _explain(program: Program, result: Result, compare_torch: bool) -> None:
    import tutorcompile as tc
    tc.reset()
    args = program.calls()[0][1]
    try:
        explain = tc.explain(program.module()["program"], backend="eager")(*args)
    except Exception as e:   # noqa: BLE001 -- a crash is a finding
        result.crashed.append(f"explain: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return
    result.graphs = explain.graph_count
    result.breaks = [str(r.reason).splitlines()[0] for r in explain.break_reasons] + \
        [f"skipped: {s.splitlines()[0]}" for s in explain.skipped_frames]
    if compare_torch:
        # whole if fullgraph=True succeeds (torch.compile runs a frame that breaks inside a
        # loop uncompiled, and its explain() then counts only the graphs of called functions)
        # and explain() finds no break (under fullgraph it captures ``.item()``, which breaks
        # by default)
        import torch._dynamo
        torch._dynamo.reset()
        try:
            torch.compile(program.module()["program"], backend="eager",
                          fullgraph=True)(*program.calls()[0][1])
            torch._dynamo.reset()
            theirs = torch._dynamo.explain(program.module()["program"])(*program.calls()[0][1])
            result.torch_breaks = [" ".join(str(r.reason).split())[:160]
                                   for r in theirs.break_reasons]
            if theirs.graph_count != 1 and not result.torch_breaks:   # the frame skipped
                result.torch_breaks = [f"{theirs.graph_count} graphs, no break reason"]
        except Exception as e:   # noqa: BLE001 -- its reason is the finding
            result.torch_breaks = [" ".join(str(e).split())[:160]]
        result.torch_graphs = 2 if result.torch_breaks else 1
        torch._dynamo.reset()


def check(program: Program, backend: str = "eager", compare_torch: bool = False) -> Result:
    """Run ``program`` eagerly and compiled, call by call, and compare results and state."""
    import tutorcompile as tc
    result = Result(program.seed)
    _explain(program, result, compare_torch)
    tc.reset()
    eager_ns, compiled_ns, referee_ns = program.module(), program.module(), program.module()
    compiled = tc.compile(compiled_ns["program"], backend=backend)
    referee_runs = True
    for (what, eager_args), (_, compiled_args), (_, referee_args) in zip(
            program.calls(), program.calls(), program.calls(torch.float64)):
        want = eager_ns["program"](*eager_args)
        referee: Any = None
        if referee_runs:   # the float64 referee, in step with eager (its state too)
            try:
                referee = (referee_ns["program"](*referee_args),
                           _state(referee_ns, referee_args))
            except Exception:   # noqa: BLE001 -- float64 changed the path: no referee
                referee_runs = False
        try:
            got = compiled(*compiled_args)
        except Exception as e:   # noqa: BLE001 -- a crash is a finding
            result.crashed.append(f"{what}: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0][:300] if str(e) else ''}")
            return result
        found = differences(got, want, "result", referee and referee[0]) + \
            differences(_state(compiled_ns, compiled_args), _state(eager_ns, eager_args),
                        "", referee and referee[1])
        if found:
            result.wrong += [f"{what}: {d}" for d in found[:4]]
            return result
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:100", help="N, or A:B (a range)")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--snippets", type=int, default=12)
    parser.add_argument("--show", action="store_true", help="print each program's source")
    parser.add_argument("--torch", action="store_true",
                        help="also try torch.compile(fullgraph=True) on each program")
    args = parser.parse_args(argv)
    torch._logging.set_logs(dynamo=logging.ERROR)   # its graph-break warnings, per program
    seeds = seed_range(args.seeds)
    start = time.perf_counter()
    wrong, crashed, one_graph, torch_one_graph = [], [], 0, 0
    breaks: dict[str, list[int]] = {}
    only_ours: dict[str, list[int]] = {}     # tutorcompile's breaks where torch's is whole
    only_theirs: dict[str, list[int]] = {}   # and the other way round
    for seed in seeds:
        program = make_program(seed, args.snippets)
        if args.show:
            print(program.source[len(PRELUDE):])
        try:
            result = check(program, args.backend, args.torch)
        except Exception:   # noqa: BLE001 -- the checker itself failed: show it
            crashed.append(seed)
            print(f"seed {seed}: the check raised\n{traceback.format_exc()}")
            continue
        one_graph += result.graphs == 1 and not result.breaks
        torch_one_graph += result.torch_graphs == 1
        for reason in result.breaks:
            breaks.setdefault(reason, []).append(seed)
        ours_whole = result.graphs == 1 and not result.breaks
        if result.torch_graphs == 1 and not ours_whole:
            for reason in result.breaks or [f"{result.graphs} graphs, no break reason"]:
                only_ours.setdefault(reason, []).append(seed)
        if result.torch_graphs == 2 and ours_whole:
            only_theirs.setdefault(result.torch_breaks[0], []).append(seed)
        if result.wrong:
            wrong.append(seed)
        elif result.crashed:
            crashed.append(seed)
        if not result.ok:
            print(f"seed {seed}: " + "\n  ".join(result.wrong + result.crashed) +
                  ("" if args.show else "\n" + program.source[len(PRELUDE):]), flush=True)
    seconds = time.perf_counter() - start
    print(f"{len(seeds)} programs, backend {args.backend}, {seconds:.0f} s: "
          f"{len(seeds) - len(wrong) - len(crashed)} right, {len(wrong)} wrong {wrong[:20]}, "
          f"{len(crashed)} crashed {crashed[:20]}; one graph: tutorcompile {one_graph}"
          + (f", torch.compile {torch_one_graph}" if args.torch else ""))
    for reason, where in sorted(breaks.items(), key=lambda kv: -len(kv[1])):
        print(f"  break x{len(where)}: {reason}  (seeds {where[:6]})")
    if args.torch:
        print("tutorcompile's breaks in programs torch.compile captures whole:")
        for reason, where in sorted(only_ours.items(), key=lambda kv: -len(kv[1])):
            print(f"  x{len(where)}: {reason}  (seeds {where[:6]})")
        print("torch.compile's breaks in programs tutorcompile captures whole:")
        for reason, where in sorted(only_theirs.items(), key=lambda kv: -len(kv[1])):
            print(f"  x{len(where)}: {reason}  (seeds {where[:6]})")
    return 1 if wrong or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
