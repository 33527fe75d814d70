# Two commands do everything on a fresh machine:
#   make train   PPO on CartPole-v1, embedded local Ray, 2 env runners, stops at return 475
#   make test    the test suite (unit, integration on a 2-CPU local Ray, learning)
# Both create .venv on first use. constraints.txt pins torch to the CPU wheel used on the
# reference machines; `pip install distrl` elsewhere takes any torch >= 2.4.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: train test bench setup
setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

train: $(STAMP)
	$(BIN)/distrl train ppo --tuned cartpole --env CartPole-v1 --num-env-runners 2 --stop-return 475

test: $(STAMP)
	$(BIN)/ruff check distrl tests bench examples
	@# What may share the machine runs on two workers; what may not (marked alone) after it.
	status=0; \
	$(BIN)/python -m pytest -q -m "not alone" -n 2 --dist worksteal || status=$$?; \
	$(BIN)/python -m pytest -q -m alone || status=$$?; \
	exit $$status

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
