# fiberd — one Makefile for the whole tree.
#
#   make              build the runtime, daemon, client and plugins into $(BUILD)
#   make check        unit + integration tests, a short run of every fuzz target, then the
#                     scheduler tests again under ASan+UBSan and TSan (each variant in
#                     its own build directory)
#   make fuzz         every libFuzzer target for FUZZ_SECONDS each (tests/build.mk)
#   make bench        benchmarks with their peers (Go, pthreads, ucontext, bare switch)
#   make bench-compare BASE=<rev>  a revision built beside the tree, rows of both interleaved
#   make demo         the main job
#   make install      honours PREFIX and DESTDIR; make uninstall removes exactly that
#   make dist         $(BUILD)/fiberd-$(VERSION).tar.gz from `git archive HEAD`
#   make format-check clang-format over every C file, fails on any difference
#
# Each folder adds its own targets in its build.mk; this file holds the flags and the
# top-level targets. SANITIZE=address,undefined or SANITIZE=thread builds a variant into
# build/<variant>. CONTEXT=ucontext picks the portable context-switch fallback.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
SANITIZE ?=
CONTEXT ?= $(if $(filter x86_64,$(shell uname -m)),asm,ucontext)

ifeq ($(SANITIZE),)
BUILD ?= build
OPT   ?= -O2
else
BUILD ?= build/$(subst $(comma),-,$(SANITIZE))
OPT   ?= -O1 -fno-omit-frame-pointer
endif
comma := ,

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wno-unused-parameter -Wvla -Wundef
ifneq ($(CI),)
WARN += -Werror
endif
ifneq ($(WERROR),)
WARN += -Werror
endif

CPPFLAGS += -D_GNU_SOURCE -I. -MMD -MP
CFLAGS   += -std=gnu11 -g $(OPT) $(WARN) -fvisibility=hidden -pthread
LDFLAGS  += -pthread
ifneq ($(SANITIZE),)
CFLAGS  += -fsanitize=$(SANITIZE)
LDFLAGS += -fsanitize=$(SANITIZE)
endif
ifeq ($(CONTEXT),ucontext)
CPPFLAGS += -DSCHED_CONTEXT_UCONTEXT=1
endif

# Debian packages every target needs; the deps step installs the missing ones.
# libmicrohttpd-dev: fiberd's scrape endpoint and `fiberctl web`; libjs-chart.js: the
# charts of `fiberctl web` (its one runtime dependency, served from /usr/share); curl: the shell tests' HTTP client
# (tests/prometheus.sh). Prometheus itself is not installed (its package would start a
# system Prometheus): tests/prometheus-pkg.sh takes its binaries out of the package.
DEBS := build-essential pkg-config libcriterion-dev libmsgpack-dev libnuma-dev \
        libsystemd-dev libssl-dev libjansson-dev libinih-dev clang-format systemd git \
        scdoc man-db groff-base python3-msgpack python3-pytest libsqlite3-dev \
        libsmartcols-dev tmux zsh redis-server libhiredis-dev clang libclang-rt-14-dev \
        liburing-dev libcurl4-openssl-dev libmicrohttpd-dev curl libjs-chart.js
BENCH_DEBS := golang-go beanstalkd gearman-job-server libgearman-dev

.PHONY: all deps deps-bench check check-unit check-sanitizers bench demo install \
        uninstall dist format format-check clean
# Every target that compiles installs its Debian packages first: each object waits for
# the deps step (an order-only prerequisite, so it never forces a rebuild), and the
# pkg-config flags in the build.mk files are read when first used, after that step, not
# when the Makefile is parsed. So `make demo` works first on a fresh Debian 12.
all: deps
demo install: deps

# Installs missing packages with apt-get when root; otherwise prints the exact command.
define install_debs
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "fiberd: missing packages:$$missing" >&2; \
	    echo "fiberd: run: sudo apt-get install -y$$missing" >&2; exit 1; \
	  fi; \
	  echo "fiberd: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef
deps:
	$(call install_debs,$(DEBS))
deps-bench: deps
	$(call install_debs,$(BENCH_DEBS))

# The release named in ipc/protocol.h (FIBERD_VERSION), the one `fiberd --version` prints.
VERSION := $(shell sed -n 's/^\#define FIBERD_VERSION "\(.*\)"/\1/p' ipc/protocol.h)

# Plain include, not -include: a missing folder makefile is an error, not a tree that
# silently builds less.
include scheduler/build.mk
include ipc/build.mk
include plugins/build.mk
include client/build.mk
include daemon/build.mk
include docs/build.mk
include systemd/build.mk
include tests/build.mk

$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/%.o: %.S | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# The sanitizer variants (and the ucontext fallback) rebuild only the scheduler's tests,
# each in its own build directory.
check-sanitizers: deps
	$(MAKE) --no-print-directory SANITIZE=address,undefined check-unit
	$(MAKE) --no-print-directory SANITIZE=thread check-unit
	$(MAKE) --no-print-directory CONTEXT=ucontext BUILD=build/ucontext check-unit

# check-layering: no folder includes a higher one (tests/layering.sh has the rules); the
# self-test first proves the check can fail.
.PHONY: check-layering
check-layering:
	@bash tests/layering.sh --self-test
	@bash tests/layering.sh

# check-docs: the docs stay true: the README within its budget, the maps (the README's
# folders, docs/design.md's files) in step with the tracked files, no tracker issue
# numbers in the tree (tests/docs.sh has the rules); the self-test first proves the check
# can fail. It needs python3, which the deps step brings (python3-msgpack).
.PHONY: check-docs
check-docs: deps
	@bash tests/docs.sh --self-test
	@bash tests/docs.sh

# check-install: `make install DESTDIR=` into a scratch tree, every file where it belongs,
# then `make uninstall` must leave no file behind; `make dist` must give a tarball that
# holds the tree under fiberd-$(VERSION)/ (tests/install.sh).
.PHONY: check-install
check-install: all
	@bash tests/install.sh $(BUILD)/install-test

check: deps format-check check-layering check-docs
	$(MAKE) --no-print-directory check-unit check-daemon-unit check-integration check-systemd \
		check-man check-completion check-install bench-smoke check-clientlib check-python check-plugin-pc \
		check-tui check-promtool check-prometheus check-web check-fuzz
	$(MAKE) --no-print-directory check-sanitizers
	$(MAKE) --no-print-directory check-daemon-sanitizers

# check-daemon-sanitizers: fiberd itself built with TSan, then ASan+UBSan, under the
# integration tests of its own threads (the job store, shutdown, runs and cancels, the
# hooks that plugin code's blocking calls go through, the schedules' fiber and its
# writes the store thread answers, the scrape endpoint's thread rendering the metrics,
# the server code on 2 and 4 server workers, the Redis fleet's reader, heartbeat and
# query threads while Redis stops, restarts and is cut off);
# a report fails it (tests/daemon-sanitizers.sh).
DAEMON_SAN_TESTS := daemon_store daemon_lifecycle daemon_run daemon_cancel daemon_basic \
	daemon_detach daemon_hooks daemon_schedule daemon_metrics_http daemon_servers \
	daemon_redis_outage
.PHONY: check-daemon-sanitizers
check-daemon-sanitizers: deps
	$(MAKE) --no-print-directory SANITIZE=thread build/thread/fiberd
	$(MAKE) --no-print-directory SANITIZE=address,undefined build/address-undefined/fiberd
	$(MAKE) --no-print-directory $(DAEMON_SAN_TESTS:%=$(BUILD)/tests/integration/%)
	@bash tests/daemon-sanitizers.sh build $(DAEMON_SAN_TESTS:%=$(BUILD)/tests/integration/%)

DIST := $(BUILD)/fiberd-$(VERSION).tar.gz
# make dist: the committed tree (HEAD), not the work tree: what is not committed is not
# released. A dirty tree is said, not refused.
dist:
	@mkdir -p $(BUILD)
	@git diff --quiet HEAD 2>/dev/null || echo "dist: uncommitted changes are left out" >&2
	git archive --format=tar.gz --prefix=fiberd-$(VERSION)/ -o $(DIST) HEAD
	@echo "dist: $(DIST)"

C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build/*')
format:
	clang-format -i $(C_SOURCES)
format-check: deps
	@clang-format --dry-run --Werror $(C_SOURCES) && echo "format-check: ok"

# Keep intermediate objects (no "rm …" lines, no rebuilds of test objects).
.SECONDARY:

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' -type f 2>/dev/null)
