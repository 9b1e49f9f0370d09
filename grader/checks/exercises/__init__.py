"""The exercises of the course, one module per notebook: how to call the student's code,
which inputs to draw, which invariants hold, which test cell checks what ("focuses"), what
the diagnosis knows of each (grader.checks.diagnosis.Diagnosis) and its shortcuts. Each
module's EXERCISES holds its notebook's exercises; EXERCISES here holds them all, in the
course's order, each bound to its key and to its catalogued mistakes."""
from grader.checks import registry
from grader.checks.exercise_keys import EXERCISE_KEYS
from grader.checks.exercises import (attention_at_scale, bag_of_words, masked_softmax, multi_head,
                                     scaled_attention, single_head, transformer_block, tril_matmul)

NOTEBOOKS = (bag_of_words, tril_matmul, masked_softmax, single_head, scaled_attention, multi_head,
             transformer_block, attention_at_scale)



def _keyed(defined):
    """The definitions in the order of EXERCISE_KEYS, each knowing its key and its catalogued
    mistakes (from the answers, grader/answers/mistakes.py); a key without a definition, or a
    definition whose key grader/checks/exercise_keys.py does not list, is an error."""
    missing, unlisted = set(EXERCISE_KEYS) - set(defined), set(defined) - set(EXERCISE_KEYS)
    problems = [f"no Exercise defined for {', '.join(sorted(missing))}"] if missing else []
    problems += [f"defined but not listed: {', '.join(sorted(unlisted))}"] if unlisted else []
    if problems:
        raise LookupError("grader/checks/exercise_keys.py lists the exercises: " + "; ".join(problems))
    for key, exercise in defined.items():
        exercise.key = key
        exercise.mistakes = registry.Catalogue(key)
    return {key: defined[key] for key in EXERCISE_KEYS}


EXERCISES = _keyed({key: exercise for notebook in NOTEBOOKS for key, exercise in notebook.EXERCISES.items()})
