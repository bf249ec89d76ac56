"""The bytecode VM against CPython itself, on a corpus of ~90 calls (stdlib unittest only).

Run on every supported interpreter, with the repository root on ``PYTHONPATH``::

    python -m unittest discover -s tests/dynamo_conformance -t .

These tests import neither torch nor pytest, so they also run on Python builds without them.
"""

import copy
import sys
import types
import unittest

from tests.dynamo_conformance import corpus
from tutorcompile.dynamo import bytecode, vm

VERSION_SPECIFIC = {"PRECALL", "KW_NAMES", "CALL_KW", "LOAD_FAST_LOAD_FAST",
                    "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "LOAD_FAST_CHECK",
                    "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE", "JUMP_FORWARD",
                    "JUMP_BACKWARD", "SET_FUNCTION_ATTRIBUTE", "RESUME"}


def _name(case):
    fn, args, kwargs = case[:3]
    return f"{fn.__name__}{args!r}{kwargs or ''}"


class TestNormalisation(unittest.TestCase):
    def test_no_version_specific_opcodes_survive(self):
        for fn, _, _ in corpus.CASES:
            for inst in bytecode.normalize(fn.__code__).instructions:
                self.assertNotIn(inst.opname, VERSION_SPECIFIC, f"{fn.__name__}: {inst}")

    def test_keyword_names_are_folded_into_call(self):
        def f(g):
            return g(1, b=2, c=3)
        calls = [i for i in bytecode.normalize(f.__code__).instructions if i.opname == "CALL"]
        self.assertEqual([c.kw_names for c in calls], [("b", "c")])
        self.assertEqual(calls[0].arg, 3)

    def test_jump_targets_are_indices(self):
        code = bytecode.normalize(corpus.while_loop.__code__)
        for inst in code.instructions:
            if inst.opname in bytecode.JUMP_OPS:
                self.assertIsInstance(inst.target, int)
                self.assertTrue(0 <= inst.target < len(code.instructions), str(inst))

    def test_for_iter_target_is_after_the_loop_cleanup(self):
        code = bytecode.normalize(corpus.fib.__code__)
        (for_iter,) = [i for i in code.instructions if i.opname == "FOR_ITER"]
        after = code.instructions[for_iter.target]
        self.assertNotIn(after.opname, ("END_FOR",))

    def test_method_loads_are_uniform(self):
        def f(x):
            return x.upper()
        names = [i.opname for i in bytecode.normalize(f.__code__).instructions]
        self.assertIn("LOAD_METHOD", names)

    def test_exception_table_maps_to_indices(self):
        code = bytecode.normalize(corpus.try_except.__code__)
        self.assertTrue(code.exception_table)
        for e in code.exception_table:
            self.assertLess(e.start, e.end)
        targets = {code.instructions[e.target].opname for e in code.exception_table}
        self.assertIn("PUSH_EXC_INFO", targets)

    def test_dis_listing_is_readable(self):
        text = bytecode.normalize(corpus.arith.__code__).dis()
        self.assertIn("BINARY_OP", text)
        self.assertIn("RETURN_VALUE", text)


class TestVMConformance(unittest.TestCase):
    def test_corpus_matches_native(self):
        self.assertGreaterEqual(len(corpus.CASES), 60)
        for case in corpus.CASES:
            fn, args, kwargs = case
            with self.subTest(case=_name(case)):
                expected = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                got = vm.run_function(fn, *copy.deepcopy(args), **copy.deepcopy(kwargs))
                self.assertEqual(got, expected)

    def test_corpus_matches_native_without_inlining(self):
        for case in corpus.CASES:
            fn, args, kwargs = case
            with self.subTest(case=_name(case)):
                expected = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                machine = vm.VM(inline_calls=False)
                got = machine.run_function(fn, *copy.deepcopy(args), **copy.deepcopy(kwargs))
                self.assertEqual(got, expected)

    def test_exceptions_propagate_like_native(self):
        for fn, args, kwargs, exc_type in corpus.RAISING:
            with self.subTest(case=fn.__name__):
                with self.assertRaises(exc_type):
                    fn(*args, **kwargs)
                with self.assertRaises(exc_type):
                    vm.run_function(fn, *args, **kwargs)

    def test_nested_calls_are_interpreted(self):
        machine = vm.VM()
        machine.run_function(corpus.call_defaults, 1)
        shallow = vm.VM(inline_calls=False)
        shallow.run_function(corpus.call_defaults, 1)
        self.assertGreater(machine.instructions_executed, shallow.instructions_executed)

    def test_mutation_of_arguments_is_visible(self):
        xs = [1, 2]
        vm.run_function(corpus.mutates_argument, xs)
        self.assertEqual(xs, [1, 2, 2])

    def test_globals_write_goes_to_module(self):
        self.assertEqual(vm.run_function(corpus.globals_write, 7), 7)
        self.assertEqual(corpus.COUNTER, 10)


class TestContinuations(unittest.TestCase):
    """A frame stopped after any instruction and copied resumes to the same result."""

    def test_resume_from_every_instruction(self):
        pure = [c for c in corpus.CASES if c[0] not in corpus.IMPURE]
        self.assertGreater(len(pure), 40)
        checked = 0
        for fn, args, kwargs in pure:
            expected = fn(*args, **kwargs)
            machine = vm.VM(inline_calls=False)
            frame = machine.make_frame(fn, args, kwargs)
            steps = 0
            while True:
                snapshot = frame.copy()
                # values are shared with the running frame; give the copy its own lists
                # (cells cannot be deep-copied: pure functions do not mutate through them)
                try:
                    snapshot.stack, snapshot.locals = copy.deepcopy((snapshot.stack,
                                                                     snapshot.locals))
                except TypeError:
                    pass
                # a bound C method (``out.append``) cannot be re-pointed at a copied list,
                # so such a snapshot would share state with the running frame: skip it
                if not any(isinstance(v, types.BuiltinMethodType) for v in snapshot.stack):
                    resumed = vm.VM(inline_calls=False).run(snapshot)
                    with self.subTest(case=fn.__name__, ip=frame.ip):
                        self.assertEqual(resumed, expected)
                    checked += 1
                steps += 1
                if machine.step(frame) is vm._RETURN or steps > 400:
                    break
            self.assertEqual(frame.return_value, expected)
        self.assertGreater(checked, 1000)

    def test_step_reports_the_return(self):
        machine = vm.VM()
        frame = machine.make_frame(corpus.fib, (6,))
        while machine.step(frame) is not vm._RETURN:
            pass
        self.assertEqual(frame.return_value, 8)


class TestNoTorch(unittest.TestCase):
    def test_vm_does_not_import_torch(self):
        import subprocess
        code = ("import sys; import tutorcompile.dynamo.vm, tutorcompile.dynamo.bytecode; "
                "mods=[m for m in sys.modules if m.startswith('tutorcompile.dynamo')]; "
                "assert 'tutorcompile.dynamo.symbolic_convert' not in mods, mods; print('ok')")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=_repo_root())
        self.assertEqual(out.returncode, 0, out.stderr)


def _repo_root():
    import os
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


if __name__ == "__main__":
    unittest.main()
