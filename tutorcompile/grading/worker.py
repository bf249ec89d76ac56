"""The grading kernel: one submission's cells in a process of its own, each check's verdict
decided by code the submission cannot have altered.

The grader (``runner.py``) starts ``python .../grading/worker.py CTRL RESULT`` in a
scratch folder and streams it one cell at a time over the pipe ``CTRL``; verdicts come back on
``RESULT`` as lines that start with a nonce sent before any learner code ran. Learner cells
run through an IPython shell (so magics and ``display`` work); the exercise's own cells (the
"given" cells and the checks) are compiled and ``exec``-ed by this module directly, so input
transformers, AST transformers, custom exception handlers and event callbacks that a
submission installs in the shell never touch them.

Three anchors make a verdict trustworthy (INSTRUCTORS.md has the threat model):

1. **A pristine snapshot taken before any learner code ran**: every function, class and module
   bound in the globals of every module then loaded (``torch.allclose``,
   ``torch.testing.assert_close``, ``tutorcompile.autograd.topological_order``, ...), the
   builtins, the interpreter hooks (trace, profile, except/display hooks, import machinery,
   signal handlers, gc callbacks), torch's function/dispatch mode stacks, and the names the
   exercise's given cells bound. :func:`main`'s ``verify`` compares against it before and after
   every check; any difference fails the check and is reported by name.
2. **An audit hook** (PEP 578; it cannot be removed once installed) that denies, when the code
   asking is the submission's own, what would let it reach the grader's state or forge a
   result: stack frames, the garbage collector's object lists, ctypes, trace/profile hooks,
   new audit hooks, rewriting a library function's code, starting processes, sending signals,
   raising resource limits, and reading or listing the instructor's folders or other
   processes' memory. Each attempt is recorded and reported.
3. **The nonce lives only in this function's locals**, which the hook keeps the submission
   from reaching; a result line without it is reported as a forged verdict.
"""

from __future__ import annotations

CHECK_PREFIX = "<exercise "   # filename of code compiled from the exercise's own cells


def main() -> None:  # noqa: C901 -- one closure on purpose: its locals are the trusted state
    # Everything below is looked up in main's own scope, never in this module's globals or in
    # builtins, which a submission can reach and replace.
    import _signal
    import _thread
    import builtins
    import gc
    import json
    import os
    import sys
    import sysconfig
    (any, bytes, dict, exec, compile, getattr, int, isinstance, len, list, ord, set,
     sorted, str, tuple, type, BaseException, PermissionError, SyntaxError) = (
        builtins.any, builtins.bytes, builtins.dict, builtins.exec,
        builtins.compile, builtins.getattr, builtins.int, builtins.isinstance, builtins.len,
        builtins.list, builtins.ord, builtins.set, builtins.sorted, builtins.str,
        builtins.tuple, builtins.type, builtins.BaseException, builtins.PermissionError,
        builtins.SyntaxError)
    getframe, write, read, getcwd, get_ident = (sys._getframe, os.write, os.read, os.getcwd,
                                                _thread.get_ident)
    check_prefix, thread_count = CHECK_PREFIX, _thread._count
    ctrl_fd, result_fd = int(sys.argv[1]), int(sys.argv[2])
    pending = bytearray()

    def receive_line() -> bytes:
        while b"\n" not in pending:
            chunk = read(ctrl_fd, 1 << 16)
            if not chunk:
                os._exit(0)
            pending.extend(chunk)
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        return line

    def receive() -> tuple[int, str, str, str]:
        """index, role, label, source: hex fields, decoded with bytes methods only."""
        index, role, label, source = receive_line().split(b" ")
        return (int(index), bytes.fromhex(role.decode()).decode(),
                bytes.fromhex(label.decode()).decode(), bytes.fromhex(source.decode()).decode())

    def encode(value) -> str:
        """JSON for str, int, None, lists and dicts, with no library code (json can be
        patched by the submission)."""
        t = type(value)
        if t is str:
            out = []
            for ch in value:
                if ch in '"\\':
                    out.append("\\" + ch)
                elif ord(ch) < 0x20:
                    out.append(f"\\u{ord(ch):04x}")
                else:
                    out.append(ch)
            return '"' + "".join(out) + '"'
        if t is int:
            return f"{value:d}"
        if value is None:
            return "null"
        if t is list or t is tuple:
            return "[" + ",".join([encode(v) for v in value]) + "]"
        if t is dict:
            return "{" + ",".join([encode(str(k)) + ":" + encode(v)
                                   for k, v in value.items()]) + "}"
        return encode(str(value))

    hello = json.loads(receive_line())        # before any learner code: json is intact
    nonce = hello.pop("nonce")
    sys.path[0] = ""          # like a Jupyter kernel: the working folder, not this one's

    def send(kind: str, index: int, status: str, payload: dict) -> None:
        write(result_fd, (nonce + " " + kind + " " + f"{index:d}" + " " + status + " " +
                          encode(payload) + "\n").encode())

    # -- trusted imports, then the snapshot ------------------------------------------------
    for name in hello["preload"]:
        try:
            __import__(name)  # noqa: F821 -- builtins' own, before learner code
        except Exception:  # an optional package that is not installed
            pass
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False      # no sqlite file in a read-only home
    shell = InteractiveShell.instance(config=config, colors="nocolor")
    shell._orig_sys_modules_main_mod = None    # the only other way to this module's globals
    ns = shell.user_ns
    torch = sys.modules.get("torch")

    function_type = type(main)
    callable_types = (type, type(len), function_type, type(os))

    # The modules whose functions checks compare with. Libraries rebind globals of others at
    # run time (Triton's interpreter patches triton.language), so those are left out; a
    # learner-made function bound in *any* library module is still caught below.
    watched_exact = {"builtins", "torch", "torch.testing", "torch.testing._comparison",
                     "torch.nn.functional", "numpy", "numpy.testing", "math", "cmath",
                     "operator", "functools", "itertools", "json", "os", "sys"}

    def watched(mod_name: str) -> bool:
        return mod_name in watched_exact or mod_name == "tutorcompile" or \
            mod_name.startswith("tutorcompile.")

    def snapshot_modules() -> dict:
        table = {}
        for mod_name, mod in list(sys.modules.items()):
            d = getattr(mod, "__dict__", None)
            if not isinstance(d, dict) or not watched(mod_name):
                continue
            table[mod_name] = (mod, [(k, v) for k, v in list(d.items())
                                     if isinstance(v, callable_types)
                                     or type(v).__name__ in ("builtin_function_or_method",
                                                              "method_descriptor",
                                                              "wrapper_descriptor")])
        return table

    hooks = {"sys.settrace": sys.gettrace, "sys.setprofile": sys.getprofile,
             "sys.excepthook": lambda: sys.excepthook,
             "sys.displayhook": lambda: sys.displayhook,
             "sys.breakpointhook": lambda: sys.breakpointhook,
             "sys.unraisablehook": lambda: sys.unraisablehook,
             "sys.meta_path": lambda: tuple(sys.meta_path),
             "sys.path_hooks": lambda: tuple(sys.path_hooks),
             "gc.callbacks": lambda: tuple(gc.callbacks),
             "threading trace hook": lambda: getattr(sys.modules["threading"], "_trace_hook",
                                                      None),
             "threading profile hook": lambda: getattr(sys.modules["threading"],
                                                        "_profile_hook", None),
             "builtins.__import__": lambda: builtins.__import__}
    import signal

    # The runner's time limit (SIGINT) interrupts a cell, never this loop: one that lands
    # in the worker's own checks (slow on a loaded machine) stops the cell before it runs
    in_cell, interrupted = [False], [False]

    def on_interrupt(signum, frame):
        if in_cell[0]:
            raise KeyboardInterrupt
        interrupted[0] = True
    _signal.signal(signal.SIGINT, on_interrupt)

    def run(code, *args, **kwargs):
        """``code(*args, **kwargs)`` in the cell's own time: interruptible."""
        in_cell[0] = True
        try:
            if interrupted[0]:
                raise KeyboardInterrupt
            return code(*args, **kwargs)
        finally:
            in_cell[0] = False
    signals = [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)]
    for s in signals:
        hooks[f"the {s.name} handler"] = (lambda s=s: _signal.getsignal(s))
    pristine_hooks = {k: f() for k, f in hooks.items()}
    pristine_modules = snapshot_modules()
    pristine_builtins = dict(vars(builtins))
    shell_state = {
        "a custom exception handler (set_custom_exc)": lambda: tuple(shell.custom_exceptions),
        "an input transformer": lambda: (tuple(shell.input_transformers_cleanup),
                                         tuple(shell.input_transformers_post)),
        "an AST transformer": lambda: tuple(shell.ast_transformers),
        "an IPython event callback": lambda: tuple(
            (e, tuple(c)) for e, c in sorted(shell.events.callbacks.items())),
        # the learner's cells run through these: replacing one on the shell or its class
        # changes nothing for the checks (they do not go through the shell), but is an attempt
        "a replacement for a shell method (run_cell, showtraceback, ...)": lambda: tuple(
            (n, shell.__dict__.get(n), getattr(type(shell), n, None)) for n in (
                "run_cell", "run_cell_async", "run_code", "run_ast_nodes", "transform_cell",
                "should_run_async", "showtraceback", "_showtraceback", "showsyntaxerror")),
    }
    pristine_shell = {k: f() for k, f in shell_state.items()}
    threads_at_start = thread_count()
    import concurrent.futures.thread
    pool_loop, current_frames = concurrent.futures.thread._worker.__code__, sys._current_frames

    def library_threads() -> int:
        """Live threads of the library's kernel-build pool (``tutorcompile.inductor.codecache``
        starts them on its first C++ build and keeps them, idle, for the next): threads the
        interpreter really runs whose stack is the executor's worker loop on that pool's
        queue. Read from the interpreter's own frames, which a submission cannot forge."""
        cache = sys.modules.get("tutorcompile.inductor.codecache")
        queue = getattr(getattr(cache, "_pool", None), "_work_queue", None)
        if queue is None:
            return 0
        count = 0
        for frame in current_frames().values():
            while frame is not None and frame.f_code is not pool_loop:
                frame = frame.f_back
            if frame is not None and frame.f_locals.get("work_queue") is queue:
                count += 1
        return count

    given: dict[str, object] = {}          # names bound by the exercise's own cells

    # -- the audit hook ---------------------------------------------------------------------
    # Paths are resolved now, before learner code; afterwards only str methods are used, so
    # nothing the submission can patch runs inside the hook.
    def roots(*paths) -> list[str]:
        return sorted({p for path in paths for p in (path, os.path.realpath(path))})

    paths = sysconfig.get_paths()
    ipython_roots = roots(os.path.dirname(sys.modules["IPython"].__file__))
    library_roots = roots(paths["purelib"], paths["platlib"], *hello["library_dirs"])
    stdlib_roots = roots(paths["stdlib"], paths["platstdlib"])
    forbidden = roots(*hello["forbidden"])
    own_pid = f"{os.getpid():d}"
    kinds: dict[str, str] = {}
    busy: set = set()
    flags: list[tuple[str, str]] = []
    where = ["startup"]

    def under(path: str, prefixes) -> bool:
        return any([path == r or path.startswith(r + "/") for r in prefixes])

    def kind_of(filename: str) -> str:
        kind = kinds.get(filename)
        if kind is None:
            if filename.startswith("<frozen"):
                kind = "stdlib"
            elif filename.startswith(check_prefix):
                kind = "exercise"
            elif filename.startswith("<ipython-input-"):
                kind = "learner"
            elif filename.startswith("<"):
                kind = "stdlib"        # "<string>": code made by exec (dataclasses, ...)
            elif under(filename, ipython_roots):
                kind = "stdlib"        # the shell only carries out the learner's cell
            elif under(filename, library_roots):
                kind = "library"
            elif under(filename, stdlib_roots):
                kind = "stdlib"
            else:
                kind = "learner"        # e.g. a module the submission wrote and imported
            kinds[filename] = kind
        return kind

    def from_learner() -> bool:
        """Is the nearest frame outside the standard library (and IPython) learner code?"""
        me = get_ident()
        busy.add(me)        # reading frames raises audit events of its own
        try:
            f = getframe(2)
            while f is not None:
                kind = kind_of(f.f_code.co_filename)
                if kind != "stdlib":
                    return kind == "learner"
                f = f.f_back
            return False
        finally:
            busy.discard(me)

    def normalize(path: str) -> str:
        if not path.startswith("/"):
            path = getcwd() + "/" + path
        parts: list[str] = []
        for part in path.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return "/" + "/".join(parts)

    def forbidden_path(path) -> bool:
        if type(path) is bytes:
            path = path.decode("utf-8", "replace")
        if type(path) is not str:
            return False                # a file descriptor
        path = normalize(path)
        if path.startswith("/proc/"):
            parts = path.split("/")
            return (len(parts) > 3 and parts[2] not in ("self", "thread-self", own_pid)
                    or parts[-1] in ("mem", "environ", "maps", "pagemap"))
        return under(path, forbidden)

    learner_only = {
        "sys._getframe": "read stack frames (sys._getframe)",
        "sys._current_frames": "read stack frames (sys._current_frames)",
        "gc.get_objects": "walked the garbage collector (gc.get_objects)",
        "gc.get_referrers": "walked the garbage collector (gc.get_referrers)",
        "gc.get_referents": "walked the garbage collector (gc.get_referents)",
        "sys.settrace": "installed a trace function (sys.settrace)",
        "sys.setprofile": "installed a profile function (sys.setprofile)",
        "subprocess.Popen": "started a process", "os.system": "started a process",
        "os.exec": "started a process", "os.posix_spawn": "started a process",
        "os.spawn": "started a process", "os.fork": "forked the kernel",
        "os.forkpty": "forked the kernel", "pty.spawn": "started a process",
        "os.kill": "sent a signal (os.kill)", "os.killpg": "sent a signal (os.killpg)",
        "signal.pthread_kill": "sent a signal",
        "resource.setrlimit": "changed a resource limit",
        "resource.prlimit": "changed a resource limit",
        "os.symlink": "made a symbolic link", "os.link": "made a hard link",
    }
    frame_attrs = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}

    def audit(event: str, args: tuple) -> None:
        if get_ident() in busy:
            return
        what = None
        if event == "sys.addaudithook":
            what = "installed an audit hook"
        elif event in ("open", "os.listdir", "os.scandir") and args and \
                forbidden_path(args[0]):
            what = f"read {normalize(str(args[0]))} (outside its folder)"
        elif event in learner_only:
            if from_learner():
                what = learner_only[event]
        elif event.startswith("ctypes."):
            if from_learner():
                what = f"used ctypes ({event})"
        elif event == "object.__getattr__":
            if args[1] in frame_attrs and from_learner():
                what = f"read stack frames (.{args[1]})"
        elif event == "object.__setattr__":
            target, name = args[0], args[1]
            if name in ("__code__", "__defaults__", "__kwdefaults__") and \
                    type(target) is function_type and \
                    kind_of(target.__code__.co_filename) != "learner" and from_learner():
                what = f"rewrote {name} of {target.__qualname__}"
        elif event in ("compile", "code.__new__"):
            filename = args[1]
            if type(filename) is bytes:
                filename = filename.decode("utf-8", "replace")
            if type(filename) is str and kind_of(filename) in ("library", "exercise") \
                    and from_learner():
                what = f"compiled code disguised as {filename}"
        if what is not None:
            flags.append((where[0], what))
            raise PermissionError(f"the grader does not allow a submission to: {what}")

    sys.addaudithook(audit)

    # -- verification -----------------------------------------------------------------------
    def verify() -> list[str]:
        """What differs from the pristine interpreter, by name (empty when intact)."""
        return check_interpreter()

    def library_wrapper(now, original) -> bool:
        """A library's own wrapper around the original (torch._dynamo wraps
        torch.manual_seed on import): made by library code, ``__wrapped__`` leads back."""
        code = getattr(now, "__code__", None)
        if code is None or kind_of(code.co_filename) == "learner":
            return False
        for _ in range(8):
            now = getattr(now, "__wrapped__", None)
            if now is original:
                return True
            if now is None:
                return False
        return False

    def check_interpreter() -> list[str]:
        problems, replaced = [], set()
        for k, f in hooks.items():
            if f() is not pristine_hooks[k] and f() != pristine_hooks[k]:
                problems.append(f"replaced {k}")
        for k, v in pristine_builtins.items():
            if getattr(builtins, k, None) is not v and k not in ("_", "__", "___"):
                problems.append(f"replaced builtins.{k}")
        for mod_name, (mod, items) in pristine_modules.items():
            if sys.modules.get(mod_name) is not mod:
                if mod_name in sys.modules:
                    problems.append(f"replaced the module {mod_name} in sys.modules")
                continue
            d = mod.__dict__
            for k, v in items:
                now = d.get(k)
                if now is not v and not library_wrapper(now, v):
                    problems.append(f"replaced {mod_name}.{k}")
                    replaced.add(f"{mod_name}.{k}")
        for mod_name, mod in list(sys.modules.items()):   # loaded later, or patched later
            d = getattr(mod, "__dict__", None)
            file = getattr(mod, "__file__", None)
            if not isinstance(d, dict) or not isinstance(file, str) or d is ns or \
                    kind_of(file) == "learner":
                continue
            for k, v in list(d.items()):
                if type(v) is function_type and kind_of(v.__code__.co_filename) == "learner" \
                        and f"{mod_name}.{k}" not in replaced:
                    problems.append(f"replaced {mod_name}.{k} with its own function")
        for k, f in shell_state.items():
            if f() != pristine_shell[k]:
                problems.append(f"installed {k}")
        if ns.get("__builtins__") is not builtins:
            problems.append("replaced __builtins__ in the notebook's namespace")
        if thread_count() > threads_at_start + library_threads():
            problems.append("left a thread running while checks run")
        if torch is not None:
            if torch._C._len_torch_function_stack() > 0:
                problems.append("left a torch function mode active")
            if torch._C._len_torch_dispatch_stack() > 0:
                problems.append("left a torch dispatch mode active")
            for cls in _tensor_subclasses(torch.Tensor):
                for hook in ("__torch_function__", "__torch_dispatch__"):
                    fn = getattr(cls.__dict__.get(hook), "__func__", cls.__dict__.get(hook))
                    code = getattr(fn, "__code__", None)
                    if code is not None and kind_of(code.co_filename) == "learner":
                        problems.append(f"defined a tensor subclass {cls.__name__} with its "
                                        f"own {hook}")
        return sorted(set(problems))

    def _tensor_subclasses(base) -> list:
        seen, todo = [], [base]
        while todo:
            for sub in type.__subclasses__(todo.pop()):
                if sub not in seen:
                    seen.append(sub)
                    todo.append(sub)
        return seen

    module_type = type(os)

    def pinned_globals() -> dict:
        """The globals a check runs in: the notebook's names, but the exercise's modules as
        stand-ins holding the pristine functions and a pristine builtins dict -- so even a
        patch made *during* the check and undone before it ends does not reach the
        comparisons the check itself makes."""
        stand_ins = {}
        for mod_name, (mod, items) in list(pristine_modules.items()):
            stand_in = module_type(mod_name)
            d = stand_in.__dict__
            for k, v in items:
                d[k] = v
            d["__getattr__"] = (lambda real: lambda name: getattr(real, name))(mod)
            stand_ins[id(mod)] = stand_in
        for stand_in in stand_ins.values():
            d = stand_in.__dict__
            for k, v in list(d.items()):
                if type(v) is module_type and id(v) in stand_ins:
                    d[k] = stand_ins[id(v)]
        g = dict(ns)
        for name, value in given.items():
            if type(value) is module_type and id(value) in stand_ins:
                g[name] = stand_ins[id(value)]
        g["__builtins__"] = dict(pristine_builtins)
        return g

    def restore_given() -> list[str]:
        notes = []
        for name, value in given.items():
            if ns.get(name, given) is not value:
                notes.append(name)
                ns[name] = value
        return notes

    def first_line(e: BaseException) -> str:
        text = str(e).strip().splitlines()
        return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__

    # -- the loop ---------------------------------------------------------------------------
    os.chdir(hello["cwd"])
    if hello.get("memory_limit"):
        import resource
        limit = int(hello["memory_limit"])
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    send("ready", 0, "ok", {})
    while True:
        index, role, label, source = receive()
        where[0], interrupted[0] = label, False
        if role == "learner":
            flags_before = len(flags)
            try:
                result = run(shell.run_cell, source, store_history=True)
                err = result.error_before_exec or result.error_in_exec
            except BaseException as e:     # the cell broke the shell itself
                err = e
            send("cell", index, "ok" if err is None else "error",
                 {"message": first_line(err) if err is not None else "",
                  "denied": flags[flags_before:]})
            continue
        try:
            code = compile(source, check_prefix + label + ">", "exec")
        except SyntaxError as e:
            send("cell", index, "error", {"message": first_line(e)})
            continue
        if role == "given":
            before = dict(ns)
            try:
                run(exec, code, ns)
                status, message = "ok", ""
            except BaseException as e:
                status, message = "error", first_line(e)
            for k, v in list(ns.items()):
                if not k.startswith("_") and before.get(k, before) is not v:
                    given[k] = v
            for mod_name, entry in snapshot_modules().items():   # modules it imported
                pristine_modules.setdefault(mod_name, entry)
            send("cell", index, status, {"message": message})
            continue
        # a check: verify, run it to its end, verify again
        restored = restore_given()
        before_problems = verify()
        flags_before = len(flags)
        check_globals = pinned_globals()
        start = dict(check_globals)
        try:
            run(exec, code, check_globals)
            finished, message = True, ""
        except BaseException as e:
            finished, message = False, first_line(e)
        for k, v in list(check_globals.items()):     # what the check defined, for later cells
            if k != "__builtins__" and start.get(k, start) is not v:
                ns[k] = v
        after_problems = verify()
        during = flags[flags_before:]
        problems = sorted(set(before_problems) | set(after_problems))
        passed = finished and not problems and not during
        if finished and not passed:
            message = "not counted: the submission " + "; ".join(
                problems + [w for _, w in during])
        send("check", index, "passed" if passed else "failed",
             {"message": message, "problems": problems, "restored": restored,
              "denied": during})


if __name__ == "__main__":
    main()
