"""The course in a real browser: `make lab` serves a temporary copy of the course and
Chromium, driven by Playwright, uses it as a student and an instructor would.

Every step leaves a screenshot under test-artifacts/browser/ (git-ignored); a failing
step names the screenshot to look at. The tests skip, saying why, where the pip package
playwright or a Chromium executable is missing (Debian: `apt-get install chromium` as
root; .ci/run does it). CHROMIUM=/path/to/chrome picks another executable.

One lab server and one browser page serve all the tests, which run in file order on one
xdist worker (xdist_group): the 03 tests share one notebook and kernel, as a student
works through it; a test that fails leaves the page reloaded for the next one. They are
module fixtures, so the worker stops the lab, Chromium and Playwright once the last browser
test is done: Playwright's sync API marks an asyncio loop running in the worker's main
thread while it is open, and the grading tests that run after it on that worker would
otherwise run their cells through jupyter_core's helper thread, not as `make autograde` does.
"""
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import nbformat
import pytest

from support.paths import ROOT

ARTIFACTS = ROOT / "test-artifacts" / "browser"
TOKEN = "browser-test-token"
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if any(p.glob("*.ipynb")))
TIMEOUT_MS = 90_000  # generous: the other test worker may be running notebooks meanwhile

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

# Settings of the fresh user: every cell kept in the page (JupyterLab otherwise renders
# only the cells in view). The news pop-up is switched off by the course itself (make install).
USER_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

# The kernel of the notebook `panel` has been idle for 0.4 s: its status bar entry (not the
# execution indicator, which says idle too early) and kernel name are shown, no cell waits
# to run, and no other cell started meanwhile (after an error the kernel may still run a
# few queued cells).
KERNEL_IDLE = """(panel) => {
    const bar = document.querySelector('#jp-main-statusbar');
    const name = panel.querySelector('.jp-KernelName');
    const prompts = [...panel.querySelectorAll('.jp-InputPrompt')];
    const idle = bar !== null && bar.innerText.includes('| Idle') && name !== null
        && !name.innerText.includes('No Kernel') && !prompts.some(p => p.innerText.includes('[*]'));
    const now = performance.now();
    if (!idle) { window.courseIdleSince = undefined; return false; }
    if (window.courseIdleSince === undefined) window.courseIdleSince = now;
    return now - window.courseIdleSince >= 400;
}"""
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'


def _chromium():
    """$CHROMIUM if set, else Debian's chromium (or chromium-browser) on the PATH."""
    candidates = [os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else ["chromium", "chromium-browser"]
    return next(filter(None, map(shutil.which, candidates)), None)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser tests skipped: the pip package playwright is not installed "
                    "(`make install` installs it from requirements.txt)")
    executable = _chromium()
    if executable is None:
        pytest.skip(f"browser tests skipped: no Chromium executable "
                    f"({os.environ.get('CHROMIUM') or 'chromium on the PATH'}). Install Debian's "
                    "chromium package as root (`apt-get install chromium`; .ci/run does it) "
                    "or set CHROMIUM=/path/to/chromium")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable)
        yield chromium
        chromium.close()


class Lab:
    """`make lab` serving a temporary copy of the course."""

    def __init__(self, course, port, log):
        self.course, self.base, self.log = course, f"http://127.0.0.1:{port}", log

    def url(self, path):
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={TOKEN}"

    def notebook_copy(self, assignment, suffix):
        """A student's copy of a notebook in work/ (the self-study route), with a kernel of its own."""
        src = next((self.course / "notebooks" / assignment).glob("*.ipynb"))
        dest = self.course / "work" / assignment / f"{src.stem}-{suffix}.ipynb"
        shutil.copy(src, dest)
        return dest.relative_to(self.course).as_posix()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A temporary copy of the course, with the user settings of a fresh user."""
    tmp = tmp_path_factory.mktemp("browser")
    course = tmp / "course"
    course.mkdir()
    for name in ("notebooks", "solutions", "config"):
        shutil.copytree(ROOT / name, course / name)
    for name in ("Makefile", "install.mk", "nbgrader_config.py", "requirements.txt", "requirements.lock",
                 "pyproject.toml"):
        shutil.copy2(ROOT / name, course / name)
    (course / ".venv").symlink_to(sys.prefix)
    assert not (course / "exchange").exists()
    for name, values in USER_SETTINGS.items():
        path = tmp / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return course


@contextlib.contextmanager
def _serving(course, target):
    """`make <target>` (lab: the student's; formgrader: the instructor's) serving the course."""
    tmp = course.parent
    port, log = _free_port(), tmp / f"{target}.log"
    options = (f"--no-browser --IdentityProvider.token={TOKEN} "
               f"--LabApp.user_settings_dir={tmp / 'settings'} --LabApp.workspaces_dir={tmp / 'workspaces'}")
    # make itself, as a student or an instructor runs it; -o: never reinstall from inside a test.
    cmd = ["make", "-s", "-o", ".venv/.installed", target, f"PORT={port}", f"LAB_OPTS={options}"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=course, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    server = Lab(course, port, log)
    started = time.monotonic()
    try:
        deadline = started + 120
        while True:
            try:
                urllib.request.urlopen(server.url("/api/status"), timeout=5)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"`make {target}` did not start in {course}:\n{log.read_text()[-3000:]}")
                time.sleep(0.3)
        with open(ARTIFACTS / "steps.tsv", "a") as out:
            out.write(f"setup\tmake {target} answers\t{time.monotonic() - started:.2f}\n")
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # make and the jupyter server it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def lab(browser, course):
    """`make lab`: the student's lab."""
    with _serving(course, "lab") as server:
        yield server


@pytest.fixture(scope="module")
def instructor_lab(browser, course):
    """`make formgrader`: the instructor's lab, on the same course."""
    with _serving(course, "formgrader") as server:
        yield server


class UI:
    """The student's JupyterLab page, loaded once, and the steps a person takes on it.
    Every step ends with a screenshot; a failing step names it."""

    def __init__(self, page, lab):
        self.page, self.lab, self.name, self.steps, self.broken = page, lab, "setup", 0, False

    def screenshot(self, label, page=None):
        self.steps += 1
        slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()
        path = ARTIFACTS / f"{self.name}-{self.steps:02d}-{slug}.png"
        try:
            (page or self.page).screenshot(path=str(path))
        except Exception as err:  # the page itself is broken: say so, keep the real error
            return f"{path} (could not be taken: {err})"
        return str(path)

    @contextlib.contextmanager
    def step(self, label, page=None):
        """Run one step; screenshot after it. A failure names the screenshot to look at.
        Each step's wall time goes to test-artifacts/browser/steps.tsv (seconds)."""
        start = time.monotonic()
        try:
            yield
        except Exception as err:
            self.broken = True
            shot = self.screenshot(f"{label} FAILED", page)
            raise AssertionError(f"step '{label}' failed: {err}\n  look at the screenshot {shot}"
                                 f"\n  the lab's log: {self.lab.log}") from err
        finally:
            self.record(label, time.monotonic() - start)
        self.screenshot(label, page)

    def record(self, what, seconds):
        with open(ARTIFACTS / "steps.tsv", "a") as out:
            out.write(f"{self.name}\t{what}\t{seconds:.2f}\n")

    # --- JupyterLab -------------------------------------------------------------------
    def load(self, path="work"):
        """(Re)load the lab at a path under /lab/tree, in a workspace of its own so no
        tabs come back from an earlier visit. `work` is make lab's landing page."""
        workspace = f"/lab/workspaces/t{uuid.uuid4().hex[:10]}"
        self.page.goto(self.lab.url(f"{workspace}/tree/{path}" if path else workspace))  # "": the server's root
        self.page.locator(".jp-DirListing-item").first.wait_for()
        self.broken = False

    def menu(self, top, item):
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}")).click()

    def tab(self, title):
        return self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=title)

    @property
    def notebook(self):
        """The notebook panel of the current tab."""
        current = self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
        return self.page.locator(f"[id='{current.get_attribute('data-id')}']")

    def open_notebook(self, path):
        """File > Open from Path (or its tab, if open), then wait for an idle kernel."""
        name = path.rsplit("/", 1)[-1]
        if self.tab(name).count():
            self.tab(name).click()
        else:
            self.menu("File", "Open from Path")
            self.page.locator(".jp-Dialog input").fill(path)
            self.page.keyboard.press("Enter")
        self.tab(name).and_(self.page.locator(".lm-mod-current")).wait_for()
        self.notebook.locator(".jp-Cell").first.wait_for()
        self.wait_kernel_idle()

    def wait_kernel_idle(self):
        """Wait until the current notebook's kernel is idle and stays so (KERNEL_IDLE)."""
        self.page.evaluate("window.courseIdleSince = undefined")
        self.page.wait_for_function(KERNEL_IDLE, arg=self.notebook.element_handle(), timeout=TIMEOUT_MS)

    def run(self, item, first_cell):
        """A Run menu item, then wait until `first_cell` has run and the kernel is idle."""
        prompt = first_cell.locator(".jp-InputPrompt")
        before = prompt.inner_text()
        if item != "Run All Cells":
            first_cell.locator(".jp-InputPrompt").click()  # select the cell
        self.menu("Run", item)
        self.page.wait_for_function("([el, before]) => /\\[\\d+\\]/.test(el.innerText) && el.innerText !== before",
                                    arg=[prompt.element_handle(), before], timeout=TIMEOUT_MS)
        self.wait_kernel_idle()

    def run_all(self):
        self.run("Run All Cells", self.notebook.locator(".jp-CodeCell").first)

    def code_cell(self, containing):
        return self.notebook.locator(".jp-CodeCell", has=self.page.locator(".cm-content", has_text=containing))

    def set_source(self, cell, source):
        """Replace a cell's code as a person would: click, select all, type (pasted, so
        the editor's auto-indent leaves it alone)."""
        cell.locator(".cm-content").click()
        self.page.keyboard.press("ControlOrMeta+A")
        self.page.keyboard.insert_text(source)
        self.page.keyboard.press("Escape")

    def errors(self):
        """Cells of the current notebook that show an error."""
        return self.notebook.locator(".jp-CodeCell", has=self.page.locator(STDERR))

    def settled(self, read, what, timeout=20.0, quiet=0.3):
        """Poll read() until it has returned the same value for `quiet` seconds."""
        deadline, last, since = time.monotonic() + timeout, object(), time.monotonic()
        while time.monotonic() < deadline:
            value = read()
            if value != last:
                last, since = value, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return value
            time.sleep(0.1)
        raise AssertionError(f"{what} kept changing for {timeout} s")


@pytest.fixture(scope="module")
def student(browser, lab):
    """One JupyterLab page for all the tests: the lab's scripts load once."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    ui = UI(context.new_page(), lab)
    with ui.step("load the lab"):
        ui.load()
    yield ui
    context.close()


@pytest.fixture
def ui(student, request):
    student.name, student.steps = request.node.name.removeprefix("test_"), 0
    if student.broken:  # an earlier test failed half-way: start from a clean page
        student.load()
    yield student


@pytest.fixture(scope="module")
def notebook_03(student, lab):
    """A copy of notebook 03 open in the lab, run top to bottom (it stops at the first
    exercise, as a student's does)."""
    path = lab.notebook_copy("03_masked_softmax", "student")
    student.name, student.steps = "03_setup", 0
    with student.step("open 03"):
        student.open_notebook(path)
    with student.step("run all"):
        student.run_all()
    return path


# --- what a student sees ---------------------------------------------------------------

def test_landing_page_lists_the_notebooks_and_no_instructor_panel(ui):
    with ui.step("landing page"):  # loaded by the `student` fixture at make lab's default_url
        listing = ui.page.locator(".jp-DirListing-content")
        for name in ASSIGNMENTS:
            listing.locator(".jp-DirListing-item", has_text=name).wait_for()
    with ui.step("extensions in the page"):
        config = json.loads(ui.page.locator("#jupyter-config-data").text_content())
        extensions = {e["name"] for e in config["federated_extensions"]}
        assert {"@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"} <= extensions, extensions
        assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    with ui.step("no nbgrader menu, no Create Assignment panel"):  # the instructor's, and the exchange's
        menus = ui.page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        assert "File" in menus and "Nbgrader" not in menus, menus
        assert ui.page.locator("[data-id='nbgrader-create_assignemnt']").count() == 0  # nbgrader's own id
    with ui.step("the launcher offers one Python kernel"):
        ui.menu("File", "New Launcher")  # the launcher in view: JupyterLab may have opened one already
        cards = ui.page.locator(".jp-LauncherCard[data-category='Notebook']:visible")
        cards.first.wait_for()
        titles = [cards.nth(i).get_attribute("title") for i in range(cards.count())]
        assert titles == ["Python 3 (ipykernel)"], titles  # not "Python 3 (grading sandbox)"
    with ui.step("no news pop-up"):
        assert not ui.page.get_by_text("Jupyter news").count()


def _widget(ui, cell_code):
    cell = ui.code_cell(cell_code)
    widget = cell.locator(".widget-vbox").first
    widget.wait_for()
    widget.scroll_into_view_if_needed()
    return widget


def _chart(widget):
    """A short fingerprint of the chart image (its data URL), None while there is none."""
    images = widget.locator(".widget-output img")
    src = images.first.get_attribute("src") if images.count() == 1 else None
    return hashlib.sha1(src.encode()).hexdigest()[:12] if src else None


def _stats(widget):
    return widget.locator(".widget-html-content").inner_text()


def _settle(ui, widget, expect, previous_chart, what):
    """Wait for the line of numbers to show `expect` and the chart to be redrawn, then
    for both to stay put; return (line, chart)."""
    from playwright.sync_api import expect as expect_that

    start = time.monotonic()
    expect_that(widget.locator(".widget-html-content")).to_contain_text(expect, timeout=15_000)
    deadline = time.monotonic() + 15
    while _chart(widget) in (None, previous_chart):
        assert time.monotonic() < deadline, f"{what}: the chart was not redrawn"
        time.sleep(0.05)
    ui.record(f"{what}: chart redrawn after", time.monotonic() - start)
    ui.wait_kernel_idle()
    line, chart = ui.settled(lambda: (_stats(widget), _chart(widget)), what)
    assert expect in line, line
    assert chart not in (None, previous_chart), f"{what}: the chart went back"
    return line, chart


def _drag(ui, handle, track, fraction):
    """Drag a slider's handle with the mouse to `fraction` of its track."""
    bar, box = track.bounding_box(), handle.bounding_box()
    ui.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    ui.page.mouse.down()
    ui.page.mouse.move(bar["x"] + fraction * bar["width"], bar["y"] + bar["height"] / 2, steps=8)
    ui.page.mouse.up()
    ui.wait_kernel_idle()


def _number(line, label):
    match = re.search(rf"{label} ([0-9.]+)", line)
    assert match, f"no '{label}' in {line!r}"
    return float(match.group(1))


SHARPENER_SCORES = [2.0, 1.0, 0.5, -0.5, 0.0, -1.5]  # notebook 03's `scores`


def _softmax_stats(factor):
    exps = [math.exp(factor * s) for s in SHARPENER_SCORES]
    probs = [e / sum(exps) for e in exps]
    return -sum(p * math.log(p) for p in probs if p > 0), max(probs)


def test_softmax_sharpener_widget_follows_its_slider(ui, notebook_03):
    with ui.step("the widget"):
        ui.open_notebook(notebook_03)
        widget = _widget(ui, "SoftmaxSharpener(scores")
        line, chart = _settle(ui, widget, "factor 1.0", None, "initial chart")
    charts = {chart}
    readout, handle = widget.locator(".widget-readout"), widget.locator(".noUi-handle")
    for factor in (3.0, 0.5, 7.5):
        with ui.step(f"type factor {factor}"):
            readout.click()
            ui.page.keyboard.press("ControlOrMeta+A")
            ui.page.keyboard.type(str(factor))
            ui.page.keyboard.press("Enter")
            line, chart = _settle(ui, widget, f"factor {factor:.1f}", chart, f"factor {factor}")
            assert readout.inner_text() == f"{factor:.2f}"
            entropy, largest = _softmax_stats(factor)
            assert _number(line, "entropy") == pytest.approx(entropy, abs=1e-3), line
            assert _number(line, "largest probability") == pytest.approx(largest, abs=1e-3), line
            charts.add(chart)
    with ui.step("drag the slider"):
        _drag(ui, handle, widget.locator(".noUi-target"), 0.2)
        line, chart = ui.settled(lambda: (_stats(widget), _chart(widget)), "after dragging")
        factor = _number(line, "factor")
        assert 1.0 <= factor <= 3.0, f"dragged to 20% of 0..10 but the widget says {line!r}"
        assert readout.inner_text() == f"{factor:.2f}"
        assert _number(line, "entropy") == pytest.approx(_softmax_stats(factor)[0], abs=1e-3), line
        charts.add(chart)
    assert len(charts) == 5, "every slider value should draw a different chart"


WRONG_MASKED_SOFTMAX = '''def masked_softmax(scores, mask):
    """Softmax over the last dim, ignoring positions where mask is True; empty rows -> 0."""
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=0)
'''


def test_wrong_answer_shows_the_named_mistake_in_a_few_lines(ui, notebook_03):
    ui.open_notebook(notebook_03)
    solution = ui.code_cell("def masked_softmax(scores, mask):")
    with ui.step("write softmax over dim 0"):
        ui.set_source(solution, WRONG_MASKED_SOFTMAX)
    with ui.step("run it and the cells below"):
        ui.run("Run Selected Cell and All Below", solution)
        first = ui.errors().first
        first.scroll_into_view_if_needed()
    with ui.step("the check's message"):
        source = first.locator(".cm-content").inner_text()
        assert "check_masked_softmax(masked_softmax" in source, f"first failing cell: {source!r}"
        text = first.locator(STDERR).inner_text()
        lines = text.strip().splitlines()
        assert lines[0].startswith("CheckError: masked_softmax"), text
        assert any("Likely mistake: softmax over the batch dimension" in line for line in lines), text
        assert len(lines) <= 5, f"the failing check shows {len(lines)} lines:\n{text}"
        for noise in ("Traceback", "File ", "grader/", "site-packages"):
            assert noise not in text, f"{noise!r} in the failing check's output:\n{text}"


def _solution_code(assignment):
    """The instructor's answers, as a student would type them (no nbgrader markers)."""
    nb = nbformat.read(next((ROOT / "solutions" / assignment).glob("*.ipynb")), as_version=4)
    answers = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            lines = [line for line in cell.source.splitlines() if "### BEGIN SOLUTION" not in line
                     and "### END SOLUTION" not in line]
            answers[meta["grade_id"]] = "\n".join(lines) + "\n"
    return answers


def test_right_answers_pass_their_checks_and_validate(ui, lab, notebook_03):
    answers = _solution_code("03_masked_softmax")
    assert set(answers) == {"masked_softmax", "causal_weights"}, answers
    checks = sum("check_" in c.source for c in nbformat.read(lab.course / notebook_03, as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("grade"))
    ui.open_notebook(notebook_03)
    for grade_id, code in answers.items():
        with ui.step(f"answer {grade_id}"):
            ui.set_source(ui.code_cell(f"def {grade_id}("), code)
    with ui.step("run them and the cells below"):
        ui.run("Run Selected Cell and All Below", ui.code_cell("def masked_softmax("))
        assert ui.errors().count() == 0, ui.errors().first.locator(STDERR).inner_text()
        passed = ui.notebook.locator(".jp-OutputArea-output", has_text="\u2713")
        assert passed.count() == checks, passed.all_inner_texts()
        passed.last.scroll_into_view_if_needed()
    with ui.step("validate"):
        ui.notebook.locator(".jp-Toolbar").get_by_text("Validate", exact=True).click()
        result = ui.page.locator("#validation-message")
        result.wait_for(timeout=180_000)
        assert "Success! Your notebook passes all the tests." in result.inner_text(), result.inner_text()
        assert "validation-success" in result.get_attribute("class")
    with ui.step("close the dialog"):
        ui.page.locator(".jp-Dialog-button.jp-mod-accept").click()
    assert not (lab.course / "exchange").exists()  # Validate reads nbgrader_config.py; no exchange on this route
    saved = nbformat.read(lab.course / notebook_03, as_version=4)  # Validate saved it first
    assert answers["masked_softmax"].strip() in [c.source.strip() for c in saved.cells]


def test_head_size_widget_follows_its_slider_and_checkbox(ui, lab):
    path = lab.notebook_copy("05_scaled_attention", "student")
    with ui.step("open 05"):
        ui.open_notebook(path)
    with ui.step("run all"):
        ui.run_all()
        widget = _widget(ui, "HeadSizeExplorer(")
        line, chart = _settle(ui, widget, "head_size 16 (unscaled)", None, "initial chart")
    charts = {chart}
    handle = widget.locator(".noUi-handle")
    readout = widget.locator(".widget-readout")
    # This slider's readout cannot be typed into: keys move its handle.
    for keys, size in ((["ArrowRight", "ArrowRight"], 64), (["Home"], 1), (["End"], 1024)):
        with ui.step(f"head_size {size} by keyboard"):
            handle.focus()
            for key in keys:
                ui.page.keyboard.press(key)
            line, chart = _settle(ui, widget, f"head_size {size} (unscaled)", chart, f"head_size {size}")
            assert readout.inner_text() == str(size)
            variance = _number(line, "variance of q·k")
            assert 0.8 * size <= variance <= 1.2 * size, f"unscaled variance should be about {size}: {line!r}"
            charts.add(chart)
    with ui.step("scale by head_size ** -0.5"):
        widget.locator("input[type=checkbox]").check()
        line, chart = _settle(ui, widget, "head_size 1024 (scaled)", chart, "scaled")
        assert 0.8 <= _number(line, "variance of q·k") <= 1.2, line
        charts.add(chart)
    with ui.step("drag the slider"):
        _drag(ui, handle, widget.locator(".noUi-target"), 0.5)
        line, chart = ui.settled(lambda: (_stats(widget), _chart(widget)), "after dragging")
        size = int(_number(line, "head_size"))
        assert 16 <= size <= 64, f"dragged to the middle of 1..1024 (log scale) but the widget says {line!r}"
        assert readout.inner_text() == str(size) and "(scaled)" in line
        assert 0.8 <= _number(line, "variance of q·k") <= 1.2, line
        charts.add(chart)
    assert len(charts) == 6, "every setting should draw a different chart"


def test_text_generator_widget_follows_its_temperature(ui, lab):
    """07's writer on a solved copy: each temperature redraws the chart and samples again
    (how long an update takes is in test-artifacts/browser/steps.tsv)."""
    src = lab.course / "solutions" / "07_transformer_block" / "07_transformer_block.ipynb"
    dest = lab.course / "work" / "07_transformer_block" / "07_transformer_block-solved.ipynb"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(src, as_version=4)
    for cell in nb.cells:  # as a student's copy before its first run: no counts, no outputs
        if cell.cell_type == "code":
            cell.execution_count, cell.outputs = None, []
    nbformat.write(nb, dest)
    with ui.step("open the solved 07"):
        ui.open_notebook(dest.relative_to(lab.course).as_posix())
    with ui.step("run all"):
        ui.run_all()
        widget = _widget(ui, "TextGenerator(")
        line, chart = _settle(ui, widget, "temperature 0.80", None, "initial chart")
    label = widget.locator(".widget-slider .widget-label").first
    assert label.inner_text() == "temperature"
    assert label.evaluate("el => el.scrollWidth <= el.clientWidth"), "the slider's label is cut"
    handle = widget.locator(".noUi-handle")
    texts, largest = {_text(widget)}, {}
    for keys, temperature in ((["ArrowRight"], "0.85"), (["End"], "3.00"), (["Home"], "0.05")):
        with ui.step(f"temperature {temperature} by keyboard"):
            handle.focus()
            for key in keys:
                ui.page.keyboard.press(key)
            line, chart = _settle(ui, widget, f"temperature {temperature}", chart,
                                  f"temperature {temperature}")
            texts.add(_text(widget))
            largest[temperature] = _number(line, "largest share")
    assert all(text.startswith("The tide ") and len(text) > 100 for text in texts), texts
    assert len(texts) >= 3, "new temperatures should sample new text"
    assert largest["0.05"] > largest["0.85"] > largest["3.00"], largest  # sharper when colder


def _text(widget):
    return widget.locator(".widget-html-content pre").inner_text()


# --- what an instructor sees -----------------------------------------------------------

def test_formgrader_releases_and_the_assignment_list_shows_the_course(ui, instructor_lab):
    lab = instructor_lab  # `make formgrader`: every nbgrader panel, on the same course
    teacher = UI(ui.page.context.new_page(), lab)
    teacher.name, teacher.steps = ui.name + "-instructor", 0
    instructor = teacher.page
    try:
        with teacher.step("formgrader"):
            instructor.goto(lab.url("/formgrader"))
            rows = instructor.locator("#main-table tr")
            for name in ASSIGNMENTS:
                rows.filter(has_text=name).wait_for()
            assert rows.count() == len(ASSIGNMENTS)
            for name in ASSIGNMENTS:
                release = rows.filter(has_text=name).locator("td.release a")
                assert release.count() == 1, f"no Release button for {name}"
        assert (lab.course / "exchange").is_dir(), "the exchange should exist once the formgrader ran"
        first = ASSIGNMENTS[0]
        with teacher.step(f"release {first}"):
            rows.filter(has_text=first).locator("td.release a").click()
            modal = instructor.locator(".modal-dialog", has_text="Successfully released")
            modal.wait_for()
            assert first in modal.inner_text()
            modal.locator("button", has_text="OK").click()
        with teacher.step("nbgrader menu"):
            teacher.load("")
            teacher.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Nbgrader$")).click()
            items = teacher.page.locator(".lm-Menu-itemLabel:visible").all_inner_texts()
            assert {"Assignment List", "Formgrader"} <= set(items), items
            teacher.page.keyboard.press("Escape")
        with teacher.step("assignment list"):
            teacher.menu("Nbgrader", "Assignment List")
            released = teacher.page.locator("#released_assignments_list > .list_item", has_text=first)
            released.wait_for()
            assert teacher.page.locator("#course_list_default").inner_text().strip() == "self-attention"
            assert "self-attention" in released.inner_text()
        with teacher.step(f"fetch {first}"):
            released.locator("button", has_text="Fetch").click()
            teacher.page.locator("#fetched_assignments_list > .list_item", has_text=first).wait_for()
    finally:
        instructor.close()
    assert any((lab.course / first).glob("*.ipynb")), "fetching should put the notebook in the course folder"


# --- nothing a student hands in runs in a reader's browser -------------------------------

SAFETY = "05_scaled_attention"
# Each payload, if it ran, would mark the page (window.__pwned), write into the course through
# the contents API, start a terminal or a kernel, or send a request off the page.
_ATTACK_JS = ("window.__pwned=(window.__pwned||[]).concat(['{tag}']);"
              "fetch('/api/contents/pwned-{tag}.txt',{{method:'PUT',headers:{{'Content-Type':'application/json'}},"
              "body:JSON.stringify({{type:'file',format:'text',content:'x'}})}});"
              "fetch('/api/terminals',{{method:'POST'}});fetch('/api/kernels',{{method:'POST'}});"
              "new Image().src='http://evil.example/{tag}.png';")
ACTIVE_MARKDOWN = "\n\n".join([
    "<script>{}</script>".format(_ATTACK_JS.format(tag="md-script")),
    '<img src="x" onerror="{}">'.format(_ATTACK_JS.format(tag="md-onerror").replace('"', "&quot;")),
    "[CLICKME markdown link](javascript:window.__pwned=['md-link'])",
    '<a href="javascript:window.__pwned=[\'md-a\']">CLICKME html link</a>',
    '<svg onload="window.__pwned=[\'md-svg\']"><circle r="5"/></svg>',
    '<iframe srcdoc="<script>parent.__pwned=[\'md-iframe\']</script>"></iframe>',
    "![tracker](http://evil.example/tracker.png)",
    '<div style="background:url(http://evil.example/bg.png)" onmouseover="window.__pwned=[\'md-hover\']">hover me</div>',
])
ACTIVE_OUTPUTS = "\n".join([
    "from IPython.display import HTML, Javascript, SVG, display",
    "display(HTML({!r}))".format("<b>bold</b><script>{}</script>".format(_ATTACK_JS.format(tag="out-html"))),
    "display(Javascript({!r}))".format(_ATTACK_JS.format(tag="out-js")),
    "display(SVG({!r}))".format('<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=[\'out-svg\']"><circle r="4"/></svg>'),
    "display({{'application/vnd.jupyter.widget-view+json': {{'model_id': 'deadbeef', 'version_major': 2, "
    "'version_minor': 0}}, 'text/plain': 'a widget'}}, raw=True)",
    "display({{'text/markdown': {!r}}}, raw=True)".format("[CLICKME output link](javascript:window.__pwned=['out-md'])"),
])


def _hostile_class(course):
    """Two students of notebook 05 whose markdown and outputs try to run script, and an
    honest one; graded and given feedback as `make autograde` and `make feedback` do."""
    from support import synthetic

    students = {"scripted_markdown": None, "scripted_outputs": None, "plain_honest": None}
    for student in students:
        wrong = student == "scripted_outputs"  # a wrong answer: the checks' message and picture
        nb = synthetic.answered(course, SAFETY, SAFETY,
                                edit=(lambda gid, src: src.replace("dim=-1", "dim=-2")) if wrong else None)
        solution = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
        if student == "scripted_markdown":  # and a test cell edited: flagged in the formgrader
            nb.cells.insert(nb.cells.index(solution), nbformat.v4.new_markdown_cell(ACTIVE_MARKDOWN))
            test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                        and not c.metadata["nbgrader"].get("solution"))
            test.source = '"""Check nothing."""\nassert True'
        if student == "scripted_outputs":
            nb.cells.insert(nb.cells.index(solution) + 1, nbformat.v4.new_code_cell(ACTIVE_OUTPUTS))
            nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
                "state": {}, "version_major": 2, "version_minor": 0}}
        folder = course / "submitted" / student / SAFETY
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{SAFETY}.ipynb")
    from grader.instructor import cli as instructor
    from grader.grading.autograde import Grading

    summary = Grading(course, jobs=1).run(progress=False)  # what `make autograde JOBS=1` runs
    assert summary["graded"] == len(students), summary
    instructor.feedback(course)
    return list(students)


def _watch(page, lab):
    """Every request the page makes, and a way to tell whether anything ran."""
    seen = []
    page.on("request", lambda r: seen.append((r.method, r.url)))
    return seen


def _api(lab, path):
    return json.loads(urllib.request.urlopen(lab.url(path), timeout=30).read())


def test_nothing_a_student_hands_in_runs_in_the_formgrader_or_feedback(ui, instructor_lab):
    lab = instructor_lab
    from nbgrader.api import Gradebook

    students = _hostile_class(lab.course)
    files_before = sorted(p.relative_to(lab.course).as_posix() for p in lab.course.rglob("*")
                          if ".ipynb_checkpoints" not in p.parts)
    kernels_before = {k["id"] for k in _api(lab, "/api/kernels")}
    terminals_before = {t["name"] for t in _api(lab, "/api/terminals")}
    with Gradebook(f"sqlite:///{lab.course / 'gradebook.db'}") as gb:
        ids = {s: gb.find_submission_notebook(SAFETY, SAFETY, s).id for s in students}
    origin = lab.base
    instructor = ui.page.context.new_page()
    requests = _watch(instructor, lab)
    try:
        for student in students:
            pages = {"formgrader": f"/formgrader/submissions/{ids[student]}/",
                     "feedback": f"/files/feedback/{student}/{SAFETY}/{SAFETY}.html"}
            for kind, path in pages.items():
                with ui.step(f"{kind} of {student}", page=instructor):
                    instructor.goto(lab.url(path))
                    instructor.wait_for_load_state("load")
                    for link in instructor.locator("a", has_text="CLICKME").all():
                        link.click(no_wait_after=True)
                    for hover in instructor.locator("text=hover me").all():
                        hover.hover()
                    instructor.wait_for_timeout(1500)  # give anything that was scheduled time to run
                    assert instructor.evaluate("window.__pwned === undefined"), \
                        instructor.evaluate("window.__pwned")
                    text = instructor.locator("body").inner_text()
                    images = instructor.locator("img[src^='data:image/png']").count()
                    assert images >= 2, f"the course's plots are missing ({images} images)"
                    if student == "scripted_outputs":  # the checks' message and failure picture
                        assert "Likely mistake" in text and "softmax over the wrong dimension" in text
                        assert "[removed: application/javascript output" in text
                    if student == "scripted_markdown":
                        assert "<script>" in text  # shown as text, so the reader sees what was tried
                    if student == "scripted_markdown" and kind == "formgrader":
                        # nbgrader shows the auto comment as the comment box's placeholder
                        instructor.wait_for_function(
                            "() => [...document.querySelectorAll('textarea')].some(t => "
                            "(t.placeholder || '').includes('Flagged for review') && t.placeholder.includes('was edited'))")
    finally:
        instructor.close()
    offsite = [(m, u) for m, u in requests if not u.startswith(origin)
               and not u.startswith(("data:", "https://cdnjs.cloudflare.com/ajax/libs/"))]
    writes = [(m, u) for m, u in requests if m != "GET"]
    assert offsite == [] and writes == [], (offsite, writes)
    assert {k["id"] for k in _api(lab, "/api/kernels")} <= kernels_before
    assert {t["name"] for t in _api(lab, "/api/terminals")} == terminals_before
    files_after = sorted(p.relative_to(lab.course).as_posix() for p in lab.course.rglob("*")
                         if ".ipynb_checkpoints" not in p.parts)
    assert [f for f in files_after if "pwned" in f] == [] and files_after == files_before
