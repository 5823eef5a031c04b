# tests/bench/ — benchmarks: fiberd's figures against their peers (bare switch, ucontext,
# pthreads, Go), one markdown table of medians. See the top of tests/bench/bench.c.
#
#   make bench        deps-bench (Debian's golang-go), the optimized driver linked with
#                     libsched, the Go peers (off-line `go build`, caches under $(BUILD)),
#                     then `fiberd-bench table`: ~5 minutes on 2 cores. As root it raises
#                     vm.max_map_count for the 1M-fiber rows; otherwise it skips them.
#   make bench-smoke  every figure once with tiny counts, no Go: proves the bench code
#                     still runs (a second or two).
#
# BENCH_RUNS=N changes the rounds (default 5; skynet and the sleepers take at most 3,
# idle 1); BENCH_ONLY=yield,skynet runs only those figures.
BENCH_BIN  := $(BUILD)/bench/fiberd-bench
BENCH_GO   := $(BUILD)/bench/fiberd-bench-go
BENCH_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard tests/bench/*.c)))
BENCH_GO_SRCS := $(wildcard tests/bench/peers/go/*.go) tests/bench/peers/go/go.mod
BENCH_RUNS ?= 5
BENCH_ONLY ?=

# Go as root on a fresh machine: no $HOME needed, nothing fetched, caches in $(BUILD).
BENCH_GO_ENV := GOCACHE=$(abspath $(BUILD))/go/cache GOPATH=$(abspath $(BUILD))/go/path \
                GOENV=off GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0

.PHONY: bench bench-smoke
all: $(BENCH_BIN)

$(BENCH_BIN): $(BENCH_OBJS) $(LIBSCHED)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJS) $(LIBSCHED) $(SCHED_LIBS)

$(BENCH_GO): $(BENCH_GO_SRCS)
	@mkdir -p $(dir $@)
	cd tests/bench/peers/go && $(BENCH_GO_ENV) go build -o $(abspath $@) .

bench: deps-bench $(BENCH_BIN)
	@if command -v go >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory $(BENCH_GO) && goflag="--go $(BENCH_GO)"; \
	else \
	  echo "bench: go not installed: the Go rows are skipped (apt-get install golang-go)"; \
	  goflag=--no-go; \
	fi; \
	$(BENCH_BIN) table --runs $(BENCH_RUNS) $$goflag $(if $(BENCH_ONLY),--only $(BENCH_ONLY))

bench-smoke: $(BENCH_BIN)
	$(BENCH_BIN) table --smoke
