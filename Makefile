# mmrecvit — the two commands of the README, and a few helpers.
#   make setup   the virtual environment (scripts/setup.sh); mmcv-lite with torchvision's kernels, no compiler for mmcv;
#                MMCV=full: mmcv with compiled ops instead (MMCV=lite switches back; unset: keep what .venv has)
#   make demo    set up, make the toy data, train + evaluate the toy Mask R-CNN (MODEL=..., TASK=det|seg|both|cls|transfer;
#                cls: the toy classifier, transfer: the toy classifier, then the toy Mask R-CNN started from it)
#   make test    set up, lint (ruff check, ruff format --check), run the test suite but its `slow` tier on every core
#                (pytest-xdist, at most 4 workers): before each commit. TIER=slow: that tier alone (real-size recipes,
#                exports, compiles, fresh venvs, sweeps over every config, long tool runs); TIER=all: every test (CI)
#   make test-fast  the unit tests only (no e2e/dist/subprocess/slow), for iterating
#   make bench   every README benchmark table into benchmarks/ (run it on an idle machine)
VENV   ?= .venv
PY     := $(VENV)/bin/python
MODEL  ?= plainvit
TASK   ?= det
MMCV   ?=
TIER   ?= commit
# make test's tiers, as pytest -m selections: commit = all but the slow tier, slow = that tier, all = every test
SELECT_commit := -m "not slow"
SELECT_slow   := -m slow
SELECT_all    :=
ifeq ($(filter $(TIER),commit slow all),)
$(error TIER=$(TIER): allowed commit, slow, all)
endif
# pytest-xdist workers: one per core (at most 4), a test file's tests in one worker (they share its toy runs)
PYTEST := $(PY) -m pytest -n auto --maxprocesses 4 --dist loadfile

.PHONY: setup demo test test-fast lint toy-data bench clean

setup:
	@bash scripts/setup.sh $(if $(MMCV),--mmcv $(MMCV))

demo: setup
	$(PY) tools/demo.py --model $(MODEL) --task $(TASK)

test: lint
	$(PYTEST) $(SELECT_$(TIER)) --durations=25

test-fast: setup
	$(PYTEST) -m "not (slow or e2e or dist or subprocess)"

lint: setup
	$(VENV)/bin/ruff check mmrecvit _mmrecvit_import_hook.py setup.py tools tests configs scripts
	$(VENV)/bin/ruff format --check mmrecvit _mmrecvit_import_hook.py setup.py tools tests configs scripts

bench: setup
	bash scripts/benchmarks.sh

toy-data: setup
	$(PY) tools/misc/make_toy_data.py --out data

clean:
	rm -rf work_dirs .pytest_cache .ruff_cache
