# client/ — the client library (libfiberclient.a: connect, pipelined requests, responses
# out of order) and fiberctl, the CLI built on it. Depends on ipc/ only (no runtime).
CLIENT_LIBS = $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
CLIENT_CFLAGS = $(shell pkg-config --cflags jansson 2>/dev/null)
CFLAGS += $(CLIENT_CFLAGS)

LIBCLIENT := $(BUILD)/libfiberclient.a
LIBCLIENT_OBJS := $(BUILD)/client/client.o
FIBERCTL := $(BUILD)/fiberctl
FIBERCTL_OBJS := $(patsubst %.c,$(BUILD)/%.o,client/fiberctl.c client/fiberctl-job.c \
	client/fiberctl-batch.c client/convert.c)

$(LIBCLIENT): $(LIBCLIENT_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(FIBERCTL): $(FIBERCTL_OBJS) $(LIBCLIENT) $(LIBIPC)
	$(CC) $(LDFLAGS) -o $@ $(FIBERCTL_OBJS) $(LIBCLIENT) $(LIBIPC) $(IPC_LIBS) \
		$(CLIENT_LIBS) -lm

all: $(FIBERCTL)

.PHONY: install-client
install: install-client
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
install-client: $(FIBERCTL)
	install -D -m 0755 $(FIBERCTL) $(DESTDIR)$(PREFIX)/bin/fiberctl
	install -D -m 0644 client/completion/fiberctl.bash $(DESTDIR)$(BASH_COMPLETION_DIR)/fiberctl

.PHONY: uninstall-client
uninstall: uninstall-client
uninstall-client:
	rm -f $(DESTDIR)$(PREFIX)/bin/fiberctl $(DESTDIR)$(BASH_COMPLETION_DIR)/fiberctl

# check-completion: the bash completion's verbs are `fiberctl --help`'s, each verb's
# --help options complete, and plugin names and job ids come from a real fiberd
# (tests/completion.sh). $(FIBERD) and $(BUNDLED_PLUGINS) come from daemon/ and plugins/.
.PHONY: check-completion
check-completion: $(FIBERCTL) $(BUILD)/fiberd $(BUNDLED_PLUGINS)
	@bash tests/completion.sh $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR)

# tests/integration/client_*.c: the client library and fiberctl against a fake server
# thread; they run the built fiberctl, whose path they get at compile time.
CLIENT_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,\
	$(sort $(wildcard tests/integration/client_*.c)))
$(CLIENT_TESTS:%=%.o): CPPFLAGS += -DFIBERCTL_PATH='"$(abspath $(FIBERCTL))"'
$(CLIENT_TESTS): $(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(LIBCLIENT) \
		$(LIBIPC) $(FIBERCTL)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBCLIENT) $(LIBIPC) $(IPC_LIBS) $(CLIENT_LIBS) -lcriterion
INTEGRATION_TESTS += $(CLIENT_TESTS)
