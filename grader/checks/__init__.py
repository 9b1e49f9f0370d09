"""What students' kernels run and the student bundle ships.

The check, by job, each module importing only those listed before it: devices (where and in
what precision), compare (close, largest difference), feedback (CheckError, CheckResult),
exercise (Exercise, Focus, Invariant), inputs (fixed and drawn), calling (the student's code,
here or in a kernel elsewhere), output (type, shape, dtype, device, NaN), naming (the likely
mistake: the catalogue, then the diagnosis), case (CheckCase, and the Context an invariant
sees), stages (output, attends, invariants, values), smallest (the picture's smallest failing
case), explain (a failure as the learner's message), recall (each mistake named once), core
(run_check, evaluate).

Beside them: each exercise's inputs, invariants and focuses (exercises), the diagnosis of a
wrong answer (diagnosis), calling and watching the student's code in its kernel
(student_call), the rules against shortcuts (shortcuts) and the lookups that stand in for
the answers in the bundle (stored)."""
