# How torch and the locked packages get into $(VENV). The course Makefile includes this
# file and the student bundle ships a copy, so both install the same way.
#
# requirements.lock holds every package's exact version; torch comes first, as
#   - the normal build (from PyPI) where there is an NVIDIA driver (nvidia-smi), or where
#     the system is not Linux (PyPI's builds for macOS and Windows have no CUDA packages);
#   - elsewhere the CPU build, `torch==<version>+cpu`: first wherever your own pip finds it,
#     then from PyTorch's CPU wheel index (TORCH_INDEX_URL), and only as a last resort
#     PyPI's build, which brings the CUDA packages (a printed note says so).
# `make ... TORCH_SPEC=...` installs that torch instead (a build of the locked version, e.g. a
# wheel file).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := requirements.lock
TORCH_VERSION := $(shell sed -n 's/^torch==//p' $(LOCK) 2>/dev/null)
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
TORCH_SPEC ?=
NVIDIA_DRIVER ?= $(shell command -v nvidia-smi 2>/dev/null)
SYSTEM ?= $(shell uname -s)
# pip byte-compiles what it installs one file after another (about half of an install's
# time, torch most of it); COMPILE does the same afterwards on every core.
PIP := $(PY) -m pip install --quiet --disable-pip-version-check --no-compile
PIP_INSTALL := $(PIP) --constraint $(LOCK)
# JupyterLab's news pop-up (announcements) is switched off in the environment.
LAB_DISABLED := @jupyterlab/apputils-extension:announcements
# jsonschema imports rfc3987-syntax whenever it is installed (a checker of the "iri" formats,
# which no schema here uses; it comes with jupyter-events' jsonschema extras), and that import
# builds 35 parsers: 1.3 s of CPU in every process that reads a notebook (nbformat), each
# grading worker and each command. Each install takes it (and lark, used by it alone) out again;
# requirements.lock does not list them.
UNUSED := rfc3987-syntax lark
REMOVE_UNUSED := $(PY) -m pip uninstall --quiet --yes $(UNUSED)
# as pip's own compiling, a file that is not Python 3 (a package's test data) is passed over
COMPILE := $(PY) -m compileall -qq -j 0 $(VENV)/lib || true

.PHONY: torch
## Install only torch into .venv (the CPU build where there is no NVIDIA driver).
torch: $(VENV)/.torch

$(VENV)/.torch: $(LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if [ -n "$(TORCH_SPEC)" ]; then \
	  $(PIP) "$(TORCH_SPEC)"; \
	elif [ -n "$(NVIDIA_DRIVER)" ] || [ "$(SYSTEM)" != Linux ]; then \
	  $(PIP_INSTALL) "torch==$(TORCH_VERSION)"; \
	elif $(PIP_INSTALL) --no-deps "torch==$(TORCH_VERSION)+cpu" 2>/dev/null; then \
	  echo "torch $(TORCH_VERSION)+cpu (CPU build): found by your pip"; \
	elif echo "torch $(TORCH_VERSION)+cpu (CPU build): not found by your pip; trying $(TORCH_INDEX_URL)" && \
	     $(PIP_INSTALL) --no-deps --index-url "$(TORCH_INDEX_URL)" "torch==$(TORCH_VERSION)+cpu"; then \
	  echo "torch $(TORCH_VERSION)+cpu (CPU build): installed from $(TORCH_INDEX_URL)"; \
	else \
	  echo "NOTE: the CPU build of torch $(TORCH_VERSION) was found neither by your pip nor on"; \
	  echo "      $(TORCH_INDEX_URL); installing PyPI's torch==$(TORCH_VERSION) instead, the CUDA"; \
	  echo "      build with its nvidia-* packages (several GB). To have the CPU build instead:"; \
	  echo "      make clean, then again with TORCH_INDEX_URL=<a CPU wheel index> or TORCH_SPEC=<a wheel>."; \
	  $(PIP_INSTALL) "torch==$(TORCH_VERSION)"; \
	fi
	@touch $@
