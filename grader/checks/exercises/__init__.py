"""The exercises of the course, one module per notebook: how to call the student's code,
which inputs to draw, which invariants hold, which test cell checks what ("focuses"), what
the diagnosis knows of each (grader.checks.diagnosis.Diagnosis) and its shortcuts. Each
module's EXERCISES holds its notebook's exercises; EXERCISES here holds them all, in the
course's order, each bound to its key and to its catalogued mistakes."""
from grader.checks import registry
from grader.checks.exercise_keys import EXERCISE_KEYS
from grader.checks.exercises import (attention_at_scale, bag_of_words, masked_softmax, multi_head,
                                     scaled_attention, single_head, transformer_block, tril_matmul)
from grader.checks.exercises import todays_models

NOTEBOOKS = (bag_of_words, tril_matmul, masked_softmax, single_head, scaled_attention, multi_head,
             transformer_block, attention_at_scale, todays_models)


def _keyed(defined):
    """The definitions in the order of EXERCISE_KEYS (read from these modules' files by
    grader/checks/exercise_keys.py), each knowing its key and its catalogued mistakes (from
    the answers, grader/answers/mistakes.py); keys that disagree with the files are an error."""
    if tuple(defined) != EXERCISE_KEYS:
        raise LookupError(f"the exercises defined ({', '.join(defined)}) are not the keys read from "
                          f"grader/checks/exercises/ ({', '.join(EXERCISE_KEYS)})")
    for key, exercise in defined.items():
        exercise.key = key
        exercise.mistakes = registry.Catalogue(key)
    return dict(defined)


EXERCISES = _keyed({key: exercise for notebook in NOTEBOOKS for key, exercise in notebook.EXERCISES.items()})
