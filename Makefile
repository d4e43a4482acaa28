# mmrecvit — the two commands of the README, and a few helpers.
#   make demo    set up, make the toy data, train + evaluate the toy Mask R-CNN (MODEL=..., TASK=det|seg|both|cls|transfer;
#                cls: the toy classifier, transfer: the toy classifier, then the toy Mask R-CNN started from it)
#   make test    set up, lint, run the test suite
#   make bench   every README benchmark table into benchmarks/ (run it on an idle machine)
VENV   ?= .venv
PY     := $(VENV)/bin/python
MODEL  ?= plainvit
TASK   ?= det

.PHONY: setup demo test lint toy-data bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) tools/demo.py --model $(MODEL) --task $(TASK)

test: setup
	$(VENV)/bin/ruff check mmrecvit tools tests configs
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check mmrecvit tools tests configs

bench: setup
	bash scripts/benchmarks.sh

toy-data: setup
	$(PY) tools/misc/make_toy_data.py --out data

clean:
	rm -rf work_dirs .pytest_cache .ruff_cache
