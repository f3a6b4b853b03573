# agent_memory: the commands. PG=15 (default) or PG=18 picks the PostgreSQL.
PG ?= 15
export PG

.PHONY: all demo test test-reliability test-citus bench profile stop setup install package fmt lint docker

all: package  ## build the installable package (the default, as PGXN's client expects)

demo:       ## install what is missing, build, start a preloaded cluster, run the quick start
	scripts/demo.sh

test:       ## every test layer: unit, pg_test, regress, integration
	scripts/test.sh

test-reliability: ## upgrades, pg_dump, isolation, hostile input, tenants, load; PARTS="..." picks some
	scripts/reliability.sh $(PARTS)

test-citus: ## the regress suites through a real Citus cluster (needs Citus 13.2 for PostgreSQL 15)
	scripts/test_citus.sh

bench:      ## extension vs plain SQL (and peers), ratios into BENCHMARKS.md
	scripts/bench.sh

profile:    ## instructions per call (callgrind) against the plain SQL, into BENCHMARKS.md
	scripts/profile.sh

stop:       ## stop the demo cluster
	scripts/cluster.sh stop demo

setup:      ## install the toolchain pieces only
	scripts/setup.sh

install:    ## build (release) and install into PostgreSQL $(PG)
	scripts/install.sh

package:    ## build target/package/agent_memory-VERSION-pg$(PG)-ARCH.tar.gz (cargo pgrx package)
	scripts/package.sh

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy -p agent_memory_core -p agent_memory_integration -p agent_memory_mcp --all-targets -- -D warnings
	cargo clippy -p agent_memory --no-default-features --features pg$(PG) --all-targets -- -D warnings
	cargo check --manifest-path fuzz/Cargo.toml --bins

docker:     ## needs a Docker engine (not available on the development machines)
	docker build -f docker/Dockerfile -t agent_memory:pg15 .
