"""The answers, which students never get: the float64 reference implementations
(reference), the catalogue of known mistakes, which are near answers (mistakes), and the
writer of the visible checks' stored inputs and outputs (fixtures)."""


def course_answers():
    """The answers as the checks receive them (grader/checks/registry.py)."""
    import inspect

    from grader.answers import knobs, mistakes, reference
    from grader.checks.registry import Answers

    functions = {name: fn for name, fn in vars(reference).items()
                 if inspect.isfunction(fn) and fn.__module__ == reference.__name__}
    return Answers(reference=functions, mistakes=mistakes.BY_EXERCISE, knobs={"forward": knobs.forward, "generate": knobs.generate_with_knobs})
