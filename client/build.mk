# client/ — the client library and fiberctl, the CLI built on it. Depends on ipc/ only
# (no runtime).
#
#   $(LIBCLIENT_SO)  libfiberd-client.so.$(CLIENT_SO_VERSION), soname libfiberd-client.so.0:
#                    the public API of client/fiberd/client.h, with the ipc codec linked in
#                    (its objects built again with -fPIC) and only fiberd_client_* exported
#                    (-fvisibility=hidden + client/libfiberd-client.map)
#   $(LIBCLIENT)     the static variant: the same objects, plus client.c's in-tree API
#                    (client/client.h) that the daemon's tests and the bench use; link
#                    $(LIBIPC) $(IPC_LIBS) with it. fiberctl links it.
#   fiberd-client.pc pkg-config file, generated for the tree and again at install time
CLIENT_LIBS = $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
CLIENT_CFLAGS = $(shell pkg-config --cflags jansson 2>/dev/null)
# fiberctl's tables: libsmartcols (util-linux; Debian's libsmartcols-dev)
FIBERCTL_LIBS = $(shell pkg-config --libs smartcols 2>/dev/null || echo -lsmartcols)
FIBERCTL_CFLAGS = $(shell pkg-config --cflags smartcols 2>/dev/null)
WEB_LIBS = $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
CFLAGS += $(CLIENT_CFLAGS)

LIBCLIENT := $(BUILD)/libfiberclient.a
CLIENT_LIB_SRCS := client/client.c client/fiberd-client.c client/fiberd-client-method.c \
	client/fiberd-client-observe.c client/fiberd-client-compat.c
LIBCLIENT_OBJS := $(CLIENT_LIB_SRCS:%.c=$(BUILD)/%.o)
FIBERCTL := $(BUILD)/fiberctl
FIBERCTL_OBJS := $(patsubst %.c,$(BUILD)/%.o,client/fiberctl.c client/fiberctl-job.c \
	client/fiberctl-batch.c client/fiberctl-opts.c client/fiberctl-retry.c \
	client/fiberctl-schedule.c client/fiberctl-logs.c client/fiberctl-top.c client/convert.c client/progress.c client/table.c client/term.c \
	client/batchref.c client/web.c client/web-api.c)
$(FIBERCTL_OBJS): CFLAGS += $(FIBERCTL_CFLAGS)
# `fiberctl web` (client/web.c): libmicrohttpd serves the dashboard, whose files
# (client/web/) are installed in $(WEB_DIR); Chart.js comes from Debian's libjs-chart.js
# (WEB_DEBS, installed by the deps step; a runtime dependency of the charts only).
WEB_DIR = $(PREFIX)/share/fiberd/web
WEB_ASSETS := client/web/index.html client/web/app.js client/web/style.css
$(BUILD)/client/web.o: CPPFLAGS += -DFIBERCTL_WEB_DIR='"$(WEB_DIR)"'

$(LIBCLIENT): $(LIBCLIENT_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(FIBERCTL): $(FIBERCTL_OBJS) $(LIBCLIENT) $(LIBIPC)
	$(CC) $(LDFLAGS) -o $@ $(FIBERCTL_OBJS) $(LIBCLIENT) $(LIBIPC) $(IPC_LIBS) \
		$(CLIENT_LIBS) $(FIBERCTL_LIBS) $(WEB_LIBS) -lm

# The shared library's version: MAJOR is the soname's, raised when the ABI breaks (a
# function removed or changed); MINOR when functions are added.
CLIENT_SO_MAJOR := 0
CLIENT_SO_VERSION := $(CLIENT_SO_MAJOR).3.0
CLIENT_SONAME := libfiberd-client.so.$(CLIENT_SO_MAJOR)
LIBCLIENT_SO := $(BUILD)/libfiberd-client.so.$(CLIENT_SO_VERSION)
LIBCLIENT_SO_OBJS := $(patsubst %.c,$(BUILD)/pic/%.o,$(CLIENT_LIB_SRCS) $(IPC_SRCS))
# -z defs: every symbol resolved at link time (msgpack-c is the one library it needs);
# sanitizer builds leave it out (their runtime lives in the executable).
$(BUILD)/pic/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
$(LIBCLIENT_SO): $(LIBCLIENT_SO_OBJS) client/libfiberd-client.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(CLIENT_SONAME) \
		-Wl,--version-script=client/libfiberd-client.map $(if $(SANITIZE),,-Wl,-z,defs) \
		-o $@ $(LIBCLIENT_SO_OBJS) $(IPC_LIBS)
	ln -sf $(notdir $@) $(BUILD)/$(CLIENT_SONAME)
	ln -sf $(CLIENT_SONAME) $(BUILD)/libfiberd-client.so

gen_client_pc = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	client/fiberd-client.pc.in > $(1)
$(BUILD)/fiberd-client.pc: client/fiberd-client.pc.in ipc/protocol.h
	@mkdir -p $(dir $@)
	$(call gen_client_pc,$@)

all: $(FIBERCTL) $(LIBCLIENT_SO) $(BUILD)/fiberd-client.pc

.PHONY: install-client
install: install-client
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
# where Debian's zsh looks ($fpath): vendor-completions for the distribution's /usr,
# site-functions for a local install
ZSH_COMPLETION_DIR ?= $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)
CLIENT_LIBDIR = $(PREFIX)/lib
install-client: $(FIBERCTL) $(LIBCLIENT_SO)
	install -D -m 0755 $(FIBERCTL) $(DESTDIR)$(PREFIX)/bin/fiberctl
	install -d $(DESTDIR)$(WEB_DIR)
	install -m 0644 $(WEB_ASSETS) $(DESTDIR)$(WEB_DIR)/
	install -D -m 0644 client/completion/fiberctl.bash $(DESTDIR)$(BASH_COMPLETION_DIR)/fiberctl
	install -D -m 0644 client/completion/_fiberctl $(DESTDIR)$(ZSH_COMPLETION_DIR)/_fiberctl
	install -d $(DESTDIR)$(CLIENT_LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/fiberd
	install -m 0755 $(LIBCLIENT_SO) $(DESTDIR)$(CLIENT_LIBDIR)/
	ln -sf $(notdir $(LIBCLIENT_SO)) $(DESTDIR)$(CLIENT_LIBDIR)/$(CLIENT_SONAME)
	ln -sf $(CLIENT_SONAME) $(DESTDIR)$(CLIENT_LIBDIR)/libfiberd-client.so
	install -m 0644 client/fiberd/client.h $(DESTDIR)$(PREFIX)/include/fiberd/client.h
	$(call gen_client_pc,$(DESTDIR)$(CLIENT_LIBDIR)/pkgconfig/fiberd-client.pc)
	chmod 0644 $(DESTDIR)$(CLIENT_LIBDIR)/pkgconfig/fiberd-client.pc

# The Python package (client/python/fiberd), the Debian way and offline: its modules
# copied where Debian's python3 looks (/usr/lib/python3/dist-packages for PREFIX=/usr, else
# PREFIX/lib/python3.X/dist-packages, which Debian's python3 has on sys.path for
# /usr/local), with a .dist-info whose INSTALLER is make, so pip lists it and leaves it to
# `make uninstall`. client/python/pyproject.toml is for pip instead.
PYTHON_SITEDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/$(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])')/dist-packages)
PYTHON_MODULES := $(sort $(wildcard client/python/fiberd/*.py))
PYTHON_DIST_INFO = $(DESTDIR)$(PYTHON_SITEDIR)/fiberd-$(VERSION).dist-info
.PHONY: install-python uninstall-python
install: install-python
install-python:
	install -d $(DESTDIR)$(PYTHON_SITEDIR)/fiberd $(PYTHON_DIST_INFO)
	install -m 0644 $(PYTHON_MODULES) $(DESTDIR)$(PYTHON_SITEDIR)/fiberd/
	printf 'Metadata-Version: 2.1\nName: fiberd\nVersion: %s\nSummary: %s\nLicense: MIT\nRequires-Dist: msgpack>=1.0\n' \
		'$(VERSION)' 'Client of fiberd, the job daemon (sync and asyncio)' >$(PYTHON_DIST_INFO)/METADATA
	echo make >$(PYTHON_DIST_INFO)/INSTALLER
	echo fiberd >$(PYTHON_DIST_INFO)/top_level.txt
	chmod 0644 $(PYTHON_DIST_INFO)/*
uninstall: uninstall-python
uninstall-python:
	rm -f $(PYTHON_MODULES:client/python/fiberd/%=$(DESTDIR)$(PYTHON_SITEDIR)/fiberd/%) \
		$(PYTHON_DIST_INFO)/METADATA $(PYTHON_DIST_INFO)/INSTALLER \
		$(PYTHON_DIST_INFO)/top_level.txt
	rm -rf $(DESTDIR)$(PYTHON_SITEDIR)/fiberd/__pycache__
	rmdir $(DESTDIR)$(PYTHON_SITEDIR)/fiberd $(PYTHON_DIST_INFO) 2>/dev/null || true

.PHONY: uninstall-client
uninstall: uninstall-client
uninstall-client:
	rm -f $(DESTDIR)$(PREFIX)/bin/fiberctl $(DESTDIR)$(BASH_COMPLETION_DIR)/fiberctl \
		$(DESTDIR)$(ZSH_COMPLETION_DIR)/_fiberctl \
		$(DESTDIR)$(CLIENT_LIBDIR)/libfiberd-client.so* \
		$(DESTDIR)$(PREFIX)/include/fiberd/client.h \
		$(DESTDIR)$(CLIENT_LIBDIR)/pkgconfig/fiberd-client.pc \
		$(WEB_ASSETS:client/web/%=$(DESTDIR)$(WEB_DIR)/%)
	rmdir $(DESTDIR)$(PREFIX)/include/fiberd 2>/dev/null || true
	rmdir $(DESTDIR)$(WEB_DIR) $(DESTDIR)$(PREFIX)/share/fiberd 2>/dev/null || true

# check-completion: the bash and zsh completions' verbs are `fiberctl --help`'s, each
# verb's --help options complete, and plugin names and job ids come from a real fiberd
# (tests/completion.sh). $(FIBERD) and $(BUNDLED_PLUGINS) come from daemon/ and plugins/.
.PHONY: check-completion
check-completion: $(FIBERCTL) $(BUILD)/fiberd $(BUNDLED_PLUGINS)
	@bash tests/completion.sh $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR)

# check-promtool: the OpenMetrics text of a real fiberd passes `promtool check metrics`
# (tests/promtool.sh; promtool is taken out of Debian's prometheus package, not
# installed, so no Prometheus server starts).
.PHONY: check-promtool
check-promtool: $(FIBERCTL) $(BUILD)/fiberd $(BUNDLED_PLUGINS)
	@bash tests/promtool.sh $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR) $(abspath $(BUILD))

# check-tui: what a person sees on a terminal, in a detached tmux session against a real
# fiberd (tests/tui.sh): tables with a 32-character plugin name, colour and NO_COLOR,
# `fiberctl top` (headings, counts, q and Ctrl-C give the terminal back), the progress
# lines of wait, batch and submit --wait. tests/plugins/long_name.c is that plugin.
.PHONY: check-tui
check-tui: $(FIBERCTL) $(BUILD)/fiberd $(BUNDLED_PLUGINS) $(BUILD)/tests/plugins/long_name.so
	@bash tests/tui.sh $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR) \
		$(BUILD)/tests/plugins/long_name.so

# tests/integration/client_*.c: the client library and fiberctl against a fake server
# thread; they run the built fiberctl, whose path they get at compile time.
CLIENT_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,\
	$(sort $(wildcard tests/integration/client_*.c)))
$(CLIENT_TESTS:%=%.o): CPPFLAGS += -DFIBERCTL_PATH='"$(abspath $(FIBERCTL))"'
$(CLIENT_TESTS): $(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(LIBCLIENT) \
		$(LIBIPC) $(FIBERCTL)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBCLIENT) $(LIBIPC) $(IPC_LIBS) $(CLIENT_LIBS) -lcriterion
INTEGRATION_TESTS += $(CLIENT_TESTS)
# client_convert.c tests fiberctl's pure conversions (durations, times, batch
# references): it links those objects of fiberctl's.
CLIENT_CONVERT_OBJS := $(BUILD)/client/convert.o $(BUILD)/client/batchref.o
$(BUILD)/tests/integration/client_convert: $(CLIENT_CONVERT_OBJS)
$(BUILD)/tests/integration/client_convert: private LDFLAGS += $(CLIENT_CONVERT_OBJS)

# check-clientlib: programs built only with `pkg-config --cflags --libs fiberd-client`
# against a `make install DESTDIR=` tree submit jobs, follow job logs and read metrics of a
# real fiberd; the .pc follows its tree (tests/clientlib.sh).
.PHONY: check-clientlib
check-clientlib: all $(BUILD)/fiberd $(BUNDLED_PLUGINS) $(BUILD)/tests/plugins/log_lines.so
	@bash tests/clientlib.sh $(BUILD)/clientlib-test $(BUILD)/fiberd $(PLUGIN_BUILD_DIR) \
		$(BUILD)/tests/plugins/log_lines.so

# bench-python: submit-and-wait one at a time against run_many, 10,000 echo jobs, on a
# private fiberd (tests/python/bench_run_many.py; a figure, not a test).
.PHONY: bench-python
bench-python: $(BUILD)/fiberd $(BUNDLED_PLUGINS)
	@set -e; tmp=$$(mktemp -d); trap 'kill $$pid 2>/dev/null; wait; rm -rf $$tmp' EXIT; \
	STATE_DIRECTORY=$$tmp $(BUILD)/fiberd --config /dev/null --socket $$tmp/s.sock \
		--plugin-dir $(PLUGIN_BUILD_DIR) --workers 1 --log-level warning & pid=$$!; \
	for i in $$(seq 500); do [ -S $$tmp/s.sock ] && break; sleep 0.02; done; \
	PYTHONDONTWRITEBYTECODE=1 $(PYTHON) tests/python/bench_run_many.py $$tmp/s.sock

# check-web: `fiberctl web` in headless Chromium against a real fiberd (tests/web/):
# the token's refusals, the page's counts and graph live, cancel and retry from the page,
# a screenshot in $(BUILD)/web-dashboard.png; then the access tiers through the API of
# a dashboard run as an unprivileged user (test_web_tiers.py: needs root, as make check). Its Debian packages (WEB_TEST_DEBS) come
# from deps-web; Debian's python3, for which python3-selenium is installed.
WEB_TEST_DEBS := chromium chromium-driver python3-selenium libjs-chart.js
.PHONY: deps-web check-web
# Chromium's driver reaches the browser at "localhost": a root without that name (a
# debootstrap minbase root has no /etc/hosts) gets the line every Debian install has.
deps-web: deps
	$(call install_debs,$(WEB_TEST_DEBS))
	@getent hosts localhost >/dev/null || { [ "$$(id -u)" = 0 ] && \
	  echo '127.0.0.1 localhost' >>/etc/hosts && \
	  echo "deps-web: localhost did not resolve: added '127.0.0.1 localhost' to /etc/hosts"; } || \
	  { echo "deps-web: localhost does not resolve; add '127.0.0.1 localhost' to /etc/hosts" >&2; exit 1; }
check-web: deps-web $(FIBERCTL) $(BUILD)/fiberd $(BUNDLED_PLUGINS)
	/usr/bin/python3 tests/web/test_web.py $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR) \
		$(BUILD)/web-dashboard.png
	/usr/bin/python3 tests/web/test_web_tiers.py $(FIBERCTL) $(BUILD)/fiberd $(PLUGIN_BUILD_DIR)

# check-python: the Python client (client/python/fiberd) with pytest against a real fiberd
# that each test module starts (tests/python/). Debian's python3 on purpose: it is the one
# python3-msgpack and python3-pytest (DEBS) are installed for.
PYTHON ?= /usr/bin/python3
.PHONY: check-python
check-python: $(BUILD)/fiberd $(BUNDLED_PLUGINS) $(BUILD)/tests/plugins/log_lines.so
	FIBERD_BIN=$(abspath $(BUILD)/fiberd) FIBERD_PLUGIN_DIR=$(abspath $(PLUGIN_BUILD_DIR)) \
		FIBERD_TEST_PLUGINS=$(abspath $(BUILD)/tests/plugins/log_lines.so) \
		PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -p no:cacheprovider -q tests/python
