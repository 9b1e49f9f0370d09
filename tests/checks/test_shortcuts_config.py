"""The shortcut lists a notebook's checks use, read without importing nbgrader when the
course's config leaves them alone."""

from traitlets.config.loader import PyFileConfigLoader

from grader.checks import shortcuts
from support.paths import ROOT


def test_course_config_gives_the_lists_a_full_load_gives():
    loaded = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert shortcuts.forbidden() == shortcuts.Shortcuts(config=loaded).forbidden


def test_config_that_sets_shortcuts_is_run(tmp_path):
    path = tmp_path / "nbgrader_config.py"
    for code in ['c = get_config()\nc.Shortcuts.forbidden = {"head": []}\n',
                 'c = get_config()\nc["Shortcuts"]["forbidden"] = {}\n',
                 'load_subconfig("other_config.py")\n']:
        path.write_text(code)
        assert shortcuts._may_set_shortcuts(path), code


def test_config_without_shortcuts_is_not_run(tmp_path):
    path = tmp_path / "nbgrader_config.py"
    path.write_text('c = get_config()\n# c.Shortcuts.forbidden = {"head": []}\nc.Execute.timeout = 5\n')
    assert not shortcuts._may_set_shortcuts(path)
    assert not shortcuts._may_set_shortcuts(tmp_path / "missing.py")
    path.write_text('c = get_config(\n')  # unreadable: the loader decides
    assert shortcuts._may_set_shortcuts(path)
