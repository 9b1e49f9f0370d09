# Two commands run the course: `make lab` opens it, `make test` checks it; `make help` lists
# every command. Everything is installed into .venv (install.mk): the packages named in
# requirements.txt at the exact versions of requirements.lock, and pyproject.toml.

SHELL := /bin/bash
.DEFAULT_GOAL := help
include $(dir $(lastword $(MAKEFILE_LIST)))install.mk
STAMP := $(VENV)/.installed
PORT ?= 8888
# Students on the self-study route work in a copy of notebooks/, which make release never touches.
WORK ?= work
IP ?= 127.0.0.1
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS := --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/$(WORK) \
            --ip=$(IP) --port=$(PORT) $(ROOT_FLAG)
# The self-study lab is the student's: config/student-lab/ leaves out the instructor's panels
# (Formgrader, Create Assignment) and the exchange's (Assignment List, Courses: this route has
# no course exchange), and offers only the Python 3 kernel (the grading sandbox's is for
# grading); COURSE_SELF_STUDY=1 keeps nbgrader_config.py from creating exchange/. Validate stays.
STUDENT_LAB_ENV := JUPYTER_CONFIG_PATH=$(CURDIR)/config/student-lab$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH)) \
                   COURSE_SELF_STUDY=1
# The instructor's lab (make formgrader): every nbgrader panel and kernel, opened at the formgrader.
FORMGRADER_ARGS := --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/formgrader \
                   --ip=$(IP) --port=$(PORT) $(ROOT_FLAG)
PYTEST_ARGS ?=
# Test processes: one per core, at most 8. A process more than the cores (tried first, so that
# it keeps the cores busy while tests wait on kernels, clusters, pip or the browser) cost more
# CPU than the waits it filled, and minutes more on a slower machine, where the CPU is all there
# is (the figures: README, "What the suite costs").
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 8 ? n : 8 )))
LAB_OPTS ?=
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

JOBS ?=
FACTOR ?=
SLOWED_CMD ?=
DEVICE ?=
SCHEDULER ?=
MEMORY ?=
FORCE ?=
ZIP ?=
TIMES ?=
ASSIGNMENT ?=
CSV ?=
CONFIRM ?=
STUDENT ?=
OWNER ?=

.PHONY: install lab test test-fast test-slowed references execute release lab-command clean collect autograde \
        feedback export bench bench-class hidden-sweep notebook-times release-exchange setup-exchange roster release-feedback clean-grades \
        student-bundle wheel extensions help work lock formgrader formgrader-command

## Install everything into .venv (make lab and make test do it when needed).
install: $(STAMP)

# (the grading kernel spec is written from grader/isolation/kernelspec.py: a change there installs it again)
$(STAMP): $(VENV)/.torch requirements.txt $(LOCK) pyproject.toml $(INSTALLER_PY) grader/isolation/kernelspec.py
	@$(SETUP) packages -r requirements.txt --editable . --remove $(UNUSED) --compile
	@echo "==> JupyterLab's news pop-up off; the grading kernel spec"
	@$(VENV)/bin/jupyter labextension disable --level=sys_prefix $(LAB_DISABLED) >/dev/null 2>&1
	@$(PY) -m grader.isolation install
	@$(PY) -m grader.instructor.formgrader enable
	@touch $@

## List the commands (this list; `make` alone prints it too).
help:
	@awk '/^## / { if (!doc) doc = substr($$0, 4); next } \
	     /^[a-z][a-z-]*:/ { if (doc) { split($$0, t, ":"); printf "  make %-18s %s\n", t[1], doc } } \
	     { doc = "" }' $(MAKEFILE_LIST)

## Rewrite requirements.lock: install requirements.txt (after a change) into .venv, then record it.
lock: $(VENV)/.torch
	@$(SETUP) packages --unlocked -r requirements.txt --remove $(UNUSED)
	@{ echo "# Every package the course installs, at its exact version: written by make lock from"; \
	   echo "# .venv. make install and the student bundle install with it as pip constraints."; \
	   $(PY) -m pip freeze --all --exclude pip --exclude-editable | sed 's/^torch==\([^+]*\)+.*/torch==\1/'; } > $(LOCK).new
	@mv $(LOCK).new $(LOCK) && echo "$(LOCK): $$(grep -vc '^#' $(LOCK)) packages"

## Open the course in JupyterLab at work/, as a student sees it (widgets, nbgrader's Validate).
## More jupyter lab options: `make lab LAB_OPTS="--no-browser ..."`.
lab: $(STAMP) work
	$(STUDENT_LAB_ENV) $(VENV)/bin/jupyter lab $(LAB_ARGS) $(LAB_OPTS)

## Instructors: JupyterLab at the formgrader, with every nbgrader panel and the grading kernel.
## PORT and LAB_OPTS as for make lab.
formgrader: $(STAMP)
	$(VENV)/bin/jupyter lab $(FORMGRADER_ARGS) $(LAB_OPTS)

## Copy the notebooks a student does not have yet from notebooks/ to work/ (never overwrites).
work:
	@for nb in notebooks/*/*.ipynb; do \
	  copy="$(WORK)/$${nb#notebooks/}"; \
	  if [ ! -e "$$copy" ]; then mkdir -p "$$(dirname "$$copy")" && cp "$$nb" "$$copy" && echo "copied $$nb to $$copy"; fi; \
	done

## Print the command make lab runs.
lab-command:
	@echo $(STUDENT_LAB_ENV) $(VENV)/bin/jupyter lab $(LAB_ARGS) $(LAB_OPTS)

## Print the command make formgrader runs.
formgrader-command:
	@echo $(VENV)/bin/jupyter lab $(FORMGRADER_ARGS) $(LAB_OPTS)

## Run every test: grader, notebooks (nbval, nbgrader validation), release, pipeline.
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=10 $(PYTEST_ARGS)

## The fast tier: checks, diagnosis, plans, LMS, reports, status, channel, bounds; no full
## gradings, notebook runs, clusters, sandboxes or browser (the `grading` marker, tests/conftest.py).
test-fast: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=10 -m "not grading and not notebooks and not browser" $(PYTEST_ARGS)

## make test as on a machine 1.7x slower, the slowest of this kind (FACTOR=2, SLOWED_CMD="bash .ci/run").
## scripts/slowed_run.py: as root, with cgroup v1's cpu controller.
test-slowed: $(STAMP)
	$(PY) scripts/slowed_run.py $(if $(FACTOR),--factor $(FACTOR)) -- $(if $(SLOWED_CMD),$(SLOWED_CMD),$(MAKE) test)

## Write data/references/ from the float64 references; unchanged files untouched (EXERCISES="..." for those).
references: $(STAMP)
	$(PY) -m grader.answers.fixtures $(EXERCISES)

## Re-execute solutions/ in place, outputs kept (ASSIGNMENT="09_attention_in_todays_models ..." for those only).
execute: $(STAMP)
	$(PY) -m grader.instructor.notebooks execute $(ASSIGNMENT)

## Regenerate notebooks/ from solutions/ and validate both (ASSIGNMENT="..." for those assignments only).
release: $(STAMP)
	$(PY) -m grader.instructor.notebooks release $(ASSIGNMENT)

## Course server: build the shared exchange set in nbgrader_config.py (OWNER=name when run as root).
setup-exchange: $(STAMP)
	$(PY) -m grader.instructor setup-exchange $(if $(OWNER),--owner "$(OWNER)")

## Instructors: release every assignment (or ASSIGNMENT=...) to the exchange; FORCE=1 replaces one.
release-exchange: $(STAMP)
	$(PY) -m grader.instructor release-exchange $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(FORCE),--force)

## Import the class roster into the gradebook (nbgrader's import): make roster CSV=students.csv
roster: $(STAMP)
	$(PY) -m grader.instructor roster "$(CSV)"

## Instructors: collect from the exchange, or `make collect ZIP=x.zip [ASSIGNMENT=05_...] [TIMES=times.csv]`
collect: $(STAMP)
	$(PY) -m grader.instructor collect $(if $(ZIP),--zip "$(ZIP)") $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(TIMES),--times "$(TIMES)")

## Per-student extensions (student, assignment, due or extra): make extensions CSV=extensions.csv
extensions: $(STAMP)
	$(PY) -m grader.instructor extensions "$(CSV)"

## Grade every submission under submitted/ (a worker per core, or JOBS=N; STUDENT=s ASSIGNMENT=a regrades one).
autograde: $(STAMP)
	$(PY) -m grader.grading.autograde $(if $(JOBS),--jobs $(JOBS)) $(if $(STUDENT),--student "$(STUDENT)") $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(DEVICE),--device $(DEVICE)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(MEMORY),--memory $(MEMORY)) $(if $(FORCE),--force)

## Per-student HTML feedback (hidden tests removed) under feedback/, only what changed (ASSIGNMENT=, STUDENT=, FORCE=1, JOBS=N).
feedback: $(STAMP)
	$(PY) -m grader.instructor feedback $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(STUDENT),--student "$(STUDENT)") $(if $(FORCE),--force) $(if $(JOBS),--jobs $(JOBS)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(MEMORY),--memory $(MEMORY))

## Put the feedback in the exchange for students' fetch_feedback (every assignment, or ASSIGNMENT=...).
release-feedback: $(STAMP)
	$(PY) -m grader.instructor release-feedback $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)")

## grades.csv, grades_canvas.csv and reports/grade_report.{md,html}, all read from the gradebook.
export: $(STAMP)
	$(PY) -m grader.instructor export

## Benchmark autograde on a synthetic class, four ways (BENCH_ARGS="--students 3" for less).
## The ways: plain sequential nbgrader autograde, the embedded Dask cluster with 1 and 2
## workers, and an external scheduler with 2 workers.
bench: $(STAMP)
	$(PY) scripts/bench_autograde.py $(BENCH_ARGS)

## Benchmark a class of 1,350 students x 8 assignments built from a few real gradings: the formgrader
## (API and Chromium), export, feedback, a regrade, a no-op autograde (BENCH_ARGS="--students 300" for less).
bench-class: $(STAMP)
	$(PY) scripts/bench_class.py $(BENCH_ARGS)

## Every catalogued mistake against the hidden checks, 200 seeds each: how many passed or went unnamed.
## scripts/hidden_sweep.py; SWEEP_ARGS="--seeds 1000 generate" for one exercise, more seeds.
hidden-sweep: $(STAMP)
	$(PY) scripts/hidden_sweep.py $(SWEEP_ARGS)

## What students get, without answers: the student package, a README, `make lab` (dist/self-attention-student).
## ASSIGNMENTS="01_bag_of_words 02_tril_matmul" for only the notebooks released so far.
student-bundle: $(STAMP)
	@$(PY) -m grader.instructor.bundle $(if $(ASSIGNMENTS),--assignments $(ASSIGNMENTS))

## The student package alone, one pip install on any system: dist/attention_course_student-*.whl.
## ASSIGNMENTS as for student-bundle.
wheel: $(STAMP)
	@$(PY) -m grader.instructor.bundle --wheel $(if $(ASSIGNMENTS),--assignments $(ASSIGNMENTS))

## CPU and wall time of each notebook, kernel start excluded.
notebook-times: $(STAMP)
	$(PY) scripts/notebook_times.py

## Remove the environment and caches; grades, submissions and the exchange stay (see clean-grades).
clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path "./.git/*" -exec rm -rf {} +

COURSE_STATE := gradebook.db submitted autograded feedback downloaded exchange reports grades.csv grades_canvas.csv \
                roster.json extensions.json
## Delete grades, submissions, feedback, exchange and reports after asking (CONFIRM=yes: no question).
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

# --- on a GPU: the checks on CUDA against the CPU (scripts/gpu_check.py; README "On a GPU") ---
# Made for a bare machine with torch: no make install; the machine's own python3.
GPU_PYTHON ?= python3
GPU_CHECK_ARGS ?=
GPU_WHEELHOUSE ?= gpu-wheelhouse
GPU_PYTHON_VERSION ?= 3.12
GPU_PLATFORMS ?= manylinux2014_x86_64 manylinux_2_28_x86_64

.PHONY: gpu-check gpu-wheelhouse

## On a CUDA machine: every check on CUDA against the CPU, 08 timed, the notebooks (GPU_CHECK_ARGS=...).
gpu-check:
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) scripts/gpu_check.py $(GPU_CHECK_ARGS)

## The wheels the notebooks need on a bare GPU machine (nbclient, ipykernel, ipywidgets; Python 3.12).
gpu-wheelhouse:
	$(GPU_PYTHON) -m pip download --progress-bar on --dest $(GPU_WHEELHOUSE) --only-binary=:all: \
	  --python-version $(GPU_PYTHON_VERSION) --implementation cp $(foreach p,$(GPU_PLATFORMS),--platform $(p)) \
	  -c $(LOCK) nbclient ipykernel ipywidgets
	@du -sh $(GPU_WHEELHOUSE) | awk '{print "$(GPU_WHEELHOUSE): " $$1 " in " n " wheels"}' n=$$(ls $(GPU_WHEELHOUSE)/*.whl | wc -l)
