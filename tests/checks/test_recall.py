"""Each mistake named once (grader.checks.recall): the first failing check of an exercise gives
the diagnosis, later checks of the same exercise say in one line that it is the same mistake;
in-process with a notebook's Recall, with the student's code elsewhere (as graded runs call it),
and in a real kernel through grader.check_* (as JupyterLab runs it). A graded run's feedback is
checked in tests/grading/test_feedback_channel.py."""
import textwrap

import pytest
import torch

from grader.checks.calling import RemoteStudent
from grader.checks.core import CheckError, evaluate, run_check
from grader.checks.exercises import EXERCISES
from grader.checks.recall import Recall

BAG = EXERCISES["bag_of_words_loop"]


def running_sum(x):
    out = torch.zeros_like(x)
    for t in range(x.shape[1]):
        out[:, t] = x[:, :t + 1].sum(1)  # the sum, never divided by the count
    return out


def messages(student, focuses, recall, **kw):
    out = []
    for focus in focuses:
        with pytest.raises(CheckError) as info:
            run_check(BAG, student, focus, quiet=True, recall=recall, **kw)
        out.append((info.value.finding, str(info.value).splitlines()))
    return out


def test_the_first_failing_check_names_the_mistake_and_the_later_ones_point_to_it():
    recall = Recall()
    (k1, first), (k2, later), (k3, hidden) = messages(running_sum, ["last_token", "values"], recall) + \
        messages(running_sum, ["values"], recall, hidden=True, seed=3)
    assert k1 == k2 == k3 == "running_sum"  # the key travels on: grading records it for each check
    assert any("Likely mistake: running sum instead of running mean" in line for line in first)
    for lines in (later, hidden):
        assert len(lines) == 2, lines  # the label, and one line
        assert lines[1].strip() == ('the same mistake as in the check "the last token averages the whole '
                                    'sequence" above: running sum instead of running mean.')


def test_running_the_same_check_again_shows_the_whole_diagnosis_again():
    recall = Recall()
    once, again = messages(running_sum, ["last_token", "last_token"], recall)
    assert once == again and len(once[1]) >= 3


def test_new_code_and_another_mistake_get_their_own_diagnosis():
    recall = Recall()
    messages(running_sum, ["last_token"], recall)

    def running_sum_again(x):  # the cell run again: a new function, the same mistake
        return torch.stack([x[:, :t + 1].sum(1) for t in range(x.shape[1])], dim=1)
    (_, lines), = messages(running_sum_again, ["values"], recall)
    assert any("Likely mistake: running sum" in line for line in lines)

    def future(x):  # another mistake in the same exercise
        return torch.stack([x[:, t:].mean(1) for t in range(x.shape[1])], dim=1)
    (_, lines), = messages(future, ["values"], recall)
    assert any("Likely mistake: tokens average the future" in line for line in lines)


def test_a_failure_that_names_nothing_is_pointed_to_by_its_words():
    recall = Recall()
    wrong_shape = lambda x: x[:, :, :1]
    (_, first), (_, later) = messages(wrong_shape, ["first_token", "values"], recall)
    assert "returned shape" in first[1]
    assert later[1].strip().startswith('the same problem as in the check "the first token is its own average" '
                                       "above: returned shape")


def test_graded_checks_call_the_code_elsewhere_and_remember_it_by_name():
    """As grader/grading/execute.py grades a notebook: a new RemoteStudent for each check, one
    Recall for the notebook; the outcome keeps the mistake's key, the message says it once."""
    def remote():
        from grader.checks import student_call

        def call(spec):
            out, student.changed = student_call.execute_watched(running_sum, spec)
            return out
        student = RemoteStudent("bag_of_words_loop", call, lambda spec: student_call.code_facts(running_sum, spec))
        return student
    recall = Recall()
    outcomes = [evaluate(BAG, remote(), focus, graded=True, recall=recall) for focus in ("last_token", "values")]
    assert [o.mistake for o in outcomes] == ["running_sum", "running_sum"]
    assert "Likely mistake: running sum" in outcomes[0].message
    assert outcomes[1].message.splitlines()[1].strip().startswith("the same mistake as in the check")
    alone = evaluate(BAG, remote(), "values", graded=True)  # no memory: the whole message
    assert "Likely mistake: running sum" in alone.message


def test_without_a_notebook_every_check_gives_its_whole_message():
    import grader

    for _ in range(2):
        with pytest.raises(CheckError, match="Likely mistake: running sum"):
            grader.check_bag_of_words_loop(running_sum, "values")


@pytest.mark.grading
def test_in_a_kernel_the_checks_remember_what_they_said():
    """grader.check_* in a real IPython kernel (as JupyterLab runs them): the second failing
    check cell says one line; the solution cell run again starts afresh."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        def run(code):
            kc.execute(textwrap.dedent(code))
            outs = []
            while True:
                msg = kc.get_iopub_msg(timeout=120)
                kind, content = msg["msg_type"], msg["content"]
                if kind == "error":
                    outs += content["traceback"]
                elif kind == "stream":
                    outs.append(content["text"])
                elif kind == "status" and content["execution_state"] == "idle":
                    return "\n".join(outs)
        cell = ("import torch\ndef bag_of_words_loop(x):\n"
                "    return torch.stack([x[:, :t + 1].sum(1) for t in range(x.shape[1])], dim=1)\n")
        run("import grader\n" + cell)
        first = run('grader.check_bag_of_words_loop(bag_of_words_loop, "last_token")')
        later = run('grader.check_bag_of_words_loop(bag_of_words_loop, "values")')
        assert "Likely mistake: running sum" in first
        assert "the same mistake as in the check" in later and "Likely mistake" not in later
        run(cell)  # the solution cell run again: a new function
        again = run('grader.check_bag_of_words_loop(bag_of_words_loop, "values")')
        assert "Likely mistake: running sum" in again
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
