# Two commands do everything on a fresh machine: `make grade` and `make test`.
# Both create .venv and install what the course needs on first use (a few minutes).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
TORCH  ?= torch==2.13.0
A      ?=
SOLUTION ?=
GRADE_FLAGS := $(if $(SOLUTION),--solution,) --json results/results.json --junit results/junit.xml --markdown results/summary.md

.PHONY: grade test assignments check setup datasets clean help release

help:
	@echo "make grade [A=<id>] [SOLUTION=1]   grade assignments/ (or the reference solution)"
	@echo "make test                          the project's own tests"
	@echo "make assignments                   regenerate assignments/ from solutions/"
	@echo "make check                         check the course invariants"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

grade: $(STAMP)
	@mkdir -p results
	$(PY) -m autograder grade $(A) $(GRADE_FLAGS)

test: $(STAMP)
	$(PY) -m pytest tests -q --durations=15

assignments: $(STAMP)
	$(PY) -m autograder stubs

check: $(STAMP)
	$(PY) -m autograder check

datasets: $(STAMP)
	$(MAKE) -C datasets PY=$(abspath $(PY))

clean:
	rm -rf results .cache

release: $(STAMP)
	$(PY) -m autograder release --week $(WEEK) --out release/week$(WEEK)
