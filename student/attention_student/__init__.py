"""Self-attention, one idea at a time: the student package.

It holds the course's notebooks, the checks they run (the package ``grader``, with the
stored inputs and outputs of the visible checks and no answer), the plot and widget
helpers (``notebook_helpers``) and the corpus. One command copies the notebooks into a
folder of yours and opens JupyterLab there:

    attention-student my-course            # or: python -m attention_student my-course

A notebook already in the folder is never overwritten: your work stays as it is.
"""
DISTRIBUTION = "attention-course-student"
__version__ = "0.1.0"
