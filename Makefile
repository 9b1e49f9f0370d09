# Two commands run the course: `make lab` opens it, `make test` checks it.
# Everything is installed into .venv from requirements.txt and pyproject.toml.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU build of torch where there is no NVIDIA driver, so a CPU machine never
# downloads the CUDA packages. Override, e.g. `make lab TORCH_SPEC=torch==2.13.0`.
TORCH_SPEC ?= $(if $(shell command -v nvidia-smi 2>/dev/null),torch==2.13.0,torch==2.13.0+cpu)
PORT ?= 8888
IP ?= 127.0.0.1
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS := --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks \
            --ip=$(IP) --port=$(PORT) $(ROOT_FLAG)
PYTEST_ARGS ?=
LAB_OPTS ?=
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

JOBS ?=
DEVICE ?=
SCHEDULER ?=
MEMORY ?=
FORCE ?=
ZIP ?=
ASSIGNMENT ?=
CSV ?=
FORCE ?=
CONFIRM ?=

.PHONY: install lab test test-fast references execute release lab-command clean collect autograde \
        feedback export bench notebook-times release-exchange roster release-feedback clean-grades \
        student-bundle

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m grader.isolation install
	@touch $@

## Open the course in JupyterLab (nbgrader and widgets extensions enabled).
## More jupyter lab options: `make lab LAB_OPTS="--no-browser ..."`.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(LAB_ARGS) $(LAB_OPTS)

lab-command:
	@echo $(VENV)/bin/jupyter lab $(LAB_ARGS) $(LAB_OPTS)

## Run every test: grader, notebooks (nbval, nbgrader validation), release, pipeline.
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup --durations=10 $(PYTEST_ARGS)

## The fast tier: checks, diagnosis, plans, LMS, reports, status, channel, bounds; no full
## gradings, notebook runs, clusters, sandboxes or browser (the `grading` marker, tests/conftest.py).
test-fast: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup --durations=10 -m "not grading and not notebooks and not browser" $(PYTEST_ARGS)

## Rewrite data/references/ from the float64 reference implementations.
references: $(STAMP)
	$(PY) -m grader.fixtures

## Re-execute the instructor notebooks in solutions/ in place (their outputs are committed).
execute: $(STAMP)
	$(PY) -m grader.notebooks execute

## Regenerate notebooks/ from solutions/, then check that the sources pass every test
## and the release passes none.
release: $(STAMP)
	$(PY) -m grader.notebooks release

## Instructors: release every assignment (or ASSIGNMENT=...) to the exchange; FORCE=1 replaces one.
release-exchange: $(STAMP)
	$(PY) -m grader.instructor release-exchange $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(FORCE),--force)

## Import the class roster into the gradebook (nbgrader's import): make roster CSV=students.csv
roster: $(STAMP)
	$(PY) -m grader.instructor roster "$(CSV)"

## Instructors: collect from the local exchange, or `make collect ZIP=x.zip ASSIGNMENT=05_...`
collect: $(STAMP)
	$(PY) -m grader.instructor collect $(if $(ZIP),--zip "$(ZIP)") $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)")

## Grade every submission under submitted/ (one worker per core, or JOBS=N; DEVICE=cuda for the GPU).
autograde: $(STAMP)
	$(PY) -m grader.grading.autograde $(if $(JOBS),--jobs $(JOBS)) $(if $(DEVICE),--device $(DEVICE)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(MEMORY),--memory $(MEMORY)) $(if $(FORCE),--force)

## Per-student HTML feedback (hidden tests removed) under feedback/.
feedback: $(STAMP)
	$(PY) -m grader.instructor feedback

## Put the feedback in the exchange for students' fetch_feedback (every assignment, or ASSIGNMENT=...).
release-feedback: $(STAMP)
	$(PY) -m grader.instructor release-feedback $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)")

## grades.csv, grades_canvas.csv and reports/grade_report.{md,html}, all read from the gradebook.
export: $(STAMP)
	$(PY) -m grader.instructor export

## Benchmark: a synthetic class graded by plain sequential nbgrader autograde, the embedded
## Dask cluster with 1 and 2 workers, and an external scheduler with 2 workers (BENCH_ARGS="--students 3").
bench: $(STAMP)
	$(PY) scripts/bench_autograde.py $(BENCH_ARGS)

## What students get, without answers, in dist/self-attention-student (`make lab` there opens it).
student-bundle: $(STAMP)
	$(PY) -m grader.bundle

## CPU and wall time of each notebook, kernel start excluded.
notebook-times: $(STAMP)
	$(PY) scripts/notebook_times.py

## Remove the environment and caches; grades, submissions and the exchange stay (see clean-grades).
clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path "./.git/*" -exec rm -rf {} +

## Delete the course's state (gradebook, submissions, feedback, exchange, reports) after asking;
## CONFIRM=yes deletes without the question.
COURSE_STATE := gradebook.db submitted autograded feedback downloaded exchange reports grades.csv grades_canvas.csv
clean-grades:
	@present="$(wildcard $(COURSE_STATE))"; \
	if [ -z "$$present" ]; then echo "no course state to delete"; exit 0; fi; \
	echo "This deletes the course's grades and submissions:"; \
	for p in $$present; do echo "  $$p ($$(find $$p -type f | wc -l) file(s))"; done; \
	if [ "$(CONFIRM)" != "yes" ]; then \
	  if [ ! -t 0 ]; then echo "not deleted: run 'make clean-grades CONFIRM=yes' to delete without a question"; exit 1; fi; \
	  read -r -p "Type 'delete' to delete them: " answer; \
	  if [ "$$answer" != delete ]; then echo "not deleted"; exit 1; fi; \
	fi; \
	rm -rf $$present && echo "deleted"
