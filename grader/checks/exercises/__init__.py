"""The exercises of the course, one module per notebook: how to call the student's code,
which inputs to draw, which invariants hold, which test cell checks what ("focuses"), what
the diagnosis knows of each (grader.checks.diagnosis.Diagnosis) and its shortcuts. Each
module's EXERCISES holds its notebook's exercises; EXERCISES here holds them all, in the
course's order, each bound to its key and to its catalogued mistakes."""
from grader.checks import registry
from grader.checks.exercises import (attention_at_scale, bag_of_words, masked_softmax, multi_head,
                                     scaled_attention, single_head, transformer_block, tril_matmul)

NOTEBOOKS = (bag_of_words, tril_matmul, masked_softmax, single_head, scaled_attention, multi_head,
             transformer_block, attention_at_scale)

EXERCISES = {key: exercise for notebook in NOTEBOOKS for key, exercise in notebook.EXERCISES.items()}

for _key, _exercise in EXERCISES.items():
    _exercise.key = _key
    _exercise.mistakes = registry.Catalogue(_key)  # from the answers (grader/answers/mistakes.py)
del _key, _exercise
