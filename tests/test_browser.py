"""The course and its widgets in a real browser: JupyterLab, headless Chromium, the DOM.

Two tests:

* ``test_course_lab_opens_the_course`` is a learner's first contact: ``./course lab`` itself
  (as root too, where it must pass ``--allow-root``), reached at the address it prints, must
  open notebook 00 from the repository root, show ``exercises/`` (and ``notebooks/``,
  ``solutions/``) in the file browser, and run every cell of notebook 00 without an error;
  a solution then opens read-only and refuses to be saved.
  It runs the script with ``TUTORCOMPILE_SKIP_SETUP=1`` in this interpreter's environment
  and hands JupyterLab its port and an empty token through the script's pass-through
  arguments. Autosave is off, so the run never writes outputs into the repository.
* ``test_widgets_render_in_jupyterlab``: unit tests drive widget *models*; only a browser
  shows that the front end renders them -- that the explorer's drawing arrives as an SVG
  inside an HTML widget, the tabs and dropdowns are live, the Timing widget's Run button
  reaches the kernel and its chart comes back as an image in the Output widget -- rather than
  each widget's text fallback. It starts JupyterLab on 127.0.0.1 (a free port, no token) in a
  temporary folder holding a copy of ``tests/browser/widgets.ipynb``, runs every cell from
  the Run menu, clicks Run in the Timing widget, and checks the page's DOM.

Screenshots go to ``artifacts/browser/``.

It uses the system's Chromium through Playwright (never a downloaded browser) and is skipped
with a one-line reason when either is missing. ``./course test`` installs Debian's chromium.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "tests" / "browser" / "widgets.ipynb"
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.25)
    raise TimeoutError(f"JupyterLab did not listen on port {port} within {timeout:.0f} s")


@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free port, serving a folder with the fixture notebook."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    port = _free_port()
    env = _lab_environment(root)
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0", "--allow-root",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        _wait_for_port(port, proc, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _lab_environment(root: Path) -> dict:
    """The server's runtime files and JupyterLab's settings live in a temporary folder, so the
    user's own layout, theme or shortcuts cannot change what the test sees."""
    return dict(os.environ, JUPYTER_RUNTIME_DIR=str(root / ".runtime"),
                JUPYTERLAB_SETTINGS_DIR=str(root / ".lab-settings"),
                JUPYTERLAB_WORKSPACES_DIR=str(root / ".lab-workspaces"),
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                         os.environ.get("PYTHONPATH")])))


@pytest.fixture(scope="module")
def course_lab(tmp_path_factory):
    """``./course lab`` on a free port, serving the repository; yields the address it prints."""
    root = tmp_path_factory.mktemp("course-lab")
    # no autosave (running notebook 00 must not write into the repository); every cell in
    # the DOM (by default JupyterLab renders only the cells in view)
    for plugin, value in (("docmanager-extension/plugin", '{"autosave": false}'),
                          ("notebook-extension/tracker", '{"windowingMode": "none"}')):
        path = root / ".lab-settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)
    checkpoints_existed = (ROOT / "notebooks" / ".ipynb_checkpoints").exists()
    port = _free_port()
    env = dict(_lab_environment(root), TUTORCOMPILE_VENV=sys.prefix, TUTORCOMPILE_SKIP_SETUP="1")
    log_path = root / "lab.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        ["bash", str(ROOT / "course"), "lab", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
         "--ServerApp.port_retries=0", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        _wait_for_port(port, proc, timeout=60)
        printed = log_path.read_text()
        if os.getuid() == 0:
            assert "passing --allow-root" in printed
        address = re.search(rf"http://127\.0\.0\.1:{port}/\S*", printed)
        assert address, f"./course lab printed no address:\n{printed}"
        yield address.group(0)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if not checkpoints_existed:
            shutil.rmtree(ROOT / "notebooks" / ".ipynb_checkpoints", ignore_errors=True)


def test_course_lab_opens_the_course(chromium, course_lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    try:
        _open_course_and_run_notebook_00(page, course_lab)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "course_lab_failure.png"), full_page=True)
        raise
    finally:
        page.close()


def _listing(page) -> list[str]:
    return page.locator(".jp-DirListing-content .jp-DirListing-itemText").all_inner_texts()


_LISTS = ("n => [...document.querySelectorAll('.jp-DirListing-itemText')]"
          ".some(e => e.textContent.trim() === n)")


def _go_home(page) -> None:
    """The file browser at the repository root, its listing rendered."""
    page.locator(".jp-BreadCrumbs-home").click()
    page.wait_for_function(_LISTS, arg="exercises", timeout=60_000)


def _enter_folder(page, name: str) -> None:
    """Double-click a folder of the current listing until the browser is inside it.

    On a loaded machine a double click can land while the listing re-renders (the item is
    replaced under the pointer) and JupyterLab then sees two single clicks: the folder is
    only selected. So the click is repeated, each time after the listing shows the folder,
    until the breadcrumbs name it and its own listing has arrived.
    """
    inside = ("n => document.querySelector('.jp-BreadCrumbs').textContent.includes(n)"
              " && document.querySelectorAll('.jp-DirListing-itemText').length > 0"
              " && ![...document.querySelectorAll('.jp-DirListing-itemText')]"
              ".some(e => e.textContent.trim() === n)")
    for _ in range(4):
        page.wait_for_function(_LISTS, arg=name, timeout=60_000)
        page.locator(".jp-DirListing-item", has_text=name).first.dblclick()
        try:
            page.wait_for_function(inside, arg=name, timeout=20_000)
            return
        except Exception:  # noqa: BLE001 -- a timeout: the double click did not open it
            pass
    raise AssertionError(f"the file browser did not open {name}/ after four double clicks")


def _open_course_and_run_notebook_00(page, address: str) -> None:
    minute = 60_000
    assert address.endswith("/lab/tree/notebooks/00_welcome.ipynb"), address
    page.goto(address)
    page.wait_for_selector(".jp-Notebook", timeout=minute)
    current = page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")
    assert "00_welcome.ipynb" in current.inner_text()
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=minute)
    _dismiss_news_toast(page)

    # the file browser reaches the whole course from the repository root
    _go_home(page)
    listing = _listing(page)
    for folder in ("notebooks", "exercises", "solutions"):
        assert folder in listing, listing
    assert not any(name.endswith(".egg-info") for name in listing), listing
    page.screenshot(path=str(ARTIFACTS / "course_lab_files.png"))
    _enter_folder(page, "exercises")
    exercises = _listing(page)
    assert {f"{p.name}" for p in (ROOT / "exercises").glob("*.ipynb")} <= set(exercises)
    page.screenshot(path=str(ARTIFACTS / "course_lab_exercises.png"))

    # notebook 00, run from a clean slate: every code cell gets a new number, none fails
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
    notebook.locator(".jp-Cell").first.click()
    page.get_by_role("menuitem", name="Edit", exact=True).click()
    page.get_by_role("menuitem", name="Clear Outputs of All Cells", exact=True).click()
    prompts = notebook.locator(".jp-CodeCell .jp-InputPrompt")
    assert all("[ ]" in t for t in prompts.all_inner_texts()), repr(prompts.all_inner_texts())
    _run_all_cells(page)
    page.wait_for_function(
        "n => { const p = [...document.querySelectorAll("
        "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];"
        " return p.length === n && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }",
        arg=prompts.count(), timeout=6 * minute)
    counts = [int(re.search(r"\[(\d+)\]", t).group(1)) for t in prompts.all_inner_texts()]
    assert counts == list(range(1, len(counts) + 1)), counts   # all ran, in order, once
    outputs = notebook.locator(".jp-OutputArea-output").all_inner_texts()
    failures = [o for o in outputs if "Traceback" in o]
    assert not failures, failures[0]
    drawing = notebook.locator(".jp-OutputArea-output .widget-html svg")  # the explorer's
    assert drawing.count() >= 1
    drawing.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "course_lab_notebook00.png"))

    # a solution opens read-only, and saving it is refused (JupyterLab offers Save As)
    solution = ROOT / "solutions" / "ex01_autograd.ipynb"
    before = solution.read_bytes()
    _go_home(page)
    _enter_folder(page, "solutions")
    page.locator(".jp-DirListing-item", has_text="ex01_autograd.ipynb").dblclick()
    # the solution's own tab is current (its tooltip names the path) before anything is typed:
    # a save that reached notebook 00 would write into the repository
    page.wait_for_function(
        "() => { const t = document.querySelector("
        "'#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current');"
        " return t && (t.title || '').includes('solutions/ex01_autograd.ipynb'); }",
        timeout=2 * minute)
    # the server reports it unwritable (the toolbar's "notebook is read-only" label reads this
    # field; on a narrow toolbar it may sit in the overflow menu, so the field itself is checked)
    api = address.split("/lab/")[0] + "/api/contents/solutions/ex01_autograd.ipynb?content=0"
    assert page.request.get(api).json()["writable"] is False
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.click()
    page.keyboard.press("Control+s")
    page.get_by_text("is read-only. Use").first.wait_for(timeout=minute)
    page.screenshot(path=str(ARTIFACTS / "course_lab_solution_read_only.png"))
    assert solution.read_bytes() == before


def test_widgets_render_in_jupyterlab(chromium, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    try:
        _run_notebook_and_check(page, lab)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
        raise
    finally:
        page.close()


def _dismiss_news_toast(page) -> None:
    """JupyterLab asks whether to fetch news; answer No so it stays out of the screenshots."""
    try:
        page.get_by_role("button", name="No", exact=True).click(timeout=3000)
    except Exception:  # noqa: BLE001 -- no toast this time
        pass


def _started(page, timeout_ms: int) -> bool:
    """Whether the first code cell has started running (its prompt shows [*] or a number)."""
    prompt = page.locator(".jp-CodeCell .jp-InputPrompt").first
    try:
        page.wait_for_function("el => /\\[(\\*|\\d+)\\]/.test(el.textContent)",
                               arg=prompt.element_handle(), timeout=timeout_ms)
        return True
    except Exception:  # noqa: BLE001 -- a timeout: nothing started
        return False


def _run_all_cells(page) -> None:
    """Run menu -> Run All Cells; if the kernel was not ready for it, run cell by cell."""
    page.click(".jp-CodeCell .jp-InputArea-editor >> nth=0")  # focus the notebook
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    if _started(page, 15_000):
        return
    page.keyboard.press("Escape")
    page.click(".jp-CodeCell .jp-InputArea-editor >> nth=0")
    for _ in range(page.locator(".jp-CodeCell").count()):
        page.keyboard.press("Shift+Enter")
    assert _started(page, 30_000), "the notebook's cells did not start running"


def _run_notebook_and_check(page, lab: str) -> None:
    minute = 60_000
    page.goto(f"{lab}/lab/tree/{NOTEBOOK.name}")
    page.wait_for_selector(".jp-Notebook", timeout=minute)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=minute)
    page.wait_for_selector(".jp-Spinner", state="detached", timeout=minute)
    _dismiss_news_toast(page)
    _run_all_cells(page)
    out = ".jp-OutputArea-output"

    # GraphExplorer: dropdowns, tabs, and the drawing as a real SVG in an HTML widget (the
    # first cell imports torch and every stage compiles: allow for a slow, busy machine)
    page.wait_for_selector(f"{out} .widget-html svg", timeout=2 * minute)
    explorer = page.locator(".jp-Cell").nth(2)
    assert explorer.locator(".widget-dropdown").count() >= 3  # stage, graph, node
    assert explorer.locator(".widget-tab, .jupyter-widget-tab").count() >= 1
    assert explorer.locator(".widget-html svg g.node").count() >= 5  # graphviz node boxes
    stages = explorer.locator(".widget-dropdown select").first
    # ipywidgets shows spaces in option labels as non-breaking spaces
    options = [o.replace("\xa0", " ") for o in stages.locator("option").all_inner_texts()]
    assert "captured" in options and "aot (torch)" in options
    # choose a stage, then a graph, in the page; the kernel answers with new drawings. Wait
    # for each answer before the next choice: the drawing is the last of the kernel's updates
    # for a selection, so once it is there the dropdowns hold the kernel's values
    drawing = explorer.locator(".widget-html").nth(1).element_handle()
    stages.select_option(index=options.index("aot (torch)"))
    page.wait_for_function("el => el.innerHTML.includes('aot (torch): joint')", arg=drawing,
                           timeout=minute)
    graph = explorer.locator(".widget-dropdown select").nth(1)
    graph.select_option(index=2)  # joint, forward, backward
    page.wait_for_function("el => el.innerHTML.includes('aot (torch): backward')",
                           arg=drawing, timeout=minute)
    explorer.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "explorer.png"))
    # the code tab shows the generated forward of the selected (backward) graph
    explorer.locator(".lm-TabBar-tab", has_text="code").click()
    code = explorer.locator(".widget-html pre", has_text="def forward").first
    code.wait_for(state="visible", timeout=minute)
    assert "tangents" in code.inner_text()
    if "fused kernels" in options:  # stage 5: the prim graph coloured by kernel
        explorer.locator(".lm-TabBar-tab", has_text="drawing").click()
        stages.select_option(index=options.index("fused kernels"))
        page.wait_for_function("el => el.innerHTML.includes('kernel=')", arg=drawing,
                               timeout=minute)
        explorer.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "explorer_kernels.png"))

    # Timing: slider and Run button render; Run reaches the kernel; the chart comes back
    timing = page.locator(".jp-Cell").nth(3)
    timing.locator(".widget-slider").first.wait_for(timeout=minute)
    timing.locator("button.widget-button", has_text="Run").click()
    timing.locator(".widget-output img").wait_for(timeout=minute)
    assert timing.locator("table.tc-timing tr").count() == 3  # header + 2 candidates
    timing.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "timing.png"))

    # GuardInspector: the failing guard is shown, highlighted
    guards = page.locator(".jp-Cell").nth(4)
    guards.locator("table.tc-guards").wait_for(timeout=minute)
    assert "size mismatch" in guards.locator(".widget-html").first.inner_text()
    guards.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "guards.png"))
    # none of the widgets fell back to its text form
    assert page.locator(f"{out} >> text=GraphExplorer of").count() == 0
