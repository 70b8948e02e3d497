# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DB ?= demo.db
DEMO_ANNOTATOR ?= demo
DEMO_REPORT_DB ?= demo-report.db
DEMO_REPORT ?= demo-report
# The CPU wheel of torch lies on disk here; installing it first stops pip from
# pulling a multi-GB CUDA build when the metrics extra asks for torch.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo demo-report demo-reset test test-fast lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@# WordNet's database files for spice-approx (Debian's wordnet-base), when we may install
	@if [ ! -f /usr/share/wordnet/index.noun ] && command -v apt-get >/dev/null \
	    && [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y -q wordnet-base >/dev/null 2>&1 \
	    || (apt-get update -q >/dev/null && apt-get install -y -q wordnet-base >/dev/null) \
	    || echo "note: wordnet-base not installed; spice-approx tests will skip"; fi
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e '.[metrics,dev]'
	touch $@

install: $(VENV)/.installed

## Load the sample project into $(DEMO_DB) (once; ratings are kept across runs), add the
## annotator $(DEMO_ANNOTATOR) (if new), show its status and open the rating app on it;
## then write the report of the sample project with its example ratings (stage 1 and 2 by
## two annotators) into $(DEMO_REPORT).
demo: install
	@if [ ! -f $(DEMO_DB) ]; then $(BIN)/thumb --db $(DEMO_DB) import sample_data/captions.csv; fi
	@# the annotator first: rating commands refuse a name the project does not know
	@$(BIN)/thumb --db $(DEMO_DB) annotator add $(DEMO_ANNOTATOR) >/dev/null
	$(BIN)/thumb --db $(DEMO_DB) status
	$(BIN)/thumb --db $(DEMO_DB) annotate --annotator $(DEMO_ANNOTATOR)
	@echo "Your ratings are in $(DEMO_DB) (thumb --db $(DEMO_DB) report, once you have rated"
	@echo "enough). The report below is of the sample project with its example ratings"
	@echo "($(DEMO_REPORT_DB)), so that every table has numbers to show:"
	@$(MAKE) --no-print-directory demo-report

demo-report: install
	@if [ ! -f $(DEMO_REPORT_DB) ]; then \
	    $(BIN)/thumb --db $(DEMO_REPORT_DB) import sample_data/captions.csv && \
	    $(BIN)/thumb --db $(DEMO_REPORT_DB) import sample_data/example_ratings.csv && \
	    $(BIN)/thumb --db $(DEMO_REPORT_DB) bison import sample_data/bison.jsonl; fi
	@# spice-approx needs WordNet's files (Debian's wordnet-base): without them the report
	@# has the other three metrics
	@if $(BIN)/python -c "import sys; from metrics.text.wordnet import wordnet_dir; \
	        sys.exit(wordnet_dir() is None)"; then spice="--metric spice-approx"; else \
	    echo "note: WordNet not found (apt-get install wordnet-base): the demo report leaves out spice-approx"; fi; \
	HF_HUB_OFFLINE=1 $(BIN)/thumb --db $(DEMO_REPORT_DB) metrics compute --metric bleu \
	    --metric rouge-l --metric cider-d $$spice
	$(BIN)/thumb --db $(DEMO_REPORT_DB) bison evaluate --scorer cider-d
	$(BIN)/thumb --db $(DEMO_REPORT_DB) report --format html --out $(DEMO_REPORT) --force \
	    --print-figures
	$(BIN)/thumb --db $(DEMO_REPORT_DB) report --format md --out $(DEMO_REPORT) --force
	$(BIN)/thumb --db $(DEMO_REPORT_DB) report --format latex --out $(DEMO_REPORT) --force
	@echo "The sample project's report: $(DEMO_REPORT)/report.html (and report.md, report.tex"
	@echo "with its tables; each figure as SVG, vector PDF and 300-dpi PNG beside them)"

## Start the demo over from the sample data (deletes $(DEMO_DB) and its ratings).
demo-reset:
	rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm $(DEMO_REPORT_DB)*
	$(MAKE) demo

## Every test, the slow ones included, on every CPU (pytest-xdist): the CI's command.
test: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n auto

## The edit loop: every test but the `slow` ones, on every CPU. `make test-fast
## CHECK_MODULES=1` also fails unless a function of every module of the project ran
## (tests/conftest.py; its tracing makes the run about 1.5 times as long).
test-fast: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n auto -m "not slow" \
	    $(if $(CHECK_MODULES),--check-every-module-runs)

lint: install
	$(BIN)/ruff check .

## Every benchmark (figures next to targets, none asserts): run_all.py writes
## benchmarks/RESULTS.md, the table README.md quotes; then the interface benchmarks.
bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/run_all.py
	$(BIN)/python benchmarks/annotate_latency.py
	$(BIN)/python benchmarks/match_proposals.py
	$(BIN)/python benchmarks/match_latency.py
	$(BIN)/python benchmarks/fuzz_imports.py
	$(BIN)/python benchmarks/relevance_cider.py
	$(BIN)/python benchmarks/sam_example.py
	$(BIN)/python -m benchmarks.races

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
