# tests/bench/ — benchmarks: fiberd's figures against their peers (bare switch, ucontext,
# pthreads, Go), one markdown table of medians. See the top of tests/bench/bench.c.
#
#   make bench        deps-bench (Debian's golang-go), the optimized driver linked with
#                     libsched, the Go peers (off-line `go build`, caches under $(BUILD)),
#                     then `fiberd-bench table`: ~5 minutes on 2 cores. As root it raises
#                     vm.max_map_count for the 1M-fiber rows; otherwise it skips them.
#   make bench-compare BASE=<rev>  the A/B of a change: BASE built beside the tree and the
#                     runtime rows of both run interleaved (COMPARE_RUNS, COMPARE_ROWS;
#                     COMPARE_NEW_CONF: config text for the new side's fiberd only).
#   make bench-stages each stage's CPU per 1,000 jobs of a product row, by thread
#                     (STAGES_ROW, STAGES_PERF=1; tests/bench/stages.sh, docs/scaling.md).
#   make bench-smoke  every figure once with tiny counts, no Go: proves the bench code
#                     still runs (a few seconds). The product rows' peers (beanstalkd,
#                     gearmand, libgearman) are used when installed, skipped otherwise.
#
# BENCH_RUNS=N changes the rounds (default 5; skynet and the sleepers take at most 3,
# idle and the fiberd RSS row 1); BENCH_ONLY=yield,skynet runs only those figures (the
# product rows: product-tput, product-rate, product-rss, product-skynet).
#
# The product rows (tests/bench/product.h) start the fiberd, fiberctl and plugins built
# here, and the peers' servers that deps-bench installs (BENCH_DEBS: beanstalkd,
# gearman-job-server, libgearman-dev). The gearmand generator links libgearman, so it is
# its own binary, built only when libgearman-dev is there: bench-smoke, which `make
# check` runs without deps-bench, never needs it.
BENCH_BIN  := $(BUILD)/bench/fiberd-bench
BENCH_GO   := $(BUILD)/bench/fiberd-bench-go
BENCH_GEARMAN := $(BUILD)/bench/fiberd-bench-gearman
BENCH_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard tests/bench/*.c)) \
              tests/bench/peers/beanstalk.c tests/bench/peers/gearman-pipe.c)
BENCH_GEARMAN_OBJS := $(patsubst %.c,$(BUILD)/%.o,tests/bench/peers/gearman.c \
                      tests/bench/product.c tests/bench/bench-util.c)
BENCH_PRODUCT_DEPS = $(FIBERD) $(DAEMON_FIBERCTL) $(BUNDLED_PLUGINS) \
                     $(BUILD)/tests/plugins/block_calls.so $(BUILD)/tests/plugins/curl_fetch.so
GEARMAN_CFLAGS = $(shell pkg-config --cflags gearmand 2>/dev/null)
GEARMAN_LIBS = $(shell pkg-config --libs gearmand 2>/dev/null || echo -lgearman)
BENCH_GO_SRCS := $(wildcard tests/bench/peers/go/*.go) tests/bench/peers/go/go.mod
BENCH_RUNS ?= 5
BENCH_ONLY ?=

# Go as root on a fresh machine: no $HOME needed, nothing fetched, caches in $(BUILD).
BENCH_GO_ENV := GOCACHE=$(abspath $(BUILD))/go/cache GOPATH=$(abspath $(BUILD))/go/path \
                GOENV=off GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0

.PHONY: bench bench-smoke bench-compare bench-stages
all: $(BENCH_BIN)

# The fiberd generators start the binaries of this tree: their paths are compiled in. The
# hooks rows (bench-hooks.c) also copy the test plugins block_calls and curl_fetch.
$(BUILD)/tests/bench/bench-hooks.o: CPPFLAGS += \
	-DBENCH_TEST_PLUGIN_DIR='"$(abspath $(BUILD))/tests/plugins"'
$(BUILD)/tests/bench/bench-product.o $(BUILD)/tests/bench/bench-hooks.o: CPPFLAGS += -DBENCH_FIBERD_BIN='"$(abspath $(FIBERD))"' \
	-DBENCH_FIBERCTL_BIN='"$(abspath $(DAEMON_FIBERCTL))"' \
	-DBENCH_PLUGIN_DIR='"$(abspath $(PLUGIN_BUILD_DIR))"'

$(BENCH_BIN): $(BENCH_OBJS) $(LIBSCHED) $(LIBCLIENT) $(LIBIPC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJS) $(LIBCLIENT) $(LIBIPC) $(LIBSCHED) $(SCHED_LIBS) \
		$(IPC_LIBS)

$(BUILD)/tests/bench/peers/gearman.o: CFLAGS += $(GEARMAN_CFLAGS)
$(BENCH_GEARMAN): $(BENCH_GEARMAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(BENCH_GEARMAN_OBJS) $(GEARMAN_LIBS)

# The gearmand generator when libgearman-dev is installed; a note otherwise.
.PHONY: bench-gearman
bench-gearman: $(BENCH_BIN)
	@if pkg-config --exists gearmand 2>/dev/null; then \
	  $(MAKE) --no-print-directory $(BENCH_GEARMAN); \
	else \
	  echo "bench: libgearman-dev not installed: the gearmand rows are skipped (make deps-bench)"; \
	fi

$(BENCH_GO): $(BENCH_GO_SRCS)
	@mkdir -p $(dir $@)
	cd tests/bench/peers/go && $(BENCH_GO_ENV) go build -o $(abspath $@) .

# The table's line holds no $(MAKE), so `make -n bench` prints it instead of running it.
bench: deps-bench
	@$(MAKE) --no-print-directory $(BENCH_BIN) $(BENCH_PRODUCT_DEPS) bench-gearman
	@if command -v go >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory $(BENCH_GO); \
	else \
	  echo "bench: go not installed: the Go rows are skipped (apt-get install golang-go)"; \
	fi
	$(BENCH_BIN) table --runs $(BENCH_RUNS) \
	  $$(command -v go >/dev/null 2>&1 && echo --go $(BENCH_GO) || echo --no-go) \
	  $(if $(BENCH_ONLY),--only $(BENCH_ONLY))

bench-smoke: $(BENCH_BIN) $(BENCH_PRODUCT_DEPS) bench-gearman
	$(BENCH_BIN) table --smoke

# make bench-stages [STAGES_ROW='product-fiberd-sqlite tput 200000 8 64']: each stage's CPU
# per 1,000 jobs, thread by thread (tests/bench/stages.sh; docs/scaling.md)
STAGES_ROW ?= product-fiberd tput 200000 8 64
bench-stages: $(BENCH_BIN) $(BENCH_PRODUCT_DEPS)
	bash tests/bench/stages.sh $(BENCH_BIN) $(STAGES_ROW)

# make bench-compare BASE=<rev>: revision BASE built beside the tree, the runtime rows (or
# COMPARE_ROWS) of both run interleaved; tests/bench/compare.sh says how.
bench-compare: $(BENCH_BIN) $(BENCH_PRODUCT_DEPS)
	@test -n "$(BASE)" || { echo "bench-compare: say BASE=<rev>, e.g. BASE=HEAD~1" >&2; exit 2; }
	BASE=$(BASE) bash tests/bench/compare.sh $(BUILD) $(BENCH_BIN)
