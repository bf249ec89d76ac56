"""Checks that cannot be fooled: every task of every exercise rejects plausible wrong answers.

A *mutant* is the solution notebook with one task's solution region edited into a mistake a
learner makes (an off-by-one, a missing broadcast reduction, a partition that saves
everything or nothing, a matcher that ignores users, a guard that forgets the dtype, a kernel
with the wrong mask, ...). Each is graded by the real grader, exactly as a learner's
submission would be, and must lose that task's points -- while the other tasks of the same
notebook keep theirs (so a mutant is caught by its own task's check, not by a crash).

Tasks are independent, so the k-th mutants of all tasks of an exercise share one notebook
(a task that runs other tasks' code, listed in DEPENDS, gets notebooks of its own); an
exercise's notebooks are graded in one class run (two kernels at a time). The test prints
the mutant count and grading time per exercise.
"""

import time
from pathlib import Path

import nbformat
import pytest

from tutorcompile.grading.classroom import Exercises, grade_class
from tutorcompile.grading.notebook import read_notebook, split_regions

ROOT = Path(__file__).resolve().parent.parent

# exercise -> task -> [(what the mutant gets wrong, text in the solution region, its
# replacement)]; every occurrence of the text in the task's cell is replaced.
MUTANTS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "ex01_autograd": {
        "t1": [
            ("gradients swapped", "return ops.mul(g, b), ops.mul(g, a)",
             "return ops.mul(g, a), ops.mul(g, b)"),
            ("forgets the incoming gradient", "return ops.mul(g, b), ops.mul(g, a)",
             "return b, a"),
            ("the same gradient twice", "return ops.mul(g, b), ops.mul(g, a)",
             "return ops.mul(g, b), ops.mul(g, b)"),
        ],
        "t2": [
            ("sums only the leading dimensions",
             "    dims += [lead + i for i, size in enumerate(shape) if size == 1 and "
             "grad.shape[lead + i] != 1]\n", ""),
            ("averages instead of summing", "grad.sum(dim=dims, keepdim=True)",
             "grad.mean(dim=dims, keepdim=True)"),
            ("leading dimensions off by one", "lead = grad.ndim - len(shape)",
             "lead = max(grad.ndim - len(shape) - 1, 0)"),
        ],
        "t3": [
            ("drops the factor out", "ops.mul(g, ops.mul(out, ops.sub(1.0, out)))",
             "ops.mul(g, ops.sub(1.0, out))"),
            ("the derivative at the input, not the output",
             "ops.mul(g, ops.mul(out, ops.sub(1.0, out)))",
             "ops.mul(g, ops.mul(a, ops.sub(1.0, a)))"),
            ("torch instead of ops: builds no graph",
             "return (ops.mul(g, ops.mul(out, ops.sub(1.0, out))),)",
             "return (g * torch.sigmoid(a) * (1 - torch.sigmoid(a)),)"),
        ],
        "t4": [
            ("appends before the inputs (pre-order)",
             "        seen.add(id(t))\n", "        seen.add(id(t))\n        order.append(t)\n"),
            ("keeps tensors that need no gradient",
             "                if i.requires_grad:\n                    visit(i)",
             "                visit(i)"),
            ("visits shared tensors twice", "        if id(t) in seen:\n            return\n",
             ""),
        ],
        "t5": [
            ("overwrites fan-out gradients instead of adding them",
             "grads[id(arg)] = grads[id(arg)] + gi if id(arg) in grads else gi",
             "grads[id(arg)] = gi"),
            ("a leaf's .grad is overwritten, not accumulated",
             "t.grad = g if t.grad is None else t.grad + g", "t.grad = g"),
            ("walks the tape forwards", "for t in reversed(order):", "for t in order:"),
        ],
        "t6": [
            ("no reduction: the gradient keeps the output's shape",
             "    return sum_to_shape(grad, x.shape)\n", "    return grad\n"),
            ("a Python number gets a gradient",
             "    if not isinstance(x, torch.Tensor):\n        return None\n",
             "    if not isinstance(x, torch.Tensor):\n        return grad\n"),
            ("grad_b without the minus", "ops.neg(ops.div(ops.mul(g, out), b))",
             "ops.div(ops.mul(g, out), b)"),
            ("grad_b is -g * a / b: one b short", "ops.neg(ops.div(ops.mul(g, out), b))",
             "ops.neg(ops.div(ops.mul(g, a), b))"),
            ("sums only the leading dimensions", "    return sum_to_shape(grad, x.shape)\n",
             "    lead = grad.ndim - len(x.shape)\n"
             "    return grad.sum(dim=tuple(range(lead))) if lead else grad\n"),
        ],
        "t7": [
            ("forward differences",
             "            flat[i] = old - eps\n            down = fn(*inputs).item()\n"
             "            flat[i] = old\n            grad[i] = (up - down) / (2 * eps)\n",
             "            flat[i] = old\n            down = fn(*inputs).item()\n"
             "            grad[i] = (up - down) / eps\n"),
            ("differences in the inputs' own dtype (float32)",
             "x.detach().to(torch.float64).clone()", "x.detach().clone()"),
            ("divides by eps, not 2 * eps", "(up - down) / (2 * eps)", "(up - down) / eps"),
            ("never puts the element back", "            flat[i] = old\n", ""),
            ("g of ones, not random: a rule that forgets g passes",
             "g = torch.randn(out.shape, dtype=torch.float64)",
             "g = torch.ones(out.shape, dtype=torch.float64)"),
            ("zip drops the gradients a rule did not return",
             "    analytic += [None] * (len(inputs) - len(analytic))\n", ""),
            ("shapes not compared: allclose broadcasts", "ours.shape != theirs.shape or", ""),
            ("a loose tolerance", "rtol=1e-5, atol=1e-6)", "rtol=1e-2, atol=1e-2)"),
        ],
    },
    "ex02_fx": {
        "t1": [
            ("ignores the sigmoid's other users", " and len(s.users) == 1", ""),
            ("ignores what the sigmoid is of", " and s.args == (x,)", ""),
            ("ignores which op it is", "s.target is torch.sigmoid and ", ""),
            ("fuses any binary op, not just mul",
             " or mul.target is not operator.mul", ""),
            ("only one operand order", "for x, s in ((a, b), (b, a)):",
             "for x, s in ((a, b),):"),
        ],
        "t2": [
            ("forgets the factor 2", "2 * out.shape.numel() * k", "out.shape.numel() * k"),
            ("K from out_features", ".in_features", ".out_features"),
            ("K from the wrong dimension", "shape[-1]", "shape[-2]"),
        ],
        "t3": [
            ("a pattern on another dim matches nothing",
             "return torch.log(F.softmax(x, dim=-1))", "return torch.log(F.softmax(x, dim=1))"),
            ("the replacement on the wrong dim", "return F.log_softmax(x, dim=-1)",
             "return F.log_softmax(x, dim=0)"),
            ("replaces the pattern with itself", "return F.log_softmax(x, dim=-1)",
             "return torch.log(F.softmax(x, dim=-1))"),
        ],
        "t4": [
            ("does not look inside lists", "isinstance(value, (list, tuple))",
             "isinstance(value, tuple)"),
            ("reflected operators keep the operand order",
             "args = (other, self) if reflected else (self, other)", "args = (self, other)"),
            ("drops keyword arguments", "unwrap(dict(kwargs or {}))", "{}"),
            ("a method call without its tensor", "(self, *args), kwargs)", "args, kwargs)"),
            ("placeholders not named after the parameters",
             "graph.placeholder(name)", "graph.placeholder(f\"arg_{name}\")"),
        ],
        "t5": [
            ("a key without the keyword arguments",
             "key = (node.op, node.target, node.args, tuple(sorted(node.kwargs.items())))",
             "key = (node.op, node.target, node.args)"),
            ("a key without the target", "key = (node.op, node.target, node.args,",
             "key = (node.op, node.args,"),
            ("merges random draws", " or node.target in RANDOM", ""),
            ("returns the graph unoptimised", "    seen = {}\n", "    seen = {}\n    return gm\n"),
        ],
        "t6": [
            ("folds through a parameter that requires grad",
             ' and not getattr(attrs[node.target], "requires_grad", False)', ""),
            ("folds random draws and in-place ops", " or is_impure(node)", ""),
            ("forgets to erase the get_attr nodes left unread",
             "    for node in reversed(graph.nodes):", "    for node in ():"),
            ("folds a node with a non-constant input", "not all(a in values",
             "not any(a in values"),
            ("a folded node's value is not a constant for its users: chains fold one step",
             "        values[constant] = value\n", ""),
        ],
    },
    "ex03_dynamo": {
        "t1": [
            ("pushes the items in order: the last ends on top",
             "f.stack.extend(reversed(items))", "f.stack.extend(items)"),
            ("no length check", "        if len(items) != inst.arg:\n            raise "
             "ValueError(f\"expected {inst.arg} values to unpack, got {len(items)}\")\n", ""),
            ("Python's list() instead of the VM's unpack hook",
             "items = self.unpack(f.pop())", "items = list(f.pop())"),
        ],
        "t2": [
            ("forgets the dtype", " and {ref}.dtype == {value.dtype}", ""),
            ("forgets requires_grad", "\n                f\" and {ref}.requires_grad == "
             "{value.requires_grad}\")", ")"),
            ("isinstance lets True pass for 1",
             "return f\"type({ref}) is {type(value).__name__} and {ref} == {value!r}\"",
             "return f\"isinstance({ref}, {type(value).__name__}) and {ref} == {value!r}\""),
            ("the type but not the value",
             "return f\"type({ref}) is {type(value).__name__} and {ref} == {value!r}\"",
             "return f\"type({ref}) is {type(value).__name__}\""),
        ],
        "t3": [
            ("keeps .item(): a graph break", "peak = h.abs().max()",
             "peak = h.abs().max().item()"),
            ("forgets the minus of the else branch",
             "torch.where(h.sum() > 0, torch.relu(h), -h)",
             "torch.where(h.sum() > 0, torch.relu(h), h)"),
            ("keeps the data-dependent if",
             "    h = torch.where(h.sum() > 0, torch.relu(h), -h)\n",
             "    h = torch.relu(h) if h.sum() > 0 else -h\n"),
        ],
        "t4": [
            ("pops a binary operator's operands in the wrong order",
             "        b, a = self.stack.pop(), self.stack.pop()\n"
             "        self.stack.append(self.apply(BINARY_OPS",
             "        a, b = self.stack.pop(), self.stack.pop()\n"
             "        self.stack.append(self.apply(BINARY_OPS"),
            ("treats an unsupported opcode as a no-op",
             "                if handler is None:\n                    raise Unsupported(f\"the "
             "opcode {inst.opname} is not supported\")\n",
             "                if handler is None:\n                    self.ip += 1\n"
             "                    continue\n"),
            ("no constant folding: Python arithmetic becomes nodes",
             "        if any(isinstance(a, Node) for a in args):\n", "        if True:\n"),
            ("saves the state after the breaking instruction, not before",
             "str(e), stack,\n                                 local_vars)",
             "str(e), self.stack,\n                                 self.locals)"),
            ("pushes the unpacked items in order: the last ends on top",
             "self.stack.extend(reversed(items))", "self.stack.extend(items)"),
            ("a placeholder for every argument, numbers too",
             "self.graph.placeholder(name) if is_tensor else value",
             "self.graph.placeholder(name)"),
            ("returns without giving the graph an output",
             "        self.graph.output(self.stack.pop())\n", "        self.stack.pop()\n"),
        ],
        "t5": [
            ("stack[-n:] takes the whole stack for n == 0",
             "        items = self.stack[len(self.stack) - n:]\n"
             "        del self.stack[len(self.stack) - n:]\n",
             "        items = self.stack[-n:]\n        del self.stack[-n:]\n"),
            ("records any call in the graph, print and helpers too",
             "        elif (getattr(fn, \"__module__\", None) or \"\").split(\".\")[0] == "
             "\"torch\":",
             "        elif True:"),
            ("drops the keyword arguments",
             "kwargs = dict(zip(inst.kw_names, args[len(args) - n:]))", "kwargs = {}"),
            ("a tensor method called without its tensor", "(fn.node, *args), kwargs)",
             "args, kwargs)"),
            ("no builtins: only the function's globals",
             "        if name in self.fn.__globals__:\n"
             "            value = self.fn.__globals__[name]\n"
             "        else:\n            value = vars(builtins)[name]\n",
             "        value = self.fn.__globals__[name]\n"),
        ],
        "t6": [
            ("ignores the jump target", "        if not self.condition():\n"
             "            self.ip = inst.target", "        self.condition()"),
            ("POP_JUMP_IF_FALSE jumps when the condition holds",
             "        if not self.condition():\n", "        if self.condition():\n"),
            ("a jump on a tensor is taken, not a graph break",
             "            raise Unsupported(\"a jump that depends on a tensor's value\")",
             "            return True"),
            ("JUMP falls through", "    def JUMP(self, inst):\n        self.ip = inst.target\n",
             "    def JUMP(self, inst):\n        pass\n"),
        ],
        "t7": [
            ("forgets to guard the dtype",
             "\n                                   f\" and {ref}.dtype == {value.dtype}\"", ""),
            ("forgets to guard the shape",
             "\n                                   f\" and tuple({ref}.shape) == "
             "{tuple(value.shape)}\"", ""),
            ("guards no global it read",
             "            self.guards.append(self.constant_guard(f\"G[{name!r}]\", "
             "self.fn.__globals__[name]))\n", "            pass\n"),
            ("guards every global, read or not",
             "        if name in self.fn.__globals__ and name not in self.read_globals:\n",
             "        for other, v in self.fn.__globals__.items():\n"
             "            if not other.startswith(\"__\"):\n"
             "                self.guards.append(self.constant_guard(f\"G[{other!r}]\", v))\n"
             "        if name in self.fn.__globals__ and name not in self.read_globals:\n"),
            ("a constant guarded by its value only: 1.0 passes for 1",
             "return f\"type({ref}) is {type(value).__name__} and {ref} == {value!r}\"",
             "return f\"{ref} == {value!r}\""),
            ("a global guarded under L, not G", "f\"G[{name!r}]\"", "f\"L[{name!r}]\""),
        ],
    },
    "ex04_aot": {
        "t1": [
            ("forgets the threshold", "return ops.where(ops.gt(scaled, threshold), x, soft)",
             "return soft"),
            ("compares x, not beta * x, with the threshold", "ops.gt(scaled, threshold)",
             "ops.gt(x, threshold)"),
            ("forgets to divide by beta",
             "ops.div(ops.log(ops.add(ops.exp(scaled), 1.0)), beta)",
             "ops.log(ops.add(ops.exp(scaled), 1.0))"),
        ],
        "t2": [
            ("counts the forward outputs too", "outputs[num_fwd_outputs:]", "outputs"),
            ("off by one", "outputs[num_fwd_outputs:]", "outputs[num_fwd_outputs + 1:]"),
            ("4 bytes per element whatever the dtype", "meta.dtype.itemsize", "4"),
            ("counts elements, not bytes", " * meta.dtype.itemsize", ""),
        ],
        "t3": [
            ("saves only the primals: recomputes the matmuls too",
             " or (n.meta.get(\"phase\") == \"forward\" and op_kind(n) == \"extern\")", ""),
            ("saves every forward value", " and op_kind(n) == \"extern\"", ""),
            ("saves the reductions too", "op_kind(n) == \"extern\"",
             "op_kind(n) in (\"extern\", \"reduction\")"),
        ],
        "t4": [
            ("nothing is banned from recomputation",
             "if is_primal(node) or (node in forward and banned(node)):",
             "if is_primal(node):"),
            ("bans what only the backward needs",
             "if is_primal(node) or (node in forward and banned(node)):",
             "if is_primal(node) or banned(node):"),
            ("reductions never banned", "    if kind == \"reduction\":\n",
             "    if False:\n"),
            ("the backward-only nodes are not tied to the sink",
             "            flow.add_edge(node.name + \"_in\", \"sink\", capacity=math.inf)\n"
             "            continue\n", "            continue\n"),
            ("saves the nodes past the cut",
             "if n.name + \"_in\" in reachable and n.name + \"_out\" not in reachable]",
             "if n.name + \"_out\" in reachable]"),
        ],
        "t5": [
            ("later reads see the old value",
             "            for old in [n for n, s in storage.items() if s is base]:\n"
             "                env[old] = new\n", "            env[node] = new\n"),
            ("a write through the returned alias misses the other names",
             "for old in [n for n, s in storage.items() if s is base]:",
             "for old in (node, node.args[0]):"),
            ("an alias's tensor taken to be its own",
             "base = storage[node.args[0]]", "base = node.args[0]"),
            ("keeps the in-place method", "graph.call_method(node.target[:-1],",
             "graph.call_method(node.target,"),
            ("no copy-back of mutated inputs", "updates = tuple(env[p] for p in mutated)",
             "updates = ()"),
        ],
        "t6": [
            ("the unbiased variance (divides by n - 1)",
             "    var = ops.mean(ops.mul(centered, centered), dims, keepdim=True)\n",
             "    var = ops.var(x, dims, correction=1, keepdim=True)\n"),
            ("eps added to the standard deviation, not the variance",
             "ops.rsqrt(ops.add(var, eps))", "ops.div(1.0, ops.add(ops.sqrt(var), eps))"),
            ("normalizes over the last dimension only",
             "tuple(range(len(x.shape) - len(normalized_shape), len(x.shape)))",
             "(len(x.shape) - 1,)"),
            ("normalizes over the leading dimensions",
             "tuple(range(len(x.shape) - len(normalized_shape), len(x.shape)))",
             "tuple(range(len(normalized_shape)))"),
            ("forgets the bias", "        out = ops.add(out, bias)\n", "        pass\n"),
            ("torch.rsqrt instead of ops: no graph, so it stays extern",
             "ops.rsqrt(ops.add(var, eps))", "torch.rsqrt(var + eps)"),
        ],
    },
    "ex05_fusion": {
        "t1": [
            ("mask off by one", "mask = offsets < n_elements",
             "mask = offsets < n_elements - 1"),
            ("broadcasts b along the wrong axis", "b_ptr + offsets % n_cols",
             "b_ptr + (offsets // n_cols) % n_cols"),
            ("every program does the first block", "tl.program_id(0) * BLOCK + ", ""),
            ("the grid drops the ragged block", "(triton.cdiv(n, BLOCK),)",
             "(max(n // BLOCK, 1),)"),
        ],
        "t2": [
            ("fuses reductions too",
             "            if any(b.is_reduction for b in g.buffers):\n"
             "                return False, \"pointwise-only rule: this group holds a "
             "reduction\"\n", ""),
            ("refuses everything", "        return True, \"\"", "        return False, \"no\""),
            ("ignores the element counts",
             "        if len(sizes) > 1:\n", "        if False:\n"),
            ("ignores cycles",
             "        if self.reaches(g1, g2, True) or self.reaches(g2, g1, True):\n",
             "        if False:\n"),
        ],
        "t3": [
            ("constants truncated to integers", "else repr(a)", "else str(int(a))"),
            ("operands in reverse order", ".triton.format(*args)",
             ".triton.format(*reversed(args))"),
            ("every input loaded from the first pointer", "tl.load(in_ptr{i} + offsets",
             "tl.load(in_ptr0 + offsets"),
            ("mask off by one", "mask = offsets < n_elements\")",
             "mask = offsets < n_elements - 1\")"),
        ],
        "t4": [
            ("no modulo: every dim indexed like the first", "if d > 0:", "if False:"),
            ("divides by the input's own sizes: a broadcast dim's size skipped",
             "\n        inner *= shape[d]\n", "\n            inner *= shape[d]\n"),
            ("walks the dims from the first: the first dim varies fastest",
             "for d in reversed(range(len(shape))):", "for d in range(len(shape)):"),
            ("the last dim taken as contiguous: its stride ignored",
             "index if strides[d] == 1 else", "index if strides[d] == 1 or inner == 1 else"),
        ],
        "t5": [
            ("no max subtraction: exp overflows", "tl.exp(x - tl.max(x, axis=0))", "tl.exp(x)"),
            ("masked lanes load 0, not -inf: they add to the sum", "other=-float(\"inf\")",
             "other=0.0"),
            ("assumes contiguous rows", "x_ptr + row * x_row_stride", "x_ptr + row * n_cols"),
            ("one program: only the first row", "softmax_kernel[(n_rows,)]",
             "softmax_kernel[(1,)]"),
        ],
        "t6": [
            ("loop bound off by one: the last element is never written", "i < n_elements;",
             "i < n_elements - 1;"),
            ("the loop runs one past the end", "i < n_elements;", "i <= n_elements;"),
            ("every input read from the first pointer", "in_ptr{k}[i]", "in_ptr0[i]"),
            ("an f after every constant: 2f is not C++", "else repr(a) for a in node.args",
             "else f\"{a!r}f\" for a in node.args"),
            ("the Triton spellings", "node.target.cpp.format", "node.target.triton.format"),
        ],
    },
    "ex06_cudagraphs": {
        "t1": [
            ("unweighted least squares", "w = [1 / t ** 2 for t in times_us]",
             "w = [1.0 for t in times_us]"),
            ("weights 1/t, not 1/t**2", "w = [1 / t ** 2 for t in times_us]",
             "w = [1 / t for t in times_us]"),
            ("bandwidth in MB/s", "return overhead, 1 / slope / 1000",
             "return overhead, 1 / slope"),
        ],
        "t2": [
            ("rebinds the static inputs instead of copying into them",
             "        for static, new in zip(self.static_inputs, args):\n"
             "            static.copy_(new)\n",
             "        self.static_inputs = list(args)\n"),
            ("forgets to replay", "        self.recording.replay()\n", ""),
            ("always clones", "        if not self.clone_outputs:\n            return out\n",
             ""),
        ],
        "t3": [
            ("a key that forgets the dtype", "return tuple((tuple(a.shape), a.dtype) for a in "
             "args)", "return tuple(tuple(a.shape) for a in args)"),
            ("a key from the first argument only",
             "return tuple((tuple(a.shape), a.dtype) for a in args)",
             "return (tuple(args[0].shape), args[0].dtype)"),
            ("records again on every call", "        if key not in self.recordings:\n",
             "        if True:\n"),
            ("copies the arguments in only when recording",
             "        for s, a in zip(static, args):\n            s.copy_(a)\n", ""),
        ],
        "t4": [
            ("replay runs the Python function again (the CPU stand-in)",
             "    return Recording(lambda: replay_tape(recorder.tape), static_outputs)",
             "    return record_on_cpu(fn, static_inputs)"),
            ("replay does not write into the recorded outputs",
             "        copy_into(out, func(*args, **kwargs))", "        func(*args, **kwargs)"),
            ("replays the tape backwards", "    for func, args, kwargs, out in tape:",
             "    for func, args, kwargs, out in reversed(tape):"),
            ("misses .item(): looks for aten.item, which never reaches dispatch",
             "        if func is aten._local_scalar_dense.default:",
             "        if func is aten.item.default:"),
            ("refuses every in-place op, on intermediates too",
             "        if any(t.untyped_storage().data_ptr() in inputs\n"
             "               for t in written_tensors(func, args, kwargs)):",
             "        if written_tensors(func, args, kwargs):"),
            ("replays functions that write into their inputs",
             "        if any(t.untyped_storage().data_ptr() in inputs\n"
             "               for t in written_tensors(func, args, kwargs)):",
             "        if False:"),
            ("a skipped call returns nothing instead of running fn",
             "        if key in self.skipped:\n            return self.fn(*args)",
             "        if key in self.skipped:\n            return None"),
            ("rebinds the static inputs instead of copying into them",
             "        for s, a in zip(static, args):\n            s.copy_(a)\n",
             "        static[:] = list(args)\n"),
        ],
    },
    "ex07_capstone": {
        "t1": [
            ("fuses nodes that do not fit the group's shape",
             "if g is None or not fits(node, shapes[g]):", "if g is None:"),
            ("no cycle check",
             "            if any(b not in groups[g] and g in reach.get(b, ()) for b in inputs):\n"
             "                continue                   # another input needs this group: a "
             "cycle\n", ""),
            ("fuses any reduction, not just row reductions", "and not row_reduction(node):",
             "and op_kind(node) != \"reduction\":"),
            ("never fuses", "        for a in inputs:\n            g = group_of.get(a)",
             "        for a in ():\n            g = group_of.get(a)"),
            ("steps in graph order, not dependency order",
             "                    visit(step_of[a])", "                    pass"),
            ("gives up after the first input's group",
             "continue                   # another input needs this group: a cycle",
             "break"),
            ("a group a reduction starts runs over the reduction's shape, not its input's",
             "shapes.append(shape_of(node.args[0]) if row_reduction(node) else shape_of(node))",
             "shapes.append(shape_of(node))"),
        ],
        "t2": [
            ("stores only the last output", "for i, node in enumerate(outputs):",
             "for i, node in enumerate(outputs[-1:]):"),
            ("constants with str(), not literal()", "else literal(a) for a in node.args",
             "else str(a) for a in node.args"),
            ("operands in reverse order", ".format(*args, dtype=args[-1])",
             ".format(*reversed(args), dtype=args[-1])"),
            ("mask off by one", "mask = offsets < n_elements\")",
             "mask = offsets < n_elements - 1\")"),
            ("every input loaded from the first pointer", "tl.load(in_ptr{i} + {index}",
             "tl.load(in_ptr0 + {index}"),
            ("loads every input at the flat offsets: broadcasts read past their end",
             "tl.load(in_ptr{i} + {index}, mask)", "tl.load(in_ptr{i} + offsets, mask)"),
            ("indexes every input as if it had the group's shape",
             "input_strides(node, shape)", "torch.empty(shape).stride()"),
        ],
        "t3": [
            ("reductions see the padding lanes",
             "f\"{reduce}(tl.where(mask, {node.args[0].name}, {pad}), axis=1)[:, None]\"",
             "f\"{reduce}({node.args[0].name}, axis=1)[:, None]\""),
            ("a mean is not divided by the row's length",
             "                value = f\"({value} / n_cols)\"", "                pass"),
            ("a value per row stored like a full one: past the end of its buffer",
             "tl.store(out_ptr{i} + rows + 0 * cols, {node.name}, \"\n"
             "                         \"(rows < n_rows) & (cols == 0))\")",
             "tl.store(out_ptr{i} + offsets, {node.name}, mask)\")"),
            ("the mask forgets the columns", "mask = (rows < n_rows) & (cols < n_cols)",
             "mask = rows < n_rows"),
            ("every input read as if it had the group's shape",
             "input_strides(node, shape)", "torch.empty(shape).stride()"),
        ],
        "t4": [
            ("runs every node eagerly: no kernels", "for step in schedule(graph):",
             "for step in [n for n in graph.nodes if n.op == \"call_function\"]:"),
            ("every group through the flat generator",
             "generate_kernel(step) if is_flat(step) else generate_row_kernel(step, shape)",
             "generate_kernel(step)"),
            ("skips the exercise 02 CSE pass", "    gm = mine.cse_backend(gm, example_inputs)\n",
             ""),
            ("builds the backward with the library's VJP rules, not exercise 01's",
             "vjp_rules({prims.mul: mine.mul_vjp, prims.sigmoid: mine.sigmoid_vjp})",
             "vjp_rules({})"),
            ("the library's min-cut partitioner, not exercise 04's",
             "partition_fn=mine.matmul_only_partition", "partition_fn=min_cut_partition"),
            ("the backward graph runs as it is, not through my_compiler",
             " bw_compiler=my_compiler,", " bw_compiler=lambda gm, example_inputs=None: gm,"),
            ("a group's outputs bound in the wrong order",
             "env.update(zip(outputs, buffers))", "env.update(zip(outputs, reversed(buffers)))"),
        ],
    },
}

# Tasks that run other tasks' code (a capstone wires the pieces together; a step of ex03
# extends the class of the step before): a mutant of a task they depend on may fail them too,
# so their own mutants are graded in notebooks of their own, one such task at a time (t6's
# mutants never share a notebook with t5's), with every task they depend on solved.
DEPENDS: dict[str, dict[str, set[str]]] = {
    "ex03_dynamo": {"t5": {"t4"}, "t6": {"t4", "t5"}, "t7": {"t4", "t5", "t6"}},
    "ex07_capstone": {"t4": {"t1", "t2", "t3"}},
}

# Right answers written differently from the solution: the checks must give them full marks
# (a check that demands the solution's exact form fails learners who are right).
VARIANTS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "ex01_autograd": {
        "t2": [("sums one dimension at a time",
                "    if dims:\n        grad = grad.sum(dim=dims, keepdim=True)\n",
                "    for d in dims:\n        grad = grad.sum(dim=d, keepdim=True)\n")],
        "t6": [("sums with ops.sum itself instead of calling sum_to_shape",
                "    return sum_to_shape(grad, x.shape)\n",
                "    lead = grad.ndim - x.ndim\n"
                "    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(x.shape)\n"
                "                                      if s == 1 and grad.shape[lead + i] != 1)\n"
                "    if dims:\n"
                "        grad = ops.reshape(ops.sum(grad, dims, keepdim=True), tuple(x.shape))\n"
                "    return grad\n")],
    },
    "ex02_fx": {
        "t4": [("unwrap with torch's pytree", "    if isinstance(value, MyProxy):\n",
                "    from torch.utils._pytree import tree_map\n"
                "    return tree_map(lambda v: v.node if isinstance(v, MyProxy) else v, value)\n"
                "    if isinstance(value, MyProxy):\n")],
        "t5": [("returns a new GraphModule", "    gm.recompile()\n    return gm\n",
                "    return torch.fx.GraphModule(gm, gm.graph)\n")],
        "t6": [("the unread nodes erased by the library's dce",
                "    for node in reversed(graph.nodes):    # the frozen inputs that only fed "
                "folded nodes\n        if node.op == \"get_attr\" and not node.users:\n"
                "            graph.erase_node(node)\n",
                "    from tutorcompile.fx import dce\n    graph = dce(graph)\n")],
    },
    "ex03_dynamo": {
        "t5": [("LOAD_METHOD pushes the callable first, then NULL (3.13's order)",
                "        self.stack += [NULL, method]\n",
                "        self.stack += [method, NULL]\n")],
        "t2": [("__class__ instead of type()",
                "return f\"type({ref}) is {type(value).__name__} and {ref} == {value!r}\"",
                "return f\"{ref}.__class__ is {type(value).__name__} and {ref} == {value!r}\"")],
    },
    "ex04_aot": {
        "t6": [("the biased variance from ops.var(correction=0)",
                "    var = ops.mean(ops.mul(centered, centered), dims, keepdim=True)\n",
                "    var = ops.var(x, dims, correction=0, keepdim=True)\n")],
    },
    "ex05_fusion": {
        "t4": [("a modulo on the first dim too, and every term in parentheses",
                "            if d > 0:                                 # the first dim's index "
                "is < shape[0]\n                index = f\"({index} % {shape[d]})\"\n"
                "            terms.append(index if strides[d] == 1 else f\"{index} * "
                "{strides[d]}\")\n",
                "            index = f\"({index} % {shape[d]})\"\n"
                "            terms.append(f\"({index} * {strides[d]})\")\n")],
        "t5": [("-inf put in with tl.where after a plain masked load",
                "x_row_stride + cols, mask, other=-float(\"inf\"))\n",
                "x_row_stride + cols, mask=mask)\n    x = tl.where(mask, x, float(\"-inf\"))\n")],
        "t6": [("float32 constants with an f, as the library writes them, in auto variables",
                "else repr(a) for a in node.args]\n        names[node] = node.name\n"
                "        lines.append(f\"        float {node.name}",
                "else repr(float(a)) + \"f\" for a in node.args]\n"
                "        names[node] = node.name\n"
                "        lines.append(f\"        auto {node.name}")],
    },
    "ex07_capstone": {
        "t1": [("orders the steps by repeated passes over a ready set (Kahn), not by DFS",
                "    step_of = {n: groups[group_of[n]] if n in group_of else n for n in reach}\n",
                "    pending = []\n"
                "    for node in reach:\n"
                "        step = groups[group_of[node]] if node in group_of else node\n"
                "        if not any(s is step for s in pending):\n"
                "            pending.append(step)\n"
                "    order, ready = [], set()\n"
                "    while pending:\n"
                "        for i, step in enumerate(pending):\n"
                "            members = step if isinstance(step, list) else [step]\n"
                "            if all(a in ready or a in members or a not in reach\n"
                "                   for m in members for a in m.all_input_nodes):\n"
                "                break\n"
                "        order.append(pending.pop(i))\n"
                "        ready.update(members)\n"
                "    return order\n")],
        "t2": [("loads with keyword arguments and other=0",
                "tl.load(in_ptr{i} + {index}, mask)\")",
                "tl.load(in_ptr{i} + {index}, mask=mask, other=0)\")")],
    },
    "ex06_cudagraphs": {
        "t3": [("keyed by strides and device as well",
                "return tuple((tuple(a.shape), a.dtype) for a in args)",
                "return tuple((tuple(a.shape), a.stride(), a.device, a.dtype) for a in args)")],
        "t4": [("the first call of a key runs fn eagerly, later ones replay",
                "            self.recordings[key] = (static, recording)\n",
                "            self.recordings[key] = (static, recording)\n"
                "            return self.fn(*args)\n")],
    },
}


def mutate(source: str, old: str, new: str) -> str:
    """``source`` with ``old`` replaced, refusing edits outside the solution regions."""
    assert old in source, f"the solution no longer contains {old!r}"
    mutated = source.replace(old, new)
    assert split_regions(mutated)[0] == split_regions(source)[0], \
        f"replacing {old!r} edits code outside the solution regions"
    return mutated


def edited_notebooks(exercise: str, edits: dict, folder: Path, name: str
                     ) -> list[tuple[Path, dict[str, str]]]:
    """Notebook k is the solution with the k-th edit of every task that has one (the other
    tasks solved); with each, which task got which edit."""
    solution = read_notebook(ROOT / "solutions" / f"{exercise}.ipynb")
    made = []
    for k in range(max((len(m) for m in edits.values()), default=0)):
        nb = nbformat.from_dict(solution)
        which = {}
        for cell in nb.cells:
            meta = cell.metadata.get("tutorcompile", {})
            if meta.get("role") == "task" and k < len(edits.get(meta.get("task"), [])):
                what, old, new = edits[meta["task"]][k]
                cell.source = mutate(cell.source, old, new)
                which[meta["task"]] = what
        path = folder / f"{exercise}_{name}{k}.ipynb"
        nbformat.write(nb, str(path))
        made.append((path, which))
    return made


@pytest.mark.slow
@pytest.mark.parametrize("exercise", sorted(MUTANTS))
def test_every_mutant_loses_its_tasks_points(exercise, tmp_path, capsys):
    reference = read_notebook(ROOT / "exercises" / f"{exercise}.ipynb")
    tasks = {c.metadata["tutorcompile"]["task"] for c in reference.cells
             if c.metadata.get("tutorcompile", {}).get("role") == "task"}
    assert tasks == set(MUTANTS[exercise]), "every task needs mutants"
    assert all(len(m) >= 3 for m in MUTANTS[exercise].values()), "at least 3 per task"
    depends = DEPENDS.get(exercise, {})
    made = [*edited_notebooks(exercise, {t: m for t, m in MUTANTS[exercise].items()
                                         if t not in depends}, tmp_path, "mutant"),
            *(notebook for task in sorted(depends)
              for notebook in edited_notebooks(exercise, {task: MUTANTS[exercise][task]},
                                               tmp_path, f"{task}_dependent_mutant"))]
    variants = edited_notebooks(exercise, VARIANTS.get(exercise, {}), tmp_path, "variant")
    start = time.perf_counter()
    grades = grade_class([p for p, _ in made + variants],
                         Exercises.find(ROOT / "exercises", None), jobs=2, cell_timeout=120)
    seconds = time.perf_counter() - start
    by_name = {g.notebook: g for g in grades}   # (grade_class sorts its grades by name)
    for path, which in variants:
        grade = by_name[path.name]
        assert grade.earned == grade.possible > 0, \
            f"right answers ({', '.join(which.values())}) lost points:\n{grade.format()}"
    escaped = []
    for path, which in made:
        grade = by_name[path.name]
        assert grade.error is None and not grade.tampered, grade.format()
        for task, row in grade.tasks().items():
            if task in which and row["earned"] > 0:
                escaped.append(f"{task} {which[task]!r}: {row['earned']:g} points")
            if task not in which and not depends.get(task, set()) & set(which):
                assert row["passed"], f"{path.name}: the solved {task} failed:\n" \
                                      + grade.format()
    count = sum(len(m) for m in MUTANTS[exercise].values())
    with capsys.disabled():
        print(f"\n{exercise}: {count - len(escaped)}/{count} mutants caught over "
              f"{len(tasks)} tasks; {len(variants)} variant notebook(s) of right answers "
              f"full marks; {len(made) + len(variants)} notebooks graded in {seconds:.0f} s")
    assert not escaped, f"{exercise}: mutants that still earn points: {escaped}"
