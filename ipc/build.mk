# ipc/ — the wire contract: a pure msgpack codec (no sockets), built as a static library
# that daemon/ and client/ link: $(LIBIPC) $(IPC_LIBS).
IPC_CFLAGS = $(shell pkg-config --cflags msgpack 2>/dev/null)
IPC_LIBS = $(shell pkg-config --libs msgpack 2>/dev/null || echo -lmsgpackc)
CFLAGS += $(IPC_CFLAGS)

IPC_SRCS := $(sort $(wildcard ipc/*.c))
IPC_OBJS := $(IPC_SRCS:%.c=$(BUILD)/%.o)
LIBIPC := $(BUILD)/libipc.a

$(LIBIPC): $(IPC_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

all: $(LIBIPC)

# Criterion tests of the codec: tests/integration/ipc_*.c, one binary each, linked with
# the codec only (no runtime, no daemon). The codec is compiled for them once more with
# UBSan that aborts (build/ipc-ubsan), so undefined behaviour in the decoder fails a test
# in the plain `make check-integration` too (the empty method name once did).
IPC_UBSAN := -fsanitize=undefined -fno-sanitize-recover=all
IPC_UBSAN_OBJS := $(IPC_SRCS:ipc/%.c=$(BUILD)/ipc-ubsan/%.o)
$(BUILD)/ipc-ubsan/%.o: ipc/%.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(IPC_UBSAN) -c -o $@ $<
IPC_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,\
	$(sort $(wildcard tests/integration/ipc_*.c)))
$(IPC_TESTS): $(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(IPC_UBSAN_OBJS)
	$(CC) $(LDFLAGS) $(IPC_UBSAN) -o $@ $< $(IPC_UBSAN_OBJS) $(IPC_LIBS) -lcriterion
INTEGRATION_TESTS += $(IPC_TESTS)

# libFuzzer target for the decoder (clang only; tests/build.mk runs it in `make fuzz` and
# `make check-fuzz`, with FUZZ_CFLAGS from there):
#   make fuzz-ipc && build/fuzz/ipc_decoder -max_total_time=60
.PHONY: fuzz-ipc
fuzz-ipc: $(BUILD)/fuzz/ipc_decoder
$(BUILD)/fuzz/ipc_decoder: tests/fuzz/ipc_decoder.c $(IPC_SRCS)
	@mkdir -p $(dir $@)
	clang $(filter-out -MMD -MP,$(CPPFLAGS)) $(FUZZ_CFLAGS) $(IPC_CFLAGS) -o $@ $^ $(IPC_LIBS)
