"""No active content: what NoActiveContent (nbconvert's SanitizeHTML, set up for notebooks)
leaves of a submission, and what the formgrader's and feedback's exporter then writes."""
import copy
import re

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from grader.grading import layout
from grader.grading.sanitize import NoActiveContent

ROOT = layout.ROOT
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
HOSTILE_MARKDOWN = [
    "<script>alert(1)</script>", '<img src="x" onerror="alert(1)">', "[a](javascript:alert(1))",
    '<a href="data:text/html,<script>alert(1)</script>">d</a>', "![t](http://evil.example/t.png)",
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>', '<svg onload="alert(1)"></svg>',
    '<style>@import url(http://evil.example/s.css)</style>', '<meta http-equiv="refresh" content="0;url=http://evil.example">',
    '<base href="http://evil.example/">', '<form action="/api/terminals" method="post"><button>go</button></form>',
    '<div style="background:url(http://evil.example/bg.png)">x</div>', '<details ontoggle="alert(1)" open>x</details>',
]


def sanitized(nb):
    return NoActiveContent().preprocess(copy.deepcopy(nb), {})[0]


def markdown_notebook(*sources, attachments=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources]
    if attachments:
        nb.cells[0]["attachments"] = attachments
    return nb


def output_notebook(*outputs):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=list(outputs))]
    return nb


def display(data, metadata=None):
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata or {})


# markup that runs, frames, restyles or redirects the page, or loads from elsewhere (a link to
# another site is fine: nothing happens until the reader follows it)
ACTIVE = re.compile(r"<script|\son\w+\s*=|javascript:|<iframe|<svg|<style|<meta|<base|<form|"
                    r"src=\"?(https?:)?//|url\(", re.I)


@pytest.mark.parametrize("source", HOSTILE_MARKDOWN)
def test_markdown_keeps_no_active_content_and_no_request(source):
    text = sanitized(markdown_notebook(source)).cells[0].source
    tags = re.findall(r"<[^>]*>", text)  # what a browser would parse as markup
    assert not any(ACTIVE.search(t) for t in tags), text


def test_a_cell_seen_again_is_sanitised_as_the_first_time_and_by_the_settings_of_the_time():
    """A grading worker keeps what it made of each markdown cell (the release's cells come
    back in every submission): the same text gives the same page, hostile text too, and a
    change of the allowed tags is not answered from what was kept."""
    cells = [*HOSTILE_MARKDOWN, "Plain *text* with $x^2$"]
    first = [c.source for c in sanitized(markdown_notebook(*cells)).cells]
    again = [c.source for c in sanitized(markdown_notebook(*cells)).cells]
    assert first == again
    assert not any(ACTIVE.search(t) for text in again for t in re.findall(r"<[^>]*>", text))
    fewer = NoActiveContent(tags=["p"])
    text = fewer.preprocess(markdown_notebook("Plain *text*"), {})[0].cells[0].source
    assert "<em>" in first[-1] and "<em>" not in text and "&lt;em&gt;" in text


def test_image_sizes_and_file_names_in_output_metadata_cannot_reach_the_page():
    nb = output_notebook(display({"image/png": PNG, "text/plain": "plot"},
                                 {"image/png": {"width": "1 onerror=alert(1)", "height": 40},
                                  "filenames": {"image/png": "http://evil.example/f.png"}}))
    assert sanitized(nb).cells[0].outputs[0].metadata == {"image/png": {"height": 40}}


def test_outputs_keep_text_and_images_and_say_what_was_removed():
    nb = output_notebook(
        display({"text/html": "<b>bold</b><script>alert(1)</script>", "text/plain": "<HTML>"}),
        display({"application/javascript": "alert(1)", "text/plain": "<Javascript>"}),
        display({"image/svg+xml": "<svg onload='alert(1)'/>", "image/png": PNG}),
        display({"application/vnd.jupyter.widget-view+json": {"model_id": "x"}}),
        display({"text/markdown": "[x](javascript:alert(1))"}))
    out = sanitized(nb).cells[0].outputs
    assert out[0].data["text/html"].startswith("<b>bold</b>&lt;script&gt;")
    assert out[1].data == {"text/plain": "<Javascript>\n[removed: application/javascript output, which "
                                         "could run code in the reader's browser]"}
    assert out[2].data["image/png"] == PNG and "image/svg+xml" not in out[2].data
    assert list(out[3].data) == ["text/plain"] and "widget-view" in out[3].data["text/plain"]
    assert "javascript:" not in out[4].data["text/html"]


def test_an_image_pasted_into_markdown_stays_and_nothing_else_does():
    """JupyterLab stores a pasted image as a cell attachment: it stays (inlined), an SVG
    attachment goes, and a reference to a missing one is no reason to fail grading."""
    nb = markdown_notebook("![pasted](attachment:image.png) ![svg](attachment:x.svg)",
                           attachments={"image.png": {"image/png": PNG}, "x.svg": {"image/svg+xml": "<svg/>"}})
    cell = sanitized(nb).cells[0]
    assert f'src="data:image/png;base64,{PNG}"' in cell.source
    assert list(cell.attachments) == ["image.png"] and "svg" not in cell.source.split("alt=")[0]


def test_the_course_notebooks_lose_nothing_but_widget_views():
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        after = sanitized(nb)
        for before_cell, after_cell in zip(nb.cells, after.cells):
            for b, a in zip(before_cell.get("outputs", []), after_cell.get("outputs", [])):
                kept = {k for k in b.get("data", {}) if "widget" not in k}
                assert kept <= set(a.get("data", {})), (path.name, kept)
                for key in kept - {"text/plain"}:
                    assert a.data[key] == b.data[key]
        again = sanitized(after)  # feedback and the formgrader sanitise a graded notebook again
        assert [c.source.strip() for c in again.cells] == [c.source.strip() for c in after.cells]


def test_the_course_exporter_writes_no_student_script():
    """nbconvert's HTMLExporter as nbgrader_config.py sets it up for the formgrader."""
    from nbconvert import HTMLExporter

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    nb = markdown_notebook(*HOSTILE_MARKDOWN)
    nb.cells.append(nbformat.v4.new_code_cell("x", outputs=[
        display({"text/html": "<img src=x onerror=alert(2)>"}), display({"application/javascript": "alert(3)"}),
        display({"image/png": PNG}, {"image/png": {"width": "1 onerror=alert(4)"}})]))
    html, _ = HTMLExporter(config=config).from_notebook_node(nb)
    body = html[html.index("<body"):]
    student = [t for t in re.findall(r"<[^>]*>", body) if ACTIVE.search(t)
               and "cdnjs.cloudflare.com" not in t and "text/x-mathjax-config" not in t and 'type="module"' not in t]
    assert student == [] and "alert(3)" not in body


# --- markup dressed as the page's own, and markup that costs more than it is long -------------

FAKE_ALERT = ('<div class="alert alert-success" style="font-size:2em">Score: 20 / 20 \u2014 Flagged: none</div>'
              '<p style="color:green" class="text-success">graded</p>')


def test_a_students_html_keeps_no_class_and_no_style():
    """The page's own styles (Bootstrap's alert-success in the formgrader) cannot dress a
    student's output or Markdown as the grader's verdict."""
    nb = output_notebook(display({"text/html": FAKE_ALERT, "text/plain": "<IPython.core.display.HTML object>"}))
    nb.cells.append(nbformat.v4.new_markdown_cell(FAKE_ALERT))
    out = sanitized(nb)
    for text in (out.cells[0].outputs[0].data["text/html"], out.cells[1].source):
        assert "Score: 20 / 20" in text and "<div>" in text
        assert not re.search(r"\b(class|style)\s*=", text), text


def _tags(text):
    return set(re.findall(r"<\s*([a-zA-Z][a-zA-Z0-9]*)", text))


COSTLY = {  # each parsed whole, html5lib's cost grows with the square of what is left open
    "nested_div": "<div>" * 20_000 + "x" + "</div>" * 20_000,
    "open_formatting": "".join(f"<b title={i}>" for i in range(5000)),
    "unclosed_paragraph_formatting": "<p><b title=1></p>" * 3000,
}


@pytest.mark.parametrize("name", sorted(COSTLY))
def test_markup_with_more_tags_than_the_bound_is_shown_as_escaped_text(name):
    """The sanitiser's cost stays linear in its input: markup with more start tags than
    MAX_TAGS is never parsed; it is escaped, so it shows as text and nothing in it runs."""
    from grader.grading.sanitize import MAX_TAGS

    markup = COSTLY[name]
    assert markup.count("<") > MAX_TAGS
    nb = markdown_notebook(markup, "A *short* cell after it.")
    nb.cells.append(output_notebook(display({"text/html": markup, "text/plain": "plain form"})).cells[0])
    out = sanitized(nb)
    assert _tags(out.cells[0].source) == {"pre", "p", "em"} and "shown as text" in out.cells[0].source
    assert "&lt;" in out.cells[0].source
    assert out.cells[1].source.strip() == "<p>A <em>short</em> cell after it.</p>"  # the rest rendered
    data = out.cells[2].outputs[0].data
    assert "text/html" not in data and data["text/plain"].startswith("plain form\n[removed: text/html")


def test_markdown_longer_than_the_bound_is_shown_as_text():
    from grader.grading.sanitize import MAX_MARKDOWN

    text = "*a " * (MAX_MARKDOWN // 3 + 10) + "<script>alert(1)</script>"
    out = sanitized(markdown_notebook(text)).cells[0].source
    assert out.startswith("<pre>*a *a ") and "&lt;script&gt;" in out and _tags(out) == {"pre", "p", "em"}


def test_once_a_notebook_has_cost_its_time_the_rest_is_shown_as_text(monkeypatch):
    from grader.grading import sanitize

    monkeypatch.setattr(sanitize, "SANITIZE_SECONDS", -1.0)  # spent before it starts
    nb = markdown_notebook("# Title <b>x</b>")
    nb.cells.append(output_notebook(display({"text/html": "<b>x</b>", "text/plain": "x"})).cells[0])
    out = sanitized(nb)
    assert out.cells[0].source.startswith("<pre># Title &lt;b&gt;x&lt;/b&gt;</pre>")
    assert out.cells[1].outputs[0].data == {"text/plain": "x\n[removed: text/html output, too much markup "
                                                          "to show; its text stays]"}
