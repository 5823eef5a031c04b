# tests/ — criterion tests and benchmarks.
#
# tests/unit/test_*.c: one file per scheduler module, linked with libsched only; run by
#   `make check-unit`, which `make check` runs three times: plain, ASan+UBSan, TSan.
# Integration tests: each folder's build.mk appends binaries to INTEGRATION_TESTS; they
#   run once, in the plain build, by `make check-integration`.
# Criterion forks one process per test; --jobs 2 matches the 2-core machines.
CRITERION_FLAGS ?= --jobs 2 --timeout 120
# Any sanitizer report fails the test that made it.
SAN_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
           UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
           TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(sort $(wildcard tests/unit/test_*.c)))

# Criterion cannot start under ThreadSanitizer (Snaipe/Criterion#274), so the TSan
# variant compiles the same test files against tests/unit/tsan-shim, a stand-in that
# forks one process per test as Criterion does.
ifneq ($(findstring thread,$(SANITIZE)),)
TEST_RUNNER := $(BUILD)/tests/unit/tsan-shim/runner.o
$(BUILD)/tests/unit/%.o: CPPFLAGS := -Itests/unit/tsan-shim $(CPPFLAGS)
$(TEST_RUNNER): CPPFLAGS := -Itests/unit/tsan-shim $(CPPFLAGS)
TEST_LIBS :=
else
TEST_RUNNER :=
TEST_LIBS := -lcriterion
endif

# test_stack.c's big-frame overflow is compiled as plugins are (plugins/build.mk);
# stack_frame.c's 1 MiB frame as a plugin built without that protection is, and linked
# into test_stack.
$(BUILD)/tests/unit/test_stack.o: CFLAGS += -fstack-clash-protection
$(BUILD)/tests/unit/stack_frame.o: CFLAGS += -fno-stack-clash-protection
$(BUILD)/tests/unit/test_stack: $(BUILD)/tests/unit/stack_frame.o
$(BUILD)/tests/unit/test_stack: private LDFLAGS += $(BUILD)/tests/unit/stack_frame.o

# test_control.c's stall test finds its own function in a backtrace (dladdr).
$(BUILD)/tests/unit/test_control: LDFLAGS += -rdynamic

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBSCHED) $(TEST_RUNNER)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_RUNNER) $(LIBSCHED) $(SCHED_LIBS) $(TEST_LIBS)

.PHONY: check-unit check-integration
check-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $(SAN_ENV) $$t $(CRITERION_FLAGS); done

check-integration: $(INTEGRATION_TESTS)
	@set -e; for t in $(INTEGRATION_TESTS); do echo "== $$t"; $$t $(CRITERION_FLAGS); done

# make check-numa: the NUMA checks on real nodes, in a two-node qemu virtual machine
# (tests/numa/vm.sh; shared/recipes/numa-vm.md). Needs root; not part of `make check`
# (it fetches a Debian root file system once and boots under emulation).
NUMA_DEBS := debootstrap qemu-system-x86 qemu-utils e2fsprogs
NUMA_CHECK := $(BUILD)/tests/numa/numa_check
$(NUMA_CHECK): $(BUILD)/tests/numa/numa_check.o $(LIBSCHED)
	$(CC) $(LDFLAGS) -static -o $@ $< $(LIBSCHED) $(SCHED_LIBS)

.PHONY: deps-numa check-numa
deps-numa: deps
	$(call install_debs,$(NUMA_DEBS))
check-numa: deps-numa $(NUMA_CHECK)
	tests/numa/vm.sh $(NUMA_CHECK)

# make check-systemd-boot: `systemctl start fiberd` for real, with systemd as PID 1 in a
# systemd-nspawn container (tests/systemd/boot.sh; shared/recipes/systemd-in-container.md):
# Type=notify readiness, jobs through fiberctl, the journal, reload, a clean stop, socket
# activation. Needs root; not part of `make check` (it fetches a Debian root file system
# once). The script installs these packages itself too when run on its own.
SYSTEMD_BOOT_DEBS := debootstrap systemd-container util-linux procps

.PHONY: deps-systemd-boot check-systemd-boot
deps-systemd-boot: deps
	$(call install_debs,$(SYSTEMD_BOOT_DEBS))
check-systemd-boot: deps-systemd-boot all
	tests/systemd/boot.sh

# make check-prometheus: a real Prometheus server scrapes a real fiberd's GET /metrics
# every second until its API shows the target up and a job counter following the jobs
# (tests/prometheus.sh; Prometheus is taken out of Debian's prometheus package, not
# installed, so no system Prometheus starts; loopback only). $(FIBERCTL),
# $(BUNDLED_PLUGINS) and $(PLUGIN_BUILD_DIR) come from client/ and plugins/.
.PHONY: check-prometheus
check-prometheus: $(FIBERCTL) $(BUILD)/fiberd $(BUNDLED_PLUGINS)
	@bash tests/prometheus.sh $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR) $(abspath $(BUILD))

include tests/bench/bench.mk

# ---- fuzzing: libFuzzer targets under ASan+UBSan (clang; tests/fuzz/*.c), each with a
# seed corpus in tests/fuzz/corpus/NAME/:
#   ipc_decoder     the msgpack-rpc stream decoder (ipc/build.mk builds it)
#   daemon_request  envelope -> method -> params/options -> plugin args, no socket
#   daemon_config   the config file parser
# `make fuzz` runs each for FUZZ_SECONDS (new inputs go to $(BUILD)/fuzz/corpus/NAME, the
# seeds stay as they are); `make check-fuzz` (part of `make check`) runs each for
# FUZZ_CHECK_SECONDS. A crash leaves its input in $(BUILD)/fuzz/ and fails the target.
# clang does not define __SANITIZE_ADDRESS__, so SCHED_ASAN is set by hand: the context
# switch must tell ASan about fiber stacks (scheduler/runtime.h).
FUZZ_SECONDS ?= 600
FUZZ_CHECK_SECONDS ?= 20
FUZZ_TARGETS := ipc_decoder daemon_request daemon_config
FUZZ_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer -pthread \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSCHED_ASAN=1
FUZZ_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
FUZZ_DAEMON_SRCS = $(filter-out daemon/main.c,$(DAEMON_SRCS)) plugins/loader.c \
	plugins/elfcheck.c $(IPC_SRCS) $(SCHED_SRCS) \
	$(if $(filter asm,$(CONTEXT)),scheduler/context-x86_64.S)
FUZZ_DAEMON_DEFS = -DFIBERD_PLUGIN_DIR='"$(FIBERD_PLUGIN_DIR)"' -DFIBERD_DOC_DIR='"$(FIBERD_DOC_DIR)"' \
	-DFUZZ_PLUGIN_DIR='"$(abspath $(PLUGIN_BUILD_DIR))"'

FUZZ_DAEMON_HDRS = $(wildcard daemon/*.h daemon/*/*.h ipc/*.h plugins/*.h plugins/fiberd/*.h scheduler/*.h \
	scheduler/base/*.h)
$(BUILD)/fuzz/daemon_request $(BUILD)/fuzz/daemon_config: $(BUILD)/fuzz/%: tests/fuzz/%.c \
		$(FUZZ_DAEMON_SRCS) $(FUZZ_DAEMON_HDRS) | deps
	@mkdir -p $(dir $@)
	clang $(filter-out -MMD -MP,$(CPPFLAGS)) $(FUZZ_DAEMON_DEFS) $(FUZZ_CFLAGS) \
		$(IPC_CFLAGS) $(DAEMON_CFLAGS) -o $@ $(filter %.c %.S,$^) $(DAEMON_LIBS) $(IPC_LIBS) \
		$(SCHED_LIBS)
$(BUILD)/fuzz/daemon_request: $(BUNDLED_PLUGINS)

.PHONY: fuzz fuzz-request fuzz-config check-fuzz
fuzz-request: $(BUILD)/fuzz/daemon_request
fuzz-config: $(BUILD)/fuzz/daemon_config

# $(1): target name, $(2): seconds. -jobs=1: one process, the machines have 2 cores.
define run_fuzzer
	@mkdir -p $(BUILD)/fuzz/corpus/$(1)
	$(FUZZ_ENV) $(BUILD)/fuzz/$(1) -max_total_time=$(2) -print_final_stats=1 \
		-artifact_prefix=$(BUILD)/fuzz/$(1)- \
		$(BUILD)/fuzz/corpus/$(1) tests/fuzz/corpus/$(1)

endef
fuzz: $(FUZZ_BINS)
	$(foreach t,$(FUZZ_TARGETS),$(call run_fuzzer,$(t),$(FUZZ_SECONDS)))
check-fuzz: $(FUZZ_BINS)
	$(foreach t,$(FUZZ_TARGETS),$(call run_fuzzer,$(t),$(FUZZ_CHECK_SECONDS)))

# ---- daemon unit tests: tests/daemon-unit/test_*.c test one daemon module without a
# running fiberd (no socket, no plugin, no disk): each links the daemon objects it tests
# (DAEMON_UNIT_OBJS, compiled as fiberd's are) with libipc and libsched. Run by
# `make check-daemon-unit`, which `make check` runs.
DAEMON_UNIT_TESTS := $(patsubst tests/daemon-unit/%.c,$(BUILD)/tests/daemon-unit/%,\
	$(sort $(wildcard tests/daemon-unit/test_*.c)))
DAEMON_UNIT_OBJS = $(addprefix $(BUILD)/daemon/,job/jobstate.o job/job.o job/jobnames.o server/creds.o \
	job/joblog.o job/joblines.o obs/log.o store/store.o store/store-memory.o \
	store/store-sqlite.o store/store-redis.o store/store-redis-sched.o store/store-redis-conn.o \
	store/store-redis-periodic.o job/dispatch.o job/jobtimer.o job/jobkeys.o job/jobquota.o \
	cron/cron.o cron/duration.o cron/schedule.o)
$(DAEMON_UNIT_TESTS:%=%.o): CFLAGS += $(DAEMON_CFLAGS)
$(DAEMON_UNIT_TESTS:%=%.o): CPPFLAGS += -DFIBERD_SOURCE_DIR='"$(abspath .)"'
$(DAEMON_UNIT_TESTS): %: %.o $(DAEMON_UNIT_OBJS) $(LIBIPC) $(LIBSCHED)
	$(CC) $(LDFLAGS) -o $@ $< $(DAEMON_UNIT_OBJS) $(LIBIPC) $(LIBSCHED) $(IPC_LIBS) \
		$(SCHED_LIBS) $(DAEMON_LIBS) -lcriterion

.PHONY: check-daemon-unit
check-daemon-unit: $(DAEMON_UNIT_TESTS)
	@set -e; for t in $(DAEMON_UNIT_TESTS); do echo "== $$t"; $$t $(CRITERION_FLAGS); done

# ---- tests/integration/fiberctl_schedule.c: fiberctl's job scheduling verbs and options
# (submit --in/--at/--after/--key/--retries, retry, discard, dead, pause, resume,
# schedule, batch "after") end to end against a real fiberd, through the harness of
# daemon_*.c; part of check-integration (the line after INTEGRATION_TESTS += names it a
# prerequisite too: check-integration's own list was read above), and on its own `make
# check-fiberctl-schedule`.
FIBERCTL_SCHEDULE_TEST := $(BUILD)/tests/integration/fiberctl_schedule
INTEGRATION_TESTS += $(FIBERCTL_SCHEDULE_TEST)
check-integration: $(FIBERCTL_SCHEDULE_TEST)
$(FIBERCTL_SCHEDULE_TEST).o: CPPFLAGS += $(DAEMON_TEST_DEFS)
$(FIBERCTL_SCHEDULE_TEST): $(FIBERCTL_SCHEDULE_TEST).o $(DAEMON_TEST_HARNESS) $(DAEMON_LIBCLIENT) \
		$(LIBIPC) $(FIBERD) $(BUNDLED_PLUGINS) $(TEST_PLUGINS) $(DAEMON_FIBERCTL)
	$(CC) $(LDFLAGS) -o $@ $< $(DAEMON_TEST_HARNESS) $(DAEMON_LIBCLIENT) $(LIBIPC) $(IPC_LIBS) \
		-lcriterion

.PHONY: check-fiberctl-schedule
check-fiberctl-schedule: $(FIBERCTL_SCHEDULE_TEST)
	$(FIBERCTL_SCHEDULE_TEST) $(CRITERION_FLAGS)

# ---- make soak: the fleet's fault-injection soak (tests/soak/soak.py, docs/testing.md):
# two fiberd hosts on one redis-server, clients of several users pipelining every bundled
# plugin while a driver kills hosts and redis-server, hangs it, fills its disk, crashes a
# plugin and reloads the config; then it counts. Not part of `make check`: it runs
# SOAK_MINUTES minutes (default 3). As root it mounts a tmpfs and adds the users soak1
# and soak2; otherwise it says what it skips. redis-server and python3-msgpack come with
# the deps step.
SOAK_MINUTES ?= 3
.PHONY: soak
soak: deps $(FIBERD) $(BUNDLED_PLUGINS) $(TEST_PLUGINS)
	SOAK_MINUTES=$(SOAK_MINUTES) FIBERD=$(abspath $(FIBERD)) \
		PLUGIN_DIR=$(abspath $(PLUGIN_BUILD_DIR)) \
		TEST_PLUGIN_DIR=$(abspath $(BUILD)/tests/plugins) /usr/bin/python3 tests/soak/soak.py
