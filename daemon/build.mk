# daemon/ — fiberd itself: main, config, job table, dispatcher, server, methods, stats, the
# plugin host. Links the runtime (libsched), the wire codec (libipc) and the plugin loader
# (plugins/build.mk's $(LOADER_OBJS)).
# libmicrohttpd serves the Prometheus scrape endpoint (daemon/obs/metrics_http.c).
DAEMON_PKGS := msgpack inih libsystemd sqlite3 hiredis libcrypto libmicrohttpd
DAEMON_CFLAGS = $(shell pkg-config --cflags $(DAEMON_PKGS) 2>/dev/null)
DAEMON_LIBS = $(shell pkg-config --libs $(DAEMON_PKGS) 2>/dev/null || echo -lmsgpackc -linih -lsystemd -lsqlite3 -lhiredis -lcrypto -lmicrohttpd) -ldl

FIBERD_PLUGIN_DIR ?= $(or $(PLUGIN_INSTALL_DIR),$(PREFIX)/lib/fiberd/plugins)
DAEMON_SRCS := $(sort $(wildcard daemon/*.c daemon/*/*.c))
DAEMON_OBJS := $(DAEMON_SRCS:%.c=$(BUILD)/%.o)
FIBERD := $(BUILD)/fiberd

# The configuration file read by default: $(SYSCONFDIR)/fiberd/fiberd.conf, /etc even when
# PREFIX is /usr/local (where an operator looks first).
SYSCONFDIR ?= /etc
FIBERD_CONFIG_FILE := $(SYSCONFDIR)/fiberd/fiberd.conf
# Where `make install` puts the drop-ins operators copy (systemd/build.mk): the redis
# store's error names the network one.
FIBERD_DOC_DIR ?= $(PREFIX)/share/doc/fiberd
$(DAEMON_OBJS): CPPFLAGS += -DFIBERD_PLUGIN_DIR='"$(FIBERD_PLUGIN_DIR)"' \
	-DFIBERD_CONFIG_FILE='"$(FIBERD_CONFIG_FILE)"' -DFIBERD_DOC_DIR='"$(FIBERD_DOC_DIR)"'

# The default plugin directory and config file are compiled in: rebuild config.o when
# PREFIX or SYSCONFDIR changes
# (`make install PREFIX=/usr` after a plain `make`).
DAEMON_PREFIX_STAMP := $(BUILD)/daemon/plugin-dir.stamp
.PHONY: daemon-prefix-check
daemon-prefix-check:
$(DAEMON_PREFIX_STAMP): daemon-prefix-check
	@mkdir -p $(dir $@)
	@echo '$(FIBERD_PLUGIN_DIR) $(FIBERD_CONFIG_FILE) $(FIBERD_DOC_DIR)' | cmp -s - $@ 2>/dev/null || \
		echo '$(FIBERD_PLUGIN_DIR) $(FIBERD_CONFIG_FILE) $(FIBERD_DOC_DIR)' > $@
$(BUILD)/daemon/config.o $(BUILD)/daemon/main.o $(BUILD)/daemon/store/store-redis-conn.o: \
	$(DAEMON_PREFIX_STAMP)
$(DAEMON_OBJS): CFLAGS += $(DAEMON_CFLAGS)

# -rdynamic is deliberately absent: plugins see nothing of the daemon but the host table,
# and the C library's blocking calls the runtime's hooks define (scheduler/hook.sym), so
# that plugin code and the libraries it links park job fibers instead of workers.
# hook.o is named first so that the executable defines every hooked call.
$(FIBERD): $(DAEMON_OBJS) $(LOADER_OBJS) $(LIBIPC) $(LIBSCHED) scheduler/hook.sym
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -Wl,--dynamic-list=scheduler/hook.sym -o $@ $(BUILD)/scheduler/hook.o \
		$(DAEMON_OBJS) $(LOADER_OBJS) $(LIBIPC) $(LIBSCHED) \
		$(SCHED_LIBS) $(DAEMON_LIBS) $(LOADER_LIBS)

all: $(FIBERD)

# The configuration file an operator edits: every key, commented out, with its default
# (daemon/fiberd.conf; tests/integration/daemon_config.c checks it against the parser).
# The committed file names the defaults of PREFIX=/usr/local; the installed copy is
# rewritten to the PREFIX and SYSCONFDIR it is installed with (FIBERD_CONF_SED), so its
# plugin_dir is the one this fiberd was built for (tests/install.sh checks PREFIX=/usr).
# An existing file is the operator's: install leaves it alone, uninstall removes the file
# only while it is still the one shipped.
FIBERD_CONF_SED := sed -e 's\#/usr/local/lib/fiberd/plugins\#$(FIBERD_PLUGIN_DIR)\#' \
	-e 's\#/etc/fiberd/fiberd.conf\#$(FIBERD_CONFIG_FILE)\#' daemon/fiberd.conf
.PHONY: install-config uninstall-config
install: install-config
install-config:
	install -d $(DESTDIR)$(SYSCONFDIR)/fiberd
	@if [ -e $(DESTDIR)$(FIBERD_CONFIG_FILE) ]; then \
	  echo "install: keeping the existing $(FIBERD_CONFIG_FILE)"; \
	else \
	  echo "install daemon/fiberd.conf as $(DESTDIR)$(FIBERD_CONFIG_FILE) (paths of PREFIX=$(PREFIX))"; \
	  $(FIBERD_CONF_SED) >$(DESTDIR)$(FIBERD_CONFIG_FILE).tmp && \
	  chmod 644 $(DESTDIR)$(FIBERD_CONFIG_FILE).tmp && \
	  mv $(DESTDIR)$(FIBERD_CONFIG_FILE).tmp $(DESTDIR)$(FIBERD_CONFIG_FILE); \
	fi
uninstall: uninstall-config
uninstall-config:
	@if $(FIBERD_CONF_SED) | cmp -s - $(DESTDIR)$(FIBERD_CONFIG_FILE); then \
	  rm -f $(DESTDIR)$(FIBERD_CONFIG_FILE); \
	  rmdir $(DESTDIR)$(SYSCONFDIR)/fiberd 2>/dev/null || true; \
	elif [ -e $(DESTDIR)$(FIBERD_CONFIG_FILE) ]; then \
	  echo "uninstall: keeping $(FIBERD_CONFIG_FILE): it was changed"; \
	fi

# ---- integration tests: tests/integration/daemon_*.c, one criterion binary each, with the
# harness (fiberd_harness.c) and the client library; they start the fiberd built above with
# the bundled plugins ($(BUNDLED_PLUGINS)) and the bad test plugins ($(TEST_PLUGINS)).
# client/build.mk is included after this file, so its variables are still empty while
# these prerequisite lists are read: name its outputs here (same paths as there).
DAEMON_LIBCLIENT := $(BUILD)/libfiberclient.a
DAEMON_FIBERCTL := $(BUILD)/fiberctl
DAEMON_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,\
	$(sort $(wildcard tests/integration/daemon_*.c)))
DAEMON_TEST_HARNESS := $(BUILD)/tests/integration/fiberd_harness.o
DAEMON_TEST_DEFS := -DFIBERD_BIN='"$(abspath $(FIBERD))"' \
	-DFIBERD_PLUGIN_BUILD_DIR='"$(abspath $(BUILD))/plugins"' \
	-DFIBERD_TEST_PLUGIN_DIR='"$(abspath $(BUILD))/tests/plugins"' \
	-DFIBERD_SHIPPED_CONFIG='"$(abspath daemon/fiberd.conf)"' \
	-DFIBERD_DEFAULT_CONFIG='"$(FIBERD_CONFIG_FILE)"' \
	-DFIBERCTL_BIN='"$(abspath $(DAEMON_FIBERCTL))"'
$(DAEMON_TESTS:%=%.o) $(DAEMON_TEST_HARNESS): CPPFLAGS += $(DAEMON_TEST_DEFS)
$(DAEMON_TESTS): $(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o \
		$(DAEMON_TEST_HARNESS) $(DAEMON_LIBCLIENT) $(LIBIPC) $(FIBERD) $(BUNDLED_PLUGINS) \
		$(TEST_PLUGINS)
	$(CC) $(LDFLAGS) -o $@ $< $(DAEMON_TEST_HARNESS) $(DAEMON_LIBCLIENT) $(LIBIPC) $(IPC_LIBS) \
		-lcrypto -lcriterion $(DAEMON_TEST_EXTRA_LIBS)
# daemon_store.c reads the job store's database after fiberd stopped
$(BUILD)/tests/integration/daemon_store: private DAEMON_TEST_EXTRA_LIBS = -lsqlite3
# daemon_metrics.c checks `metrics` with tests/integration/openmetrics_check.c
# and runs fiberctl; daemon_metrics_http.c checks the scrape endpoint's text with it
DAEMON_METRICS_TEST := $(BUILD)/tests/integration/daemon_metrics
DAEMON_METRICS_HTTP_TEST := $(BUILD)/tests/integration/daemon_metrics_http
DAEMON_OM_CHECK := $(BUILD)/tests/integration/openmetrics_check.o
$(DAEMON_METRICS_TEST): $(DAEMON_OM_CHECK) $(DAEMON_FIBERCTL)
$(DAEMON_METRICS_HTTP_TEST): $(DAEMON_OM_CHECK)
# private: not inherited by the prerequisites (the plugins, fiberd)
$(DAEMON_METRICS_TEST) $(DAEMON_METRICS_HTTP_TEST): private LDFLAGS += $(DAEMON_OM_CHECK)
# the fleet tests (daemon_redis.c, daemon_redis_sched.c, daemon_redis_schedules.c,
# daemon_redis_outage.c) start a
# private redis-server with tests/integration/redis_fleet.c
DAEMON_REDIS_TESTS := $(BUILD)/tests/integration/daemon_redis \
	$(BUILD)/tests/integration/daemon_redis_sched \
	$(BUILD)/tests/integration/daemon_redis_schedules \
	$(BUILD)/tests/integration/daemon_redis_outage
DAEMON_REDIS_FLEET := $(BUILD)/tests/integration/redis_fleet.o
$(DAEMON_REDIS_TESTS): $(DAEMON_REDIS_FLEET)
$(DAEMON_REDIS_TESTS): private LDFLAGS += $(DAEMON_REDIS_FLEET)
# daemon_socket.c, daemon_list.c, daemon_fiberctl.c and daemon_joblines.c run fiberctl too
$(BUILD)/tests/integration/daemon_socket $(BUILD)/tests/integration/daemon_list \
	$(BUILD)/tests/integration/daemon_fiberctl \
	$(BUILD)/tests/integration/daemon_joblines: $(DAEMON_FIBERCTL)
INTEGRATION_TESTS += $(DAEMON_TESTS)

# ---- make demo: sha256 of every file under /usr/include through fiberctl batch, checked
# against sha256sum (daemon/demo.sh). DEMO_DIR=... picks another tree.
demo: $(FIBERD) $(DAEMON_FIBERCTL) $(BUNDLED_PLUGINS)
	FIBERD=$(abspath $(FIBERD)) FIBERCTL=$(abspath $(DAEMON_FIBERCTL)) \
		PLUGIN_DIR=$(abspath $(PLUGIN_BUILD_DIR)) sh daemon/demo.sh
# daemon_inplace.c (plugins in place) runs fiberctl too
$(BUILD)/tests/integration/daemon_inplace: $(DAEMON_FIBERCTL)
$(BUILD)/tests/integration/daemon_creds: $(DAEMON_FIBERCTL)
