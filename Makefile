# coordinator-mirror -- `make help` lists the targets.
#
# The three promises: `make setup` installs everything (only what is missing), `make demo` runs
# the mirror on an embedded local Kafka with demo groups, `make test` runs every test.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON        ?= python3
VENV          ?= .venv
PY            := $(VENV)/bin/python
KAFKA_VERSION     ?= 4.3.1
KAFKA_OLD_VERSION ?= 3.9.2
# Must equal a spark-sql-kafka-0-10 release that Maven Central serves with all of its runtime
# dependencies; 4.0.0 is the newest 4.x for which it serves spark-token-provider-kafka-0-10 too.
SPARK_VERSION ?= 4.0.0
JARS_DIR      ?= jvm/lib
MVN           ?= mvn -q -B
PYTEST_ARGS   ?=

KAFKA_STAMP     := $(JARS_DIR)/kafka-$(KAFKA_VERSION)/.complete
KAFKA_OLD_STAMP := $(JARS_DIR)/kafka-$(KAFKA_OLD_VERSION)/.complete
SPARK_STAMP     := $(JARS_DIR)/spark-kafka-$(SPARK_VERSION)/.complete
PROBE_STAMP     := $(JARS_DIR)/tools-$(KAFKA_VERSION)/.complete
VENV_STAMP      := $(VENV)/.installed-$(SPARK_VERSION)

export COORDINATOR_MIRROR_JARS := $(abspath $(JARS_DIR))
export COORDINATOR_MIRROR_KAFKA_VERSION := $(KAFKA_VERSION)
export COORDINATOR_MIRROR_KAFKA_OLD_VERSION := $(KAFKA_OLD_VERSION)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: setup
setup: venv jars tools ## install everything: venv + package, Maven artifacts, prometheus
	@echo "setup complete: $(PY), jars in $(JARS_DIR)/"

.PHONY: venv
venv: $(VENV_STAMP) ## Python venv at .venv with the package (editable) and dev tools

$(VENV_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' 'pyspark==$(SPARK_VERSION)'
	@rm -f $(VENV)/.installed-*
	@touch $@

.PHONY: jars
jars: $(KAFKA_STAMP) $(KAFKA_OLD_STAMP) $(SPARK_STAMP) $(PROBE_STAMP) ## resolve the Kafka brokers and Spark's Kafka connector from Maven Central

$(JARS_DIR)/kafka-%/.complete: jvm/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) is required: apt-get install maven" >&2; exit 1; }
	@rm -rf $(JARS_DIR)/kafka-$*
	$(MVN) -f jvm/kafka/pom.xml dependency:copy-dependencies -Dkafka.version=$* \
	    -DincludeScope=runtime -DoutputDirectory=$(abspath $(JARS_DIR))/kafka-$*
	@touch $@

$(JARS_DIR)/spark-kafka-%/.complete: jvm/spark/pom.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) is required: apt-get install maven" >&2; exit 1; }
	@rm -rf $(JARS_DIR)/spark-kafka-$*
	$(MVN) -f jvm/spark/pom.xml dependency:copy-dependencies -Dspark.version=$* \
	    -DincludeScope=runtime \
	    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
	    -DoutputDirectory=$(abspath $(JARS_DIR))/spark-kafka-$*
	@touch $@

# Our Java helpers (jvm/tools/src): GroupProbe reads group state back through Kafka's own
# AdminClient; FormatterOracle runs Kafka's own formatters/serde over captured records.
$(JARS_DIR)/tools-%/.complete: $(wildcard jvm/tools/src/*.java) $(JARS_DIR)/kafka-%/.complete
	@rm -rf $(JARS_DIR)/tools-$*
	javac -d $(JARS_DIR)/tools-$* -cp '$(JARS_DIR)/kafka-$*/*' jvm/tools/src/*.java
	@touch $@

.PHONY: tools
tools: ## Debian's prometheus (promtool), if missing
	@command -v promtool >/dev/null || { \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	    $$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; }
	@promtool --version | head -1

.PHONY: demo
demo: setup ## run the mirror on an embedded local Kafka with demo consumer groups (Ctrl-C stops)
	$(VENV)/bin/coordinator-mirror demo

.PHONY: test
test: setup ## run every test: unit, real broker, real Spark, Prometheus
	CI=$${CI:-} $(PY) -m pytest $(PYTEST_ARGS)

.PHONY: vectors
vectors: venv jars ## regenerate tests/vectors/kafka-*.json from real 4.x and 3.x brokers, checked against Kafka's formatters
	$(PY) tests/vectors/make_vectors.py

.PHONY: check
check: venv ## lint, format check, types, import layers and the fast tests
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -m "not broker and not spark and not prometheus" $(PYTEST_ARGS)

.PHONY: fmt
fmt: venv ## format the code and fix what ruff can fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

.PHONY: clean
clean: ## remove build and test leftovers (keeps .venv and the jars)
	rm -rf build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

.PHONY: distclean
distclean: clean ## also remove .venv and the resolved jars
	rm -rf $(VENV) $(JARS_DIR)
