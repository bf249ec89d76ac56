"""Dead-code elimination and common-subexpression elimination.

* ``dce`` drops nodes whose values nobody reads -- unless running them has an effect
  (an in-place op, a print, a random draw that advances the generator).
* ``cse`` merges nodes that compute the same thing from the same inputs -- unless they are
  random (two ``torch.rand`` calls must differ) or have effects.

Both rely on the same question, "may this node be removed or merged?", answered once in
:func:`is_impure` and :func:`is_random`.

Mirrors: torch/fx/passes/dead_code_elimination (Graph.eliminate_dead_code) and
torch/_inductor/pattern_matcher's CSE.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

import torch

from ..graph import Graph
from ..node import Node

# Call targets that change state outside their own result.
_EFFECTFUL_FUNCTIONS = {print, operator.setitem, operator.delitem, torch.manual_seed,
                        setattr, delattr}
_RANDOM_WORDS = ("rand", "dropout", "bernoulli", "normal", "multinomial", "uniform",
                 "poisson", "exponential", "geometric", "cauchy", "log_normal",
                 "rrelu", "gumbel", "fractional_max_pool")


# Normalization functions that update running statistics in place, and where their
# arguments sit: (running_mean's position, the flag's position and name). They write only
# when given running statistics and the flag is not False.
_RUNNING_STATS = {
    torch.nn.functional.batch_norm: (1, 5, "running_mean", "training"),
    torch.nn.functional.instance_norm: (1, 5, "running_mean", "use_input_stats"),
    torch.batch_norm: (3, 5, "running_mean", "training"),
    torch.instance_norm: (3, 5, "running_mean", "use_input_stats"),
}


def updates_running_stats(node: Node) -> bool:
    """``F.batch_norm(x, mean, var, training=True)``: the call writes ``mean`` and ``var``
    (BatchNorm's running statistics) although its result is a new tensor."""
    where = _RUNNING_STATS.get(node.target) if node.op == "call_function" else None
    if where is None:
        return False
    stats_at, flag_at, stats_name, flag_name = where

    def argument(position, name, default):
        if len(node.args) > position:
            return node.args[position]
        return node.kwargs.get(name, default)
    flag_default = flag_name == "use_input_stats"      # (batch_norm's training: False)
    return argument(stats_at, stats_name, None) is not None and \
        argument(flag_at, flag_name, flag_default) is not False


def _target_name(node: Node) -> str:
    if node.op in ("call_method", "call_module"):
        return str(node.target)
    return getattr(node.target, "__name__", "") or ""


def is_random(node: Node) -> bool:
    """True if the node draws random numbers (so two copies of it give different values):
    a sampler by its name (``torch.rand``, ``F.dropout``), or a call that drops out by an
    argument (``F.scaled_dot_product_attention(..., dropout_p=0.1)``, ``torch.lstm`` with
    ``dropout`` and ``train``)."""
    if node.op not in ("call_function", "call_method"):
        return False
    name = _target_name(node).lower()
    return any(word in name for word in _RANDOM_WORDS) or _drops_out_by_argument(node)


def _drops_out_by_argument(node: Node) -> bool:
    """Some calls draw only when told to: an argument named for dropout (``dropout_p``,
    ``dropout``) that is not 0, with no ``train``/``training`` argument saying False. The
    names come from the call's signatures (a builtin's from its ATen schemas, every overload:
    ``lstm.input`` and ``lstm.data`` put ``dropout`` at different places). An argument that
    is not a plain number (a graph value) counts as drawing."""
    for names in _parameter_names(node.target) if node.op == "call_function" else []:
        bound = dict(zip(names, node.args))
        bound.update(node.kwargs)
        rates = [v for k, v in bound.items() if "dropout" in k and not isinstance(v, bool)]
        drops = any(not isinstance(v, (int, float)) or v != 0 for v in rates)
        if drops and all(bound.get(flag, True) is not False for flag in ("train", "training")):
            return True
    return False


def _parameter_names(target: Any) -> list[tuple[str, ...]]:
    """The parameter names of each signature ``target`` has: a Python function's one, an
    operator's schemas, a builtin ``torch``/``torch.nn.functional`` function's ATen schemas."""
    try:
        return _PARAMETER_NAMES[target]
    except KeyError:
        names = _PARAMETER_NAMES[target] = _read_parameter_names(target)
        return names
    except TypeError:  # unhashable
        return _read_parameter_names(target)


_PARAMETER_NAMES: dict[Any, list[tuple[str, ...]]] = {}


def _read_parameter_names(target: Any) -> list[tuple[str, ...]]:
    schemas = operator_schemas(target)
    if not schemas and getattr(target, "__module__", None) in (
            None, "torch", "torch._C", "torch._C._nn", "torch._C._VariableFunctions",
            "torch.nn.functional"):
        name = getattr(target, "__name__", None)
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}") if name else []
    if schemas:
        return [tuple(a.name for a in s.arguments) for s in schemas]
    try:
        return [tuple(inspect.signature(target).parameters)]
    except (TypeError, ValueError):
        return []


def operator_schemas(target: Any) -> list:
    """The schemas of an operator -- an ``OpOverload``, every overload of a ``torch.ops``
    packet, the operator a ``torch.library.custom_op`` made -- else []."""
    if isinstance(target, torch._library.custom_ops.CustomOpDef):
        target = target._opoverload
    if isinstance(target, torch._ops.OpOverload):
        return [target._schema]
    if isinstance(target, torch._ops.OpOverloadPacket):
        return [getattr(target, name)._schema for name in target.overloads()]
    return []


def written_arguments(target: Any) -> list[tuple[int, str]] | None:
    """``(position, name)`` of each argument an operator's schema says it writes
    (``Tensor(a!) x``: an in-place aten overload, a custom op's ``mutates_args``), [] for
    an operator that writes none, None for a callable without a schema. Of a packet: the
    positions all its overloads write (``mul_.Tensor`` and ``mul_.Scalar``'s self), not an
    ``out=`` overload's keyword-only ones (chosen by passing ``out=``, a convention of its
    own), and None where the overloads disagree."""
    schemas = operator_schemas(target)
    if not schemas:
        return None
    packet = isinstance(target, torch._ops.OpOverloadPacket)
    written = [[(i, a.name) for i, a in enumerate(s.arguments)
                if a.alias_info is not None and a.alias_info.is_write
                and not (packet and a.kwarg_only)] for s in schemas]
    positions = {tuple(i for i, _ in w) for w in written}
    return written[0] if len(positions) == 1 else None


def is_impure(node: Node) -> bool:
    """True if removing or merging the node could change what the program does."""
    if node.meta.get("impure"):
        return True
    if node.op in ("placeholder", "output"):
        return True
    if node.op == "call_module":
        return True  # a module may update state (BatchNorm statistics, counters)
    if node.op == "call_function" and node.target in _EFFECTFUL_FUNCTIONS:
        return True
    if updates_running_stats(node):
        return True
    name = _target_name(node)
    if node.op in ("call_function", "call_method") and name.endswith("_") \
            and not name.endswith("__"):
        return True  # PyTorch's in-place convention: add_, copy_, relu_
    if node.kwargs.get("out") is not None or node.kwargs.get("inplace") is True:
        return True
    schemas = operator_schemas(node.target) if node.op == "call_function" else []
    if schemas and (any(not s.returns for s in schemas) or written_arguments(node.target)):
        return True  # an operator that writes an argument, or returns nothing (so acts)
    return is_random(node)


def dce(graph: Graph) -> Graph:
    """A copy of ``graph`` without nodes whose results are never used."""
    live: set[Node] = set()
    for node in reversed(graph.nodes):
        if node in live or is_impure(node):
            live.add(node)
            live.update(node.all_input_nodes)
    new = Graph.derived_from(graph, "dce")
    val_map: dict[Node, Node] = {}
    for node in graph.nodes:
        if node in live:
            val_map[node] = new.node_copy(node, val_map.__getitem__)
    return new


def _key(a: Any, canon: dict[Node, Node]) -> Any:
    """A hashable key for an argument structure, with nodes replaced by their representative."""
    if isinstance(a, Node):
        return ("node", id(canon[a]))
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, tuple(_key(x, canon) for x in a))
    if isinstance(a, dict):
        return ("dict", tuple((k, _key(v, canon)) for k, v in a.items()))
    if isinstance(a, slice):
        return ("slice", _key(a.start, canon), _key(a.stop, canon), _key(a.step, canon))
    if isinstance(a, torch.Tensor):
        return ("tensor", id(a))
    try:
        hash(a)
    except TypeError:
        return ("object", id(a))
    return (type(a).__name__, a)  # keeps 1, 1.0 and True apart


def cse(graph: Graph) -> Graph:
    """A copy of ``graph`` where repeated computations of the same value are done once."""
    new = Graph.derived_from(graph, "cse")
    val_map: dict[Node, Node] = {}
    seen: dict[Any, Node] = {}
    for node in graph.nodes:
        if is_impure(node):
            val_map[node] = new.node_copy(node, val_map.__getitem__)
            continue
        key = (node.op, _key(node.target, {}) if not callable(node.target)
               else ("callable", id(node.target)),
               _key(node.args, val_map), _key(node.kwargs, val_map))
        if key in seen:
            val_map[node] = seen[key]
        else:
            val_map[node] = seen[key] = new.node_copy(node, val_map.__getitem__)
    return new
