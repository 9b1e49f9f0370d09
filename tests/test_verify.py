"""Grades that cannot be faked: the attack battery, through the whole pipeline."""
import subprocess
import sys

import pytest

from conftest import CLASS_ASSIGNMENT as A, db_scores
from grader import pipeline, synthetic, verify
HONEST = {"honest": ("correct", 10.0), "honest_partial": ("missing_scale", 2.0),
          "honest_stub": ("stub", 0.0)}


@pytest.fixture
def graded(graded_class):
    root, _ = graded_class
    return root, pipeline.Status(root)


def _final(entry):
    return sum(v[0] or 0 for nb in entry.get("scores", {}).values() for v in nb.values())


def _flagged(entry):
    return entry["status"] == "needs_attention" or bool(entry.get("incidents")) or bool(entry.get("disagreements"))


grouped = pytest.mark.xdist_group("graded_class")


def test_isolation_is_active_here():
    assert verify.isolation() == "namespaces"


@grouped
@pytest.mark.parametrize("attack", sorted(synthetic.ATTACKS))
def test_attack_scores_zero_and_is_flagged(graded, attack):
    root, status = graded
    entry = status.get(f"attack_{attack}", A)
    assert _final(entry) == 0, entry
    assert _flagged(entry), entry


@grouped
def test_honest_submissions_keep_their_scores_and_are_not_flagged(graded, record_property):
    root, status = graded
    for student, (_, score) in HONEST.items():
        entry = status.get(student, A)
        assert entry["verified"] and _final(entry) == score, entry
        assert not _flagged(entry), entry
    attacks = [status.get(f"attack_{a}", A) for a in synthetic.ATTACKS]
    caught = sum(_final(e) == 0 and _flagged(e) for e in attacks)
    honest = sum(_final(status.get(s, A)) == sc and not _flagged(status.get(s, A))
                 for s, (_, sc) in HONEST.items())
    record_property("figure", f"attacks tried {len(attacks)} / caught {caught} / "
                              f"honest submissions unchanged {honest}/{len(HONEST)}")


@grouped
def test_no_other_students_grade_changes_in_the_gradebook(graded):
    root, _ = graded
    scores = db_scores(root)
    for student, (_, score) in HONEST.items():
        assert scores[student] == score
    assert all(v == 0 for k, v in scores.items() if k.startswith("attack_"))


@grouped
def test_disagreements_name_the_cell_and_say_why(graded):
    _, status = graded
    entry = status.get("attack_rebind_checks", A)
    cells = {d["cell"] for d in entry["disagreements"]}
    assert "test_sdpa_values" in cells
    assert all(d["kernel"] == 1.0 and d["verified"] == 0.0 and d["why"] for d in entry["disagreements"])


@grouped
def test_verification_runs_on_its_own(graded):
    root, _ = graded
    out = subprocess.run([sys.executable, "-m", "grader.verify", "--root", str(root),
                          "--student", "attack_rebind_assert_close", "--assignment", A],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "FAILED" in out.stdout and "rebinds torch.testing.assert_close" in out.stdout


def test_every_correct_solution_passes_verification(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    for assignment in pipeline.assignments(root):
        synthetic.make_submission(root, "ada", assignment, "correct")
        for nb, result in verify.verify_submission(root, "ada", assignment).items():
            failed = {k: c["message"] for k, c in result["cells"].items() if not c["passed"]}
            assert failed == {} and result["incidents"] == [], (assignment, failed, result["incidents"])
