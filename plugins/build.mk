# plugins/ — the plugin ABI (fiberd/plugin.h + fiberd-plugin.pc), the loader (linked into
# fiberd), the bundled plugins, the bad test plugins, and the loader's tests.
#
# For daemon/build.mk:
#   $(LOADER_OBJS) $(LOADER_LIBS)  link the loader into fiberd
#   $(BUNDLED_PLUGINS)             the bundled .so files, in $(PLUGIN_BUILD_DIR)
#                                  (--plugin-dir $(PLUGIN_BUILD_DIR) runs them in-tree)
#   $(TEST_PLUGINS)                the bad test plugins, in $(BUILD)/tests/plugins
#   $(PLUGIN_INSTALL_DIR)          the default plugin directory, for -DFIBERD_PLUGIN_DIR
#   install-plugins                bundled plugins, header and .pc under $(DESTDIR)$(PREFIX)
#   uninstall-plugins              removes exactly those (and their directories, if empty)
#
# Plugins are linked with -z defs: a plugin that used a symbol of the daemon (rather than
# the host table) would fail to link here instead of failing to load. Sanitizer builds
# leave that out (the sanitizer runtime lives in the executable).

PLUGIN_BUILD_DIR := $(BUILD)/plugins
PLUGIN_INSTALL_DIR := $(PREFIX)/lib/fiberd/plugins
LOADER_OBJS := $(BUILD)/plugins/loader.o $(BUILD)/plugins/elfcheck.o
LOADER_LIBS := -ldl

PLUGIN_LDFLAGS := -shared $(if $(SANITIZE),,-Wl,-z,defs)
# A plugin's frames probe the stack page by page (-fstack-clash-protection), so a frame
# larger than the fiber's guard (64 KiB, scheduler/stack.c) faults in the guard and is
# reported instead of landing silently in a neighbouring stack. fiberd-plugin.pc gives
# plugin authors the same flags.
PLUGIN_CFLAGS := -fPIC -fstack-clash-protection
CRYPTO_CFLAGS = $(shell pkg-config --cflags libcrypto 2>/dev/null)
CRYPTO_LIBS = $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)

BUNDLED_PLUGIN_NAMES := echo sha256 sleep spin skynet
BUNDLED_PLUGINS := $(BUNDLED_PLUGIN_NAMES:%=$(PLUGIN_BUILD_DIR)/%.so)
BUNDLED_PLUGIN_OBJS := $(BUNDLED_PLUGIN_NAMES:%=$(BUILD)/plugins/%.o)

$(BUNDLED_PLUGIN_OBJS): CFLAGS += $(PLUGIN_CFLAGS)
$(BUILD)/plugins/sha256.o: CFLAGS += $(CRYPTO_CFLAGS)
$(PLUGIN_BUILD_DIR)/sha256.so: PLUGIN_EXTRA_LIBS := $(CRYPTO_LIBS)
# echo packs its args again with msgpack-c (ipc/build.mk's flags; the daemon loads the
# same library already).
$(BUILD)/plugins/echo.o: CFLAGS += $(IPC_CFLAGS)
$(PLUGIN_BUILD_DIR)/echo.so: PLUGIN_EXTRA_LIBS = $(IPC_LIBS)

$(PLUGIN_BUILD_DIR)/%.so: $(BUILD)/plugins/%.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PLUGIN_LDFLAGS) -o $@ $< $(PLUGIN_EXTRA_LIBS)

# The .pc carries PREFIX: generated at build time for the tree, and again at install time
# with the PREFIX of that `make install` (it may differ from the build's).
FIBERD_PLUGIN_ABI = $(shell sed -n 's/^\#define FIBERD_PLUGIN_ABI_VERSION \([0-9]*\).*/\1/p' \
	plugins/fiberd/plugin.h)
gen_plugin_pc = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@ABI@|$(FIBERD_PLUGIN_ABI)|' \
	plugins/fiberd-plugin.pc.in > $(1)
$(BUILD)/fiberd-plugin.pc: plugins/fiberd-plugin.pc.in plugins/fiberd/plugin.h
	@mkdir -p $(dir $@)
	$(call gen_plugin_pc,$@)

# The example plugin of docs/plugins.md, compiled as an author would (<fiberd/plugin.h> found through
# -Iplugins, like the installed header through pkg-config); the tests run it.
EXAMPLE_PLUGIN := $(BUILD)/plugins/example/hello.so
$(BUILD)/plugins/example/hello.o: CFLAGS += $(PLUGIN_CFLAGS) -Iplugins
$(EXAMPLE_PLUGIN): $(BUILD)/plugins/example/hello.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PLUGIN_LDFLAGS) -o $@ $<

all: $(LOADER_OBJS) $(BUNDLED_PLUGINS) $(EXAMPLE_PLUGIN) $(BUILD)/fiberd-plugin.pc

# The misbehaving plugins of tests/plugins/, one .so each, built as real shared objects.
TEST_PLUGINS := $(patsubst tests/plugins/%.c,$(BUILD)/tests/plugins/%.so,\
	$(sort $(wildcard tests/plugins/*.c)))
$(BUILD)/tests/plugins/%.so: tests/plugins/%.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(PLUGIN_CFLAGS) $(LDFLAGS) $(PLUGIN_LDFLAGS) -o $@ $< \
		$(TEST_PLUGIN_LIBS)
# curl_fetch.so links libcurl, as a plugin author's would: the hooks must reach into it.
$(BUILD)/tests/plugins/curl_fetch.so: TEST_PLUGIN_LIBS = $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)

# The loader's tests: tests/integration/plugins_*.c, one binary each, linked with the
# loader (and the runtime, for the tests that run bundled plugins through a test host).
PLUGIN_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,\
	$(sort $(wildcard tests/integration/plugins_*.c)))
PLUGIN_TEST_DEFS := -DTEST_PLUGIN_BUILD_DIR='"$(abspath $(PLUGIN_BUILD_DIR))"' \
	-DTEST_BAD_PLUGIN_DIR='"$(abspath $(BUILD)/tests/plugins)"' \
	-DTEST_EXAMPLE_PLUGIN='"$(abspath $(EXAMPLE_PLUGIN))"'
$(PLUGIN_TESTS:%=%.o): CPPFLAGS += $(PLUGIN_TEST_DEFS)
$(PLUGIN_TESTS): $(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(LOADER_OBJS) \
		$(LIBSCHED) $(LIBIPC) | $(BUNDLED_PLUGINS) $(TEST_PLUGINS) $(EXAMPLE_PLUGIN)
	$(CC) $(LDFLAGS) -o $@ $< $(LOADER_OBJS) $(LIBIPC) $(LIBSCHED) $(LOADER_LIBS) \
		$(IPC_LIBS) $(SCHED_LIBS) $(CRYPTO_LIBS) -lcriterion
INTEGRATION_TESTS += $(PLUGIN_TESTS)

.PHONY: install-plugins
install-plugins: $(BUNDLED_PLUGINS)
	install -d $(DESTDIR)$(PLUGIN_INSTALL_DIR) $(DESTDIR)$(PREFIX)/include/fiberd \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 0644 $(BUNDLED_PLUGINS) $(DESTDIR)$(PLUGIN_INSTALL_DIR)/
	install -m 0644 plugins/fiberd/plugin.h $(DESTDIR)$(PREFIX)/include/fiberd/plugin.h
	$(call gen_plugin_pc,$(DESTDIR)$(PREFIX)/lib/pkgconfig/fiberd-plugin.pc)
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/pkgconfig/fiberd-plugin.pc

# Removes what install-plugins put, by name (a plugin the operator dropped into the
# directory stays, and so does the directory then).
.PHONY: uninstall-plugins
uninstall: uninstall-plugins
uninstall-plugins:
	rm -f $(BUNDLED_PLUGIN_NAMES:%=$(DESTDIR)$(PLUGIN_INSTALL_DIR)/%.so) \
		$(DESTDIR)$(PREFIX)/include/fiberd/plugin.h \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig/fiberd-plugin.pc
	rmdir $(DESTDIR)$(PLUGIN_INSTALL_DIR) $(DESTDIR)$(PREFIX)/lib/fiberd \
		$(DESTDIR)$(PREFIX)/include/fiberd 2>/dev/null || true

# check-plugin-pc: hello.c built with only `pkg-config --cflags fiberd-plugin`
# against a `make install DESTDIR=` tree (no PKG_CONFIG_SYSROOT_DIR), loaded by a real
# fiberd (tests/plugin-pc.sh).
.PHONY: check-plugin-pc
check-plugin-pc: all $(BUILD)/fiberd
	@bash tests/plugin-pc.sh $(BUILD)/plugin-pc-test $(BUILD)/fiberd $(BUILD)/fiberctl
# inline_calls.c and no_yield_inline.c are block_calls.c and no_yield.c under another
# name and flag
$(BUILD)/tests/plugins/inline_calls.so: tests/plugins/block_calls.c
$(BUILD)/tests/plugins/no_yield_inline.so: tests/plugins/no_yield.c
