{#- The course's formgrader pages: nbgrader's, with a note on the late penalty above each
    page's content and its tables in pages (grader/instructor/formgrader.py). -#}
{%- extends "nbgrader/base.tpl" -%}

{%- block body -%}
<div class="alert alert-info course-late-note" role="note">{{ late_note }}</div>
{{ super() }}
{%- endblock -%}

{%- block script -%}
<script src="{{ base_url }}/formgrader/course-static/formgrader.js"></script>
{%- endblock -%}
