# Two commands do everything on a fresh machine:
#   make train   PPO on CartPole-v1, embedded local Ray, 2 env runners, stops at return 475
#   make test    ruff and the fast tier: every guarantee's test (under 10 minutes here)
#   (make test-slow: learning runs, documented commands run for real; make test-all: both)
# Both create .venv on first use. constraints.txt pins torch to the CPU wheel used on the
# reference machines; `pip install distrl` elsewhere takes any torch >= 2.4.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: train test test-slow test-all bench setup
setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

train: $(STAMP)
	$(BIN)/distrl train ppo --tuned cartpole --env CartPole-v1 --num-env-runners 2 --stop-return 475

# $(call pytest_tiers,EXPR): the tests EXPR selects; what may share the machine on
# WORKERS workers, then what may not (marked alone) one at a time. pytest's 5 is "none
# selected". Two workers on two cores: three took longer (make test-all's shared phase
# 1,164 s on three; 1,022-1,156 s on two, with nearly the same tests).
WORKERS ?= 2
define pytest_tiers
	status=0; \
	$(BIN)/python -m pytest -q -m "($(1)) and not alone" -n $(WORKERS) --dist worksteal || \
		{ rc=$$?; [ $$rc = 5 ] || status=$$rc; }; \
	$(BIN)/python -m pytest -q -m "($(1)) and alone" || { rc=$$?; [ $$rc = 5 ] || status=$$rc; }; \
	exit $$status
endef

test: $(STAMP)
	$(BIN)/ruff check distrl tests bench examples
	$(call pytest_tiers,not slow)

test-slow: $(STAMP)
	$(call pytest_tiers,slow)

test-all: $(STAMP)
	$(BIN)/ruff check distrl tests bench examples
	$(call pytest_tiers,slow or not slow)

bench: $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,bench]'
	mkdir -p bench/out
	$(BIN)/python bench/ppo_cartpole.py | tee bench/out/ppo_cartpole.jsonl
	$(BIN)/python bench/plot_ppo_cartpole.py
	$(BIN)/python bench/league_memory.py | tee bench/out/league_memory.jsonl
	$(BIN)/python bench/plot_league_memory.py
	$(BIN)/python bench/ddppo_scaling.py | tee bench/out/ddppo_scaling.jsonl
	$(BIN)/python bench/plot_ddppo_scaling.py
	$(BIN)/python bench/replay_throughput.py | tee bench/out/replay_throughput.jsonl
	$(BIN)/python bench/apex_cartpole.py | tee bench/out/apex_cartpole.jsonl
	$(BIN)/python bench/plot_apex_cartpole.py
	$(BIN)/python bench/apex_atari.py | tee bench/out/apex_atari.jsonl
