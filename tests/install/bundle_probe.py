"""Run inside a built student bundle (python bundle_probe.py BUNDLE REPO): every visible check
on a correct answer and on every catalogued mistake, with the bundle's own grader; prints
one JSON line of what happened. The answers and the mistakes' code come from the course
repository and are loaded before the bundle's grader replaces it."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support
from support.twins import TWINS  # noqa: E402  mistakes named by another focus than values

bundle, repo = sys.argv[1], sys.argv[2]
sys.path[:0] = [repo]
from grader.answers import correct as answers  # noqa: E402  correct answers, and student_from() for the mistakes
from grader.checks.exercises import EXERCISES as COURSE  # noqa: E402

GPU_ONLY = {"mask_wrong_device"}
students = {key: (answers.CORRECT[key],
                  [(m.key, m.name, answers.student_from(key, m.fn)) for m in ex.mistakes
                   if m.key not in GPU_ONLY])
            for key, ex in COURSE.items()}
for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
    del sys.modules[name]
sys.path[:] = [bundle] + [p for p in sys.path if p not in (repo, "")]

import io, contextlib  # noqa: E401,E402
import grader  # noqa: E402
from grader.checks.exercises import EXERCISES  # noqa: E402

report = {"grader": grader.__file__, "correct": {}, "named": {}, "errors": []}
for key, (correct, mistakes) in students.items():
    check = getattr(grader, f"check_{key}")
    for focus in EXERCISES[key].focuses:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(correct, focus)
            report["correct"][f"{key}/{focus}"] = True
        except Exception as err:
            report["correct"][f"{key}/{focus}"] = f"{type(err).__name__}: {err}"
    for mkey, name, student in mistakes:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(student, TWINS.get((key, mkey), (None, "values"))[1])
            report["named"][f"{key}/{mkey}"] = "passed"
        except grader.CheckError as err:
            report["named"][f"{key}/{mkey}"] = f"Likely mistake: {name} \u2014" in str(err) or str(err)
        except Exception as err:
            report["named"][f"{key}/{mkey}"] = f"{type(err).__name__}: {err}"
try:
    import torch  # an answer that attends, wrongly: no scale, and 1 added
    grader.check_scaled_dot_product_attention(
        lambda q, k, v, mask=None: torch.softmax((q @ k.mT).masked_fill(mask, float("-inf")), -1) @ v + 1,
        "values")
except grader.CheckError as err:
    report["unknown_wrong_answer"] = str(err)
try:
    grader.check_scaled_dot_product_attention(students["scaled_dot_product_attention"][0], "values", hidden=True)
except Exception as err:
    report["hidden"] = f"{type(err).__name__}: {err}"
from grader.checks import registry  # noqa: E402
report["answers_from"] = sorted({fn.__module__ for fn in registry.answers().reference.values()})
print(json.dumps(report))
