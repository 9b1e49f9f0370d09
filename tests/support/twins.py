"""Catalogued mistakes that give another mistake's output on the values check's inputs, and
the focus where they differ: {(exercise key, mistake key): (its twin, the focus that names it)}.
In a notebook that focus runs first, and the values check then says it is the same mistake
(grader.checks.recall). New keys put in front of a full cache are dropped by the crop, as when
the oldest entries are kept."""
TWINS = {("cached_attention", "new_before_cache"): ("kept_oldest", "short")}
