"""Grading a class: only the instructor runs this half of the grader.

layout (the course folders and nbgrader's API), plan (what each test cell checks),
channel (calling the student's objects in their kernel), execute (the nbgrader
preprocessor that runs a notebook once and its checks outside the kernel), submission
(grading one submission, the unit of work), status (fingerprints and results),
autograde (a class on a Dask cluster, one writer of the gradebook).
"""
