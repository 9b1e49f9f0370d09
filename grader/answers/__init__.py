"""The answers, which students never get: the float64 reference implementations
(reference), the catalogue of known mistakes, which are near answers (mistakes), and the
writer of the visible checks' stored inputs and outputs (fixtures)."""
