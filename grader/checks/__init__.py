"""What students' kernels run and the student bundle ships: the check engine (core),
each exercise's inputs, invariants and focuses (exercises), the diagnosis of a wrong
answer (diagnosis), calling and watching the student's code (student_call), the rules
against shortcuts (shortcuts) and the lookups that stand in for the answers in the
bundle (stored)."""
