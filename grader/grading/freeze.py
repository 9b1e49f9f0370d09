"""Imported last by the embedded workers' forkserver (grader.grading.autograde.WORKER_PRELOAD),
never elsewhere: it moves every object the forkserver holds (what the preload imported) out of
the garbage collector's sight (gc.freeze), so that a worker forked from it never walks them in
its collections, nor copies the pages they lie on by touching them (Python's advice for a
process that forks without exec)."""
import gc

gc.collect()
gc.freeze()
