"""The layers the README promises ("each importing only the floors below it"), held by a test.

Every module of the package is parsed (nothing is imported) and its imports of the package's
own modules are checked against the floors below:

* the import graph of module-level imports has no cycle;
* a module-level import never reaches a higher floor, nor a sibling package on its own floor;
* an import inside a function that does (a cycle dodged at run time: a moved function then
  fails when called, not when imported) is listed in ``CROSSING`` with the reason it is still
  there, and so is an import of another package's private name. The list only shrinks: an
  entry that is no longer needed fails the test until it is deleted.
"""

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.foundation

PACKAGE = Path(__file__).resolve().parent.parent / "tutorcompile"

# Lowest first. A package may import its own floor's modules only within itself.
FLOORS = [
    {"_version"},                                         # the version string alone
    {"errors", "_logging", "_caches", "_config", "environment", "fastpath"},   # only the version
    {"fx"},                                               # the graph IR and symbolic shapes
    {"ops"},                                              # prims, handlers, VJP rules
    {"amp", "autograd", "cudagraphs"},                    # built on graphs and prims
    {"aot"},                                              # stage 4, and the symbolic run
    {"dynamo"},                                           # stage 3, which asks it sizes
    {"inductor"},                                         # stage 5 (lowers AOT's graphs)
    {"bench", "models"},
    {"viz", "grading", "torch_backend", "lab", "__init__", "__main__"},   # what users call
]
FLOOR = {name: i for i, names in enumerate(FLOORS) for name in names}

# (importing module, imported module[:name]) -> why it is still there. Shrink it.
CROSSING: dict[tuple[str, str], str] = {}

# Every import of the package's own modules inside a function: (importing module, imported
# module) -> why it is not at module level. At most ten; the list only shrinks.
LAZY = {
    ("bench", "dynamo.eval_frame"):
        "stage 3 takes seconds to load; of bench only breakdown() needs it",
    ("viz.stages", "dynamo"):
        "the stage-by-stage view draws stages 1-2 without loading stage 3",
    ("viz.guards", "dynamo.eval_frame"): "the guard view loads stage 3 when it is called",
    ("viz.guards", "dynamo.guards"): "as above",
    ("viz.guards", "dynamo.vm"): "as above",
    ("viz.cudagraphs", "dynamo"): "only a compiled function's entries need stage 3",
    ("dynamo.variables.builder", "dynamo.eval_frame"):
        "a cycle: eval_frame runs the translator, whose builder unwraps compiled "
        "functions (OptimizedCallable, OptimizedModule) to inline them",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def package_of(module: str) -> str:
    return module.split(".")[0]


def imports(module: str):
    """(target module, imported name or None, at module level?) for each import of the
    package's own modules; imports under ``if TYPE_CHECKING:`` are skipped."""
    path = MODULES[module]
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if module == "__init__":
        here = []
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    in_function = {id(n) for f in ast.walk(tree)
                   if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)}
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        top = id(node) not in in_function
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tutorcompile."):
                    yield alias.name.removeprefix("tutorcompile."), None, top
            continue
        if node.level:
            base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
            target = ".".join(base + ([node.module] if node.module else []))
        elif (node.module or "").startswith("tutorcompile"):
            target = node.module.removeprefix("tutorcompile").lstrip(".")
        else:
            continue
        for alias in node.names:
            full = f"{target}.{alias.name}" if target else alias.name
            if full in MODULES:
                yield full, None, top
            else:
                yield target or "__init__", alias.name, top


def test_every_package_has_a_floor():
    assert {package_of(m) for m in MODULES} - set(FLOOR) == set()


def test_module_level_imports_have_no_cycle():
    edges = {m: {t for t, _, top in imports(m) if top and t in MODULES and t != m}
             for m in MODULES}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for t in edges[m]:
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                pytest.fail("an import cycle at module level: " + " -> ".join(cycle))
            if t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m, [m])


def test_imports_go_down_the_floors():
    found, unexpected = set(), []
    for m in sorted(MODULES):
        for target, name, top in imports(m):
            mine, theirs = package_of(m), package_of(target)
            if mine == theirs:
                continue
            upward = FLOOR[theirs] >= FLOOR[mine]
            private = name is not None and name.startswith("_") and not name.startswith("__")
            if not (upward or private):
                continue
            key = (m, f"{target}:{name}" if name else target)
            if key in CROSSING and (not top or private):
                found.add(key)
            else:
                where = "at module level" if top else "inside a function"
                what = f"the private name {name} of" if private else "a higher or sibling floor,"
                unexpected.append(f"{m} imports {what} {key[1]} {where}")
    assert not unexpected, "\n".join(unexpected)
    assert not set(CROSSING) - found, \
        f"no longer imported, delete from CROSSING: {sorted(set(CROSSING) - found)}"


def test_imports_inside_functions_are_listed():
    found = {(m, target) for m in MODULES for target, _, top in imports(m) if not top}
    assert not found - set(LAZY), \
        f"imports inside functions: move them to module level or add a reason to LAZY: " \
        f"{sorted(found - set(LAZY))}"
    stale = sorted(set(LAZY) - found)
    assert not stale, f"no longer imported, delete from LAZY: {stale}"
    assert len(LAZY) <= 10


@pytest.mark.parametrize("package", sorted(str(p.parent.relative_to(PACKAGE))
                                           for p in PACKAGE.rglob("*/__init__.py")))
def test_package_map_names_every_module(package):
    """A package's docstring map (its ``::`` block) names each of its modules, so the map a
    newcomer reads first does not drift from the files."""
    folder = PACKAGE / package
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    if "::" not in doc:
        pytest.skip("no map in the package docstring")
    modules = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    modules += [p.name for p in folder.iterdir() if (p / "__init__.py").exists()]
    missing = [m for m in sorted(modules) if not re.search(rf"(?<!\w){re.escape(m)}\b", doc)]
    assert not missing, f"tutorcompile/{package}/__init__.py's map does not name {missing}"


def test_code_generation_never_traces_python():
    """Stage 5 spells graphs it is given: nothing under ``inductor/`` imports Python tracing
    (``aot.tracing``) or the decomposition of a traced function into prims. A scan's
    ``combine_fn`` reaches it as prims: capture speculates it into a body, stage 4
    decomposes that (``aot.prim_graph.capture_combine_fn``)."""
    found = [f"{m} imports {target}{':' + name if name else ''}"
             for m in sorted(MODULES) if package_of(m) == "inductor"
             for target, name, _ in imports(m)
             if target == "aot.tracing" or (package_of(target) == "aot" and name in (
                 "trace_with_inputs", "decompose", "capture_combine_fn"))]
    assert not found, "\n".join(found)
