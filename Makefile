# kafka-iggy-harness. `make run` is the main job, `make test` the test job; both set up first.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -euo pipefail -c

# Debian packages the build needs: a C toolchain and zlib for librdkafka (built from source by
# the rdkafka crate), perl and python3 for its configure script.
SYSTEM_PACKAGES := build-essential pkg-config zlib1g-dev perl python3
GATEWAY_ADDR ?= 127.0.0.1:19092
GATEWAY_INSTANCE_ID ?= 7
GATEWAY_MAX_FRAME_SIZE ?= 8388608

.PHONY: setup build run test real-iggy-tier bench lint

setup:
	missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done)
	if [ -n "$$missing" ]; then
	  echo "setup: installing $$missing"
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing
	fi
	command -v cargo >/dev/null || { echo "setup: cargo is missing (Rust 1.95 stable is required)"; exit 1; }

build: setup
	cargo build --release -p kafka-iggy-gateway -p kafka-iggy-conformance

# Main job: the gateway binary on the embedded backend, the conformance suite against it over
# loopback, then a graceful shutdown (SIGINT) of the gateway.
run: build
	./target/release/kafka-iggy-gateway --listen $(GATEWAY_ADDR) --instance-id $(GATEWAY_INSTANCE_ID) \
	  --max-frame-size $(GATEWAY_MAX_FRAME_SIZE) --backend embedded > target/gateway.log 2>&1 &
	gateway=$$!
	trap 'kill -INT $$gateway 2>/dev/null || true' EXIT
	for _ in $$(seq 1 100); do grep -q "listening on" target/gateway.log && break; sleep 0.1; done
	cat target/gateway.log
	./target/release/conformance --bootstrap $(GATEWAY_ADDR) \
	  --instance-id $(GATEWAY_INSTANCE_ID) --max-frame-size $(GATEWAY_MAX_FRAME_SIZE)
	kill -INT $$gateway; wait $$gateway; trap - EXIT
	tail -n 2 target/gateway.log

lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Everything that runs offline, then the real-Iggy tier (which says plainly when it is skipped).
test: lint
	echo "test: disk before the build: $$(df -h . | tail -n 1)"
	INSTA_UPDATE=no cargo test --workspace
	echo "test: disk after the build: $$(df -h . | tail -n 1); target is $$(du -sh target | cut -f1)"
	$(MAKE) --no-print-directory real-iggy-tier

# Runs whenever a server is reachable (IGGY_ADDR, an iggy-server binary, or Docker); otherwise it
# prints SKIPPED and why, and IGGY_REQUIRED=1 makes that a failure.
real-iggy-tier:
	cargo run -q -p kafka-iggy-conformance --bin real-iggy-tier

bench: setup
	cargo bench -p kig-core --bench core
	cargo bench -p kafka-iggy-conformance --bench gateway
	cargo bench -p kafka-iggy-conformance --bench real_iggy
