# scheduler/ — the fiber runtime, built as a static library every other layer links.
# The map of its files is at the top of scheduler/runtime.h.
SCHED_SRCS := $(sort $(wildcard scheduler/*.c))
SCHED_OBJS := $(SCHED_SRCS:%.c=$(BUILD)/%.o)
ifeq ($(CONTEXT),asm)
SCHED_OBJS += $(BUILD)/scheduler/context-x86_64.o
endif
LIBSCHED := $(BUILD)/libsched.a
SCHED_LIBS := -lnuma -luring -ldl

$(LIBSCHED): $(SCHED_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

all: $(LIBSCHED)
