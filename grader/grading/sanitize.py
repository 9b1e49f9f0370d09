"""Sanitizing preprocessors, configured in nbgrader_config.py.

NoActiveContent: nothing a student hands in runs in the browser of whoever reads it
(autograde, feedback and the formgrader's exporter all run it; see its docstring).

DropDuplicateIds: a student who copies a solution or test cell hands in two cells with
one grade_id. nbgrader's DeduplicateIds keeps the last and empties the other's nbgrader
metadata, which OverwriteCells then trips over (KeyError: 'grade_id'), failing the whole
notebook. Here the copy loses its nbgrader metadata entirely: it becomes an ordinary
cell of the student's, run like any other, and the first cell with that grade_id is the
one graded.
"""
import html
import re
import time

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Any, Bool, List, Set, Unicode
from nbgrader.preprocessors import DeduplicateIds


class DropDuplicateIds(DeduplicateIds):
    def preprocess(self, nb, resources):
        self.grade_ids = set()
        for index, cell in enumerate(nb.cells):
            nb.cells[index], resources = self.preprocess_cell(cell, resources, index)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader")
        if not meta or not (meta.get("grade") or meta.get("solution") or meta.get("locked")):
            return cell, resources
        grade_id = meta.get("grade_id")
        if grade_id in self.grade_ids:
            self.log.warning("Cell with id '%s' exists more than once; the copy is graded as "
                             "an ordinary cell", grade_id)
            del cell.metadata["nbgrader"]
        else:
            self.grade_ids.add(grade_id)
        return cell, resources


# --- no active content from a submission reaches a browser ------------------------------

# What a notebook may show once sanitised: the tags Markdown renders to (and the course's
# <details> answers), never a script, a frame, a form, an embed, a style or an event handler.
SAFE_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt",
    "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre",
    "s", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr",
    "ul",
})
_IMAGE_DATA = ("data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,")
# What the sanitiser reads as markup, so that its cost stays linear in what it is given:
# html5lib (bleach's parser) costs about the square of the elements left open at once
# (4,000 nested <div> took 1.2 s, 20,000 did not finish in minutes), so an HTML text with more
# start tags than MAX_TAGS (``<`` and a letter: no tag can start otherwise) is not parsed
# as HTML; nor is Markdown longer than MAX_MARKDOWN (mistune's cost grows faster than its
# input on some texts); and once a notebook has cost SANITIZE_SECONDS of CPU, the rest of it
# is shown as text. Text is escaped, never parsed: nothing in it can run, whatever it holds.
MAX_TAGS = 1000
MAX_MARKDOWN = 64 * 1024
SANITIZE_SECONDS = 5.0
_START_TAG = re.compile(r"<[A-Za-z]")


def _allowed_attribute(tag, name, value):
    """bleach's attribute filter: links may point anywhere safe (bleach checks the protocol);
    images may only be inline data or the cell's attachments, so showing a submission
    never sends a request off the page. No class and no style: the page's own styles would
    dress a student's text as the page's (a green "alert-success" box reading "Score: 20 / 20")."""
    if name == "title":
        return True
    if tag == "a":  # bleach keeps http, https, mailto and data: no data here
        return name == "href" and not value.strip().lower().startswith("data:")
    if tag == "img":
        if name == "alt":
            return True
        if name == "src":
            src = value.strip().lower()
            return src.startswith(_IMAGE_DATA) or src.startswith("attachment:")
        return False
    if tag in ("td", "th"):
        return name in ("align", "colspan", "rowspan")
    if tag == "details":
        return name == "open"
    return False


class NoActiveContent(SanitizeHTML):
    """nbconvert's SanitizeHTML (bleach), set up so that nothing in a notebook can run in the
    browser of whoever reads it: the autograded notebook, the feedback page and the
    formgrader's view of a submission.

    - Markdown and raw cells are rendered to HTML with nbconvert's own Markdown filter and
      then cleaned, so Markdown's own links and images (`javascript:` links, images from
      other sites) are judged like raw HTML.
    - Outputs keep text, LaTeX, JSON and PNG/JPEG images as they are; HTML and Markdown
      outputs are cleaned; every other type (JavaScript, SVG, widget views, any other
      renderer's data) is removed, and the output's plain-text form (if any) is kept with a
      note of what was removed.
    - The notebook's widget state (which makes a page load the widget manager's code),
      cell attachments other than PNG/JPEG images, and every output metadata but numeric
      image sizes (the templates write them into the page) are removed.
    """

    enabled = Bool(True, help="on wherever it is listed (nbgrader registers preprocessors "
                              "without enabling nbconvert's)").tag(config=True)
    tags = List(Unicode(), default_value=sorted(SAFE_TAGS),
                help="HTML tags a sanitised notebook may keep").tag(config=True)
    attributes = Any(default_value=_allowed_attribute,
                     help="bleach's attribute filter (see _allowed_attribute)").tag(config=True)
    strip = Bool(False, help="False: a removed tag shows as text, so the reader sees what was "
                             "tried").tag(config=True)
    safe_output_keys = Set(default_value={"metadata", "text/plain", "text/latex", "application/json",
                                          "image/png", "image/jpeg"}).tag(config=True)
    sanitized_output_types = Set(default_value={"text/html"}).tag(config=True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        self._deadline = time.thread_time() + SANITIZE_SECONDS
        return super().preprocess(nb, resources)

    def _spent(self):
        """Whether this notebook has used up the sanitiser's CPU time (from here on: text)."""
        return time.thread_time() > getattr(self, "_deadline", float("inf"))

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw"):
            attachments = cell.get("attachments") or {}
            for name in list(attachments):
                kept = {k: v for k, v in attachments[name].items() if k in ("image/png", "image/jpeg")}
                if kept:
                    attachments[name] = kept
                else:
                    del attachments[name]
            source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
            if self._spent() or (cell.cell_type == "markdown" and len(source) > MAX_MARKDOWN):
                cell.source = as_text(source, "shown as text: too long or too costly to render")
            else:
                cell.source = self._markdown(source, attachments) if cell.cell_type == "markdown" \
                    else self.sanitize_html_tags(source, fallback="text")
            return cell, resources
        if cell.cell_type == "code":
            cell.outputs = self.sanitize_code_outputs(cell.get("outputs", []))
        return cell, resources

    def sanitize_html_tags(self, html_str, fallback="text"):
        """bleach with the course's tags and attribute filter; data: addresses are allowed
        through bleach's protocol check for inline images only (_allowed_attribute). HTML
        with more than MAX_TAGS start tags, or met once the notebook's time is spent, is not
        parsed: it is shown as escaped text (fallback "text"), or TooCostly is raised
        (fallback "raise", for an output, which then keeps its plain-text form)."""
        from bleach import clean
        from bleach.css_sanitizer import CSSSanitizer

        if self._spent() or len(_START_TAG.findall(html_str, 0, len(html_str))) > MAX_TAGS:
            if fallback == "raise":
                raise TooCostly()
            return as_text(html_str, "shown as text: too much markup to render")
        return clean(html_str, tags=self.tags, attributes=self.attributes, strip=self.strip,
                     strip_comments=self.strip_comments, protocols={"http", "https", "mailto", "data"},
                     css_sanitizer=CSSSanitizer(allowed_css_properties=[]))

    def _markdown(self, text, attachments=None):
        if not text.strip():
            return text
        if not attachments:  # most cells: the release's own text, the same in every submission
            return _cached_markdown(self, text if isinstance(text, str) else "".join(text))
        return self._render_markdown(text, attachments)

    def _render_markdown(self, text, attachments=None):
        from nbconvert.filters.markdown_mistune import InvalidNotebook

        attachments = attachments or {}
        # a reference to an attachment that is not there (removed above) is no image
        text = re.sub(r"attachment:([^\s)\"'>]+)",
                      lambda m: m.group(0) if m.group(1) in attachments else f"removed:{m.group(1)}", text)
        if len(_START_TAG.findall(text)) > MAX_TAGS:  # (not parsed as Markdown either)
            return as_text(text, "shown as text: too much markup to render")
        try:
            rendered = markdown2html_text(text, attachments)
        except InvalidNotebook:
            rendered = markdown2html_text(text.replace("attachment:", "removed:"))
        if len(_START_TAG.findall(rendered)) > MAX_TAGS:
            return as_text(text, "shown as text: too much markup to render")
        return self.sanitize_html_tags(rendered)

    def sanitize_code_outputs(self, outputs):
        for output in outputs:
            data = output.get("data")
            if output.get("output_type") not in ("display_data", "execute_result") or not data:
                continue
            # the templates write an image's width and height into its tag, and take its
            # address from metadata.filenames: only plain numbers survive
            output["metadata"] = _safe_metadata(output.get("metadata") or {})
            if "text/markdown" in data:
                markdown = data.pop("text/markdown")
                markdown = markdown if isinstance(markdown, str) else "".join(markdown)
                if len(markdown) <= MAX_MARKDOWN and not self._spent():
                    data.setdefault("text/html", markdown2html_text(markdown))
            removed, costly = [], []
            for key in list(data):
                if key in self.safe_output_keys:
                    continue
                if key in self.sanitized_output_types:
                    value = data[key] if isinstance(data[key], str) else "".join(data[key])
                    try:
                        data[key] = self.sanitize_html_tags(value, fallback="raise")
                        continue
                    except TooCostly:
                        costly.append(key)
                else:
                    removed.append(key)
                del data[key]
            notes = ([f"[removed: {', '.join(sorted(removed))} output, which could run code in the reader's browser]"]
                     if removed else []) + \
                    ([f"[removed: {', '.join(costly)} output, too much markup to show; its text stays]"] if costly else [])
            if notes:  # the plain-text form stays, with a note of what was removed
                plain = data.get("text/plain", "")
                plain = plain if isinstance(plain, str) else "".join(plain)
                data["text/plain"] = "\n".join([plain, *notes] if plain else notes)
        return outputs


class TooCostly(Exception):
    """HTML the sanitiser does not parse (see MAX_TAGS, SANITIZE_SECONDS)."""


def as_text(text, why):
    """Text shown as it is, escaped (nothing in it is markup), with a note saying why."""
    return f"<pre>{html.escape(text)}</pre>\n<p><em>[{why}]</em></p>\n"


_MARKDOWN = {}  # (settings, text) -> the sanitised cell: a grading worker sees the same cells again


def _cached_markdown(sanitizer, text):
    """sanitizer._render_markdown(text) for a cell without attachments, kept per settings."""
    key = (tuple(sanitizer.tags), sanitizer.attributes, sanitizer.strip, sanitizer.strip_comments, text)
    if key not in _MARKDOWN:
        if len(_MARKDOWN) >= 2048:
            _MARKDOWN.clear()
        _MARKDOWN[key] = sanitizer._render_markdown(text)
    return _MARKDOWN[key]


def markdown2html_text(text, attachments=None):
    """nbconvert's Markdown to HTML (math kept for MathJax; images pasted into the cell
    inlined from its attachments), without heading anchors: the result is shown again as a
    Markdown cell, where an anchor's mark would be visible."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    text = text if isinstance(text, str) else "".join(text)
    renderer = IPythonRenderer(escape=False, exclude_anchor_links=True, attachments=attachments or {})
    return MarkdownWithMath(renderer=renderer).render(text)


def _safe_metadata(metadata):
    """An output's metadata with only what is safe to write into a page: for each image
    type, a numeric width and height."""
    safe = {}
    for mime, value in metadata.items():
        if mime in ("image/png", "image/jpeg") and isinstance(value, dict):
            kept = {k: v for k, v in value.items() if k in ("width", "height")
                    and isinstance(v, (int, float)) and not isinstance(v, bool)}
            if kept:
                safe[mime] = kept
    return safe
