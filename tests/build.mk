# tests/ — criterion tests and benchmarks.
#
# tests/unit/test_*.c: one file per scheduler module, linked with libsched only; run by
#   `make check-unit`, which `make check` runs three times: plain, ASan+UBSan, TSan.
# Integration tests: each folder's build.mk appends binaries to INTEGRATION_TESTS; they
#   run once, in the plain build, by `make check-integration`.
# Criterion forks one process per test; --jobs 2 matches the 2-core machines.
CRITERION_FLAGS ?= --jobs 2 --timeout 120
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(sort $(wildcard tests/unit/test_*.c)))

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBSCHED)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBSCHED) $(SCHED_LIBS) -lcriterion

.PHONY: check-unit check-integration
check-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t $(CRITERION_FLAGS); done

check-integration: $(INTEGRATION_TESTS)
	@set -e; for t in $(INTEGRATION_TESTS); do echo "== $$t"; $$t $(CRITERION_FLAGS); done

-include tests/bench/bench.mk
