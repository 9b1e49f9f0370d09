"""python -m grader.instructor ...: the instructor's commands (grader/instructor/cli.py)."""
from grader.instructor.cli import main

main()
