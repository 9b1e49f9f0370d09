# How torch and the locked packages get into $(VENV). The course Makefile includes this
# file; the installing itself is done by student/attention_student/installer.py (standard
# library only), which the student bundle ships too, so both install the same way.
#
# requirements.lock holds every package's exact version; torch comes first, as
#   - the normal build (from PyPI) where there is an NVIDIA driver (nvidia-smi), or where
#     the system is not Linux (PyPI's builds for macOS and Windows have no CUDA packages);
#   - elsewhere the CPU build, `torch==<version>+cpu`: first from the package sources your
#     own pip configuration names (if it names any), then from PyTorch's CPU wheel index
#     (TORCH_INDEX_URL), once it is checked that the index answers and has that build. If
#     neither has it, the install stops and says why (the index cannot be reached, or lacks
#     the build) rather than download PyPI's CUDA build (several GB); `ALLOW_CUDA=1` takes
#     that build all the same, `TORCH_SPEC=...` installs that torch instead (a build of the
#     locked version, e.g. a wheel file).
# The installer: uv (much faster; installed with pip first, at the locked version), given
# the extra package sources and constraints your pip configuration names (uv does not read
# it); pip where that configuration replaces PyPI (index-url, no-index) or uv cannot install
# from its sources. `INSTALLER=pip` or `INSTALLER=uv` decides. Both show their progress.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := requirements.lock
INSTALLER_PY ?= student/attention_student/installer.py
INSTALLER ?= auto
TORCH_VERSION := $(shell sed -n 's/^torch==//p' $(LOCK) 2>/dev/null)
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
TORCH_SPEC ?=
ALLOW_CUDA ?=
NVIDIA_DRIVER ?= $(shell command -v nvidia-smi 2>/dev/null)
SYSTEM ?= $(shell uname -s)
SETUP = $(PY) $(INSTALLER_PY) --venv $(VENV) --lock $(LOCK) --installer $(INSTALLER)
# JupyterLab's news pop-up (announcements) is switched off in the environment.
LAB_DISABLED := @jupyterlab/apputils-extension:announcements
# jsonschema imports rfc3987-syntax whenever it is installed (a checker of the "iri" formats,
# which no schema here uses; it comes with jupyter-events' jsonschema extras), and that import
# builds 35 parsers: 1.3 s of CPU in every process that reads a notebook (nbformat), each
# grading worker and each command. Each install takes it (and lark, used by it alone) out again;
# requirements.lock does not list them.
UNUSED := rfc3987-syntax lark

.PHONY: torch
## Install only torch into .venv (the CPU build where there is no NVIDIA driver).
torch: $(VENV)/.torch

$(VENV)/.torch: $(LOCK)
	@test -x $(PY) || { echo "==> a virtual environment in $(VENV) ($(PYTHON) -m venv)"; $(PYTHON) -m venv $(VENV); }
	@$(SETUP) torch --version "$(TORCH_VERSION)" --index-url "$(TORCH_INDEX_URL)" --spec "$(TORCH_SPEC)" \
	  --allow-cuda "$(ALLOW_CUDA)" --nvidia-driver "$(NVIDIA_DRIVER)" --system "$(SYSTEM)"
	@touch $@
