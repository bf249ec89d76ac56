"""One instruction set for CPython 3.11, 3.12 and 3.13.

Dynamo reads the bytecode of the function it compiles. CPython changes that bytecode in
every release, so before interpreting anything we *normalise* it into one uniform form that
the VM (``vm.py``) and the symbolic translator (``symbolic_convert.py``) both execute. The
differences this module hides, and how:

* ``dis.get_instructions`` already hides CACHE entries, folds EXTENDED_ARG and gives jump
  targets as absolute offsets; we turn offsets into list *indices* (``Instruction.target``).
* Calls: 3.11's ``KW_NAMES; PRECALL; CALL``, 3.12's ``KW_NAMES; CALL`` and 3.13's
  ``LOAD_CONST names; CALL_KW`` all become one ``CALL`` carrying ``kw_names``. Because the
  names are folded into the instruction, the VM has no pending keyword-name state to save.
* ``LOAD_GLOBAL`` with its low bit set pushes a NULL *before* the value on 3.11/3.12 and
  *after* it on 3.13: recorded in ``push_null`` ("before" / "after"). The VM's call rule
  ("whichever of the two slots under the arguments is NULL, the other is the callable")
  works with either layout, so nothing else needs to know.
* 3.11's ``LOAD_METHOD`` and 3.12+'s ``LOAD_ATTR`` with the low bit set both become
  ``LOAD_METHOD``.
* ``POP_JUMP_FORWARD_IF_*`` / ``POP_JUMP_BACKWARD_IF_*`` (3.11) become ``POP_JUMP_IF_*``;
  every unconditional jump becomes ``JUMP``.
* ``FOR_ITER``: on exhaustion 3.11 pops the iterator and jumps to its target; 3.12 jumps past
  ``END_FOR``; 3.13 skips ``END_FOR; POP_TOP``. Normalised: "pop the iterator and go to
  ``target``", with ``target`` the first instruction after the loop's cleanup.
* The fused 3.13 instructions ``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_LOAD_FAST`` and
  ``STORE_FAST_STORE_FAST`` are split in two; ``LOAD_FAST_CHECK`` becomes ``LOAD_FAST``.
* 3.13's ``MAKE_FUNCTION; SET_FUNCTION_ATTRIBUTE*`` becomes one ``MAKE_FUNCTION`` whose
  ``arg`` holds the attribute flags, as in 3.11/3.12 (the stack layouts already agree).
* ``RESUME``, ``PRECALL``, ``NOP``, ``KW_NAMES``, ``CACHE`` and folded instructions become
  ``NOP`` so that every original instruction keeps an index (resume points and exception
  table ranges stay easy to map).

Everything else keeps CPython's opcode name. The exception table becomes a list of
:class:`ExceptionTableEntry` over indices.

This module does not import torch. Mirrors: torch/_dynamo/bytecode_analysis.py and the
instruction cleanup in torch/_dynamo/bytecode_transformation.py.
"""

from __future__ import annotations

import dis
import sys
import types
from dataclasses import dataclass, field
from typing import Any

PY = sys.version_info[:2]
SUPPORTED_VERSIONS = ((3, 11), (3, 12), (3, 13))

_JUMP_RENAMES = {
    "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "JUMP_FORWARD": "JUMP",
    "JUMP_BACKWARD": "JUMP",
    "JUMP_BACKWARD_NO_INTERRUPT": "JUMP",
    "JUMP_NO_INTERRUPT": "JUMP",
}
_TO_NOP = {"RESUME", "PRECALL", "NOP", "CACHE", "EXTENDED_ARG", "KW_NAMES", "NOT_TAKEN",
           "COPY_FREE_VARS"}
JUMP_OPS = {"JUMP", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE",
            "POP_JUMP_IF_NOT_NONE", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "FOR_ITER",
            "SEND"}
CONDITIONAL_JUMPS = JUMP_OPS - {"JUMP", "SEND"}


class UnsupportedBytecode(NotImplementedError):
    """The code uses something outside the normalised instruction set (say which)."""


@dataclass
class Instruction:
    """One normalised instruction.

    ``index`` is the position in :attr:`NormalizedCode.instructions` (what the VM's
    instruction pointer counts); ``offset`` and ``lineno`` point back at the real bytecode
    and source line; ``target`` is the jump target's index.
    """
    opname: str
    arg: int | None
    argval: Any
    offset: int
    lineno: int | None
    index: int = -1
    target: int | None = None
    kw_names: tuple[str, ...] = ()
    push_null: str | None = None  # LOAD_GLOBAL: "before" / "after" the value
    original: str = ""  # CPython's opname, for printing

    def __str__(self) -> str:
        extra = ""
        if self.target is not None:
            extra = f" (to {self.target})"
        elif self.kw_names:
            extra = f" kw={self.kw_names}"
        elif self.argval is not None and self.opname not in ("NOP",):
            extra = f" {self.argval!r}"
        if self.push_null:
            extra += f" [NULL {self.push_null}]"
        return f"{self.index:>4} {self.opname}{extra}"


@dataclass
class ExceptionTableEntry:
    """Instructions ``start <= i < end`` are protected; on an exception the stack is cut to
    ``depth`` items, the instruction's offset is pushed if ``lasti``, then the exception,
    and execution goes on at ``target``."""
    start: int
    end: int
    target: int
    depth: int
    lasti: bool


@dataclass
class NormalizedCode:
    """A code object's instructions in the uniform form, plus its exception table."""
    code: types.CodeType
    instructions: list[Instruction]
    exception_table: list[ExceptionTableEntry] = field(default_factory=list)

    def handler_for(self, index: int) -> ExceptionTableEntry | None:
        """The exception-table entry protecting instruction ``index`` (innermost first)."""
        best = None
        for entry in self.exception_table:
            if entry.start <= index < entry.end:
                if best is None or entry.start >= best.start:
                    best = entry
        return best

    def dis(self) -> str:
        """A listing of the normalised instructions (what the VM executes)."""
        lines, last = [], None
        for inst in self.instructions:
            if inst.opname == "NOP":
                continue
            ln = "" if inst.lineno == last else str(inst.lineno)
            last = inst.lineno
            lines.append(f"{ln:>4} {inst}")
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.instructions)


def _kw_names_of(inst: dis.Instruction, code: types.CodeType) -> tuple[str, ...]:
    value = inst.argval
    if not isinstance(value, tuple):  # 3.11/3.12 may report the index, not the tuple
        value = code.co_consts[inst.arg or 0]
    return tuple(value)


_CACHE: dict[types.CodeType, NormalizedCode] = {}


def normalize(code: types.CodeType) -> NormalizedCode:
    """The :class:`NormalizedCode` for ``code`` (cached per code object)."""
    cached = _CACHE.get(code)
    if cached is None:
        if PY not in SUPPORTED_VERSIONS:
            raise UnsupportedBytecode(
                f"Python {PY[0]}.{PY[1]} bytecode is not supported; the Dynamo stage needs "
                "3.11, 3.12 or 3.13")
        cached = _CACHE[code] = _normalize(code)
    return cached


def _normalize(code: types.CodeType) -> NormalizedCode:
    raw = list(dis.get_instructions(code))
    out: list[Instruction] = []
    offset_to_index: dict[int, int] = {}
    pending_kw: tuple[str, ...] = ()
    jump_offsets: dict[int, int] = {}  # out index -> target *offset*, resolved below
    lineno = code.co_firstlineno
    for inst in raw:
        name = inst.opname
        positions = getattr(inst, "positions", None)
        if positions is not None and positions.lineno is not None:
            lineno = positions.lineno
        offset_to_index.setdefault(inst.offset, len(out))

        def emit(opname: str, arg: Any = inst.arg, argval: Any = inst.argval,
                 _orig: str = name, _off: int = inst.offset, _ln: int = lineno) -> Instruction:
            new = Instruction(opname, arg, argval, _off, _ln, index=len(out), original=_orig)
            out.append(new)
            return new

        if name == "KW_NAMES":
            pending_kw = _kw_names_of(inst, code)
            emit("NOP")
        elif name in _TO_NOP:
            emit("NOP")
        elif name == "CALL":
            emit("CALL").kw_names, pending_kw = pending_kw, ()
        elif name == "CALL_KW":
            prev = out[-1] if out else None
            if prev is not None and prev.opname == "LOAD_CONST" \
                    and isinstance(prev.argval, tuple) and prev.offset not in jump_targets(raw):
                prev.opname, prev.argval = "NOP", None
                emit("CALL").kw_names = tuple(prev_names(raw, inst))
            else:
                emit("CALL_KW")
        elif name == "LOAD_GLOBAL":
            new = emit("LOAD_GLOBAL")
            if (inst.arg or 0) & 1:
                new.push_null = "after" if PY >= (3, 13) else "before"
        elif name == "LOAD_ATTR" and PY >= (3, 12) and (inst.arg or 0) & 1:
            emit("LOAD_METHOD")
        elif name in ("LOAD_FAST_CHECK",):
            emit("LOAD_FAST")
        elif name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"):
            first, second = name.split("_FAST_")[0], name.split("_FAST_")[1].replace("_FAST", "")
            emit(f"{first}_FAST", argval=inst.argval[0])
            emit(f"{second}_FAST", argval=inst.argval[1])
        elif name == "SET_FUNCTION_ATTRIBUTE":
            maker = _last_maker(out)
            maker.arg = (maker.arg or 0) | (inst.arg or 0)
            emit("NOP")
        elif name == "MAKE_FUNCTION":
            emit("MAKE_FUNCTION", arg=inst.arg or 0)
        elif name == "COMPARE_OP":
            emit("COMPARE_OP", argval=str(inst.argval).removeprefix("bool(").removesuffix(")"))
        else:
            new = emit(_JUMP_RENAMES.get(name, name))
            if new.opname in JUMP_OPS and isinstance(inst.argval, int):
                jump_offsets[new.index] = inst.argval

    for index, target_offset in jump_offsets.items():
        jump = out[index]
        target = offset_to_index[target_offset]
        if jump.opname == "FOR_ITER":
            # land after the loop's cleanup, uniformly "pop the iterator and jump"
            if out[target].opname == "END_FOR":
                target += 1
                if PY >= (3, 13) and target < len(out) and out[target].opname == "POP_TOP":
                    target += 1
        jump.target = target

    table = []
    entries = getattr(dis.Bytecode(code), "exception_entries", [])
    for e in entries:
        end = next((i for i, x in enumerate(out) if x.offset >= e.end), len(out))
        table.append(ExceptionTableEntry(offset_to_index[e.start], end,
                                         offset_to_index[e.target], e.depth, bool(e.lasti)))
    return NormalizedCode(code, out, table)


def _last_maker(out: list[Instruction]) -> Instruction:
    for inst in reversed(out):
        if inst.opname == "MAKE_FUNCTION":
            return inst
        if inst.opname != "NOP":
            break
    raise UnsupportedBytecode("SET_FUNCTION_ATTRIBUTE without a MAKE_FUNCTION before it")


def jump_targets(raw: list[dis.Instruction]) -> set[int]:
    """Offsets some jump lands on (a folded instruction must not be one)."""
    return {i.argval for i in raw if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs}


def prev_names(raw: list[dis.Instruction], call_kw: dis.Instruction) -> tuple[str, ...]:
    """The keyword names a 3.13 ``CALL_KW`` finds on the stack (the LOAD_CONST before it)."""
    i = raw.index(call_kw)
    return tuple(raw[i - 1].argval)


def line_of(code: types.CodeType, index: int) -> tuple[str, int | None, str]:
    """``(filename, lineno, source text)`` of instruction ``index`` -- for break reasons."""
    import linecache
    inst = normalize(code).instructions[index]
    text = linecache.getline(code.co_filename, inst.lineno).strip() if inst.lineno else ""
    return code.co_filename, inst.lineno, text
