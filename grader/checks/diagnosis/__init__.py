"""What went wrong, inferred from data.

The catalogue in ``grader.answers.mistakes`` recognises single known wrong answers. The analyses
here name whole families of mistakes, and work from data only: the inputs a check chose,
the student's output on them (or the error it raised), the expected output, and plain
facts about the student's code (``grader.checks.student_call.code_facts``: the global names it
reads, the attributes it uses, what an instance of a module holds). They never need the
student's Python object, so they can run in a process that never runs student code.

Families:
- input mutation: an input tensor changed in place by the call;
- trivial answers: an input returned unchanged or merely projected, zeros, uniform or
  identity weights (they earn nothing);
- flags and arguments: causal=False ignored, always causal, a given mask ignored;
- scale: the output is attention with another scale factor, said in terms of the sizes;
- layout: the right numbers after a permutation or a wrong reshape (heads merged without
  transposing back, time and heads mixed, operands of a matmul swapped, weights
  transposed);
- sizes from notebook globals, and the sizes named in an error (or in a wrong shape);
- broadcasting: a normaliser without keepdim, a (T,) where (T, 1) was meant, a factor
  that changes along one dim, slices never written, NaN/inf confined to one position;
- modules: one submodule shared by every head, a mask kept as a plain attribute,
  layers in a plain list or built in forward, parameters of other sizes.

Catalogued mistakes are said more precisely when the code shows how they came about
(``refine``); a function that does the whole exercise is a shortcut (``shortcut``).

The attention these variants compute is turned by knobs in grader/answers/knobs.py, which
the checks receive through the registry, never import.

Modules, by job (each imports only those listed before it): ``findings`` what a diagnosis
says and what it knows of an exercise (its ``Diagnosis`` hooks); ``shapes`` sizes, numbers
and shapes by name; ``facts`` findings from facts about the student's code; ``baselines``
trivial answers; ``variants`` the families of attention with a knob turned; ``values``
findings from the values; ``errors`` findings from an error's message; ``analysis``
putting them together (``analyse``); ``pictures`` the smallest failing case.
"""
from grader.checks.diagnosis.findings import PLAIN, Diagnosis, Finding, Scale, reads  # noqa: F401
from grader.checks.diagnosis.shapes import (  # noqa: F401
    at_indices, name_number, name_shape, sizes, size_numbers)
from grader.checks.diagnosis.facts import (  # noqa: F401
    device_message, globals_finding, globals_note, mask_buffer_note, module_finding,
    mutation_message, parameter_finding, passing_note, refine, shortcut)
from grader.checks.diagnosis.baselines import (  # noqa: F401
    bag_baselines, head_baselines, mha_baselines, mistaken_message, no_attention_message,
    running_weights_baselines, sdpa_baselines, trivial, trivial_message, weights_baselines)
from grader.checks.diagnosis.variants import (  # noqa: F401
    HEAD_SIZE_SCALE, NO_SCALE, bag_variants, causal_flag_variants, fill_variants, forward,
    given_mask_variants, heads_layout_variants, mask_offset_variants, operand_variants,
    optional_mask_variants, running_weights_variants, scale_variants)
from grader.checks.diagnosis.values import (  # noqa: F401
    averaging_nonfinite_hint, context_length_finding, layout_finding, nonfinite_finding,
    online_softmax_finding, overflow_finding, ratio_finding, shape_finding, slice_finding,
    softmax_sum_finding, unfilled_finding, unwritten_finding)
from grader.checks.diagnosis.errors import ERROR_RULES, error_finding  # noqa: F401
from grader.checks.diagnosis.analysis import analyse  # noqa: F401
from grader.checks.diagnosis.pictures import (  # noqa: F401
    NoPicture, crop, picture, picture_kind, slice_2d, time_steps)
