"""The test process's warm kernel template, lent to the commands a test starts."""


def template_env():
    """{grader.isolation.template.ENV: its socket} for this process's warm template (started
    here if it is not yet), or {} where none can be made: in a command's environment, its
    kernels fork from this template instead of the command starting one of its own (about
    6 CPU seconds), as a grading process's Dask workers do."""
    from grader.isolation import template

    tmpl, _ = template.shared()
    return {template.ENV: str(tmpl.socket)} if tmpl is not None else {}
