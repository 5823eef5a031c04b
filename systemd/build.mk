# systemd/ — fiberd.service (Type=notify), fiberd.socket, fiberd-metrics.socket (the
# Prometheus scrape endpoint, installed disabled), the per-user pair in systemd/user/
# (fiberd --user in a user manager), the sysctl.d drop-in raising vm.max_map_count, their
# verification and `make install`.
#
# The committed units name /usr/local (the default PREFIX); the installed copies and the
# copies verified by check-systemd are rewritten to the real paths with sed.
SYSTEMD_UNITS := systemd/fiberd.service systemd/fiberd.socket systemd/fiberd-metrics.socket
SYSTEMD_USER_UNITS := systemd/user/fiberd.service systemd/user/fiberd.socket
# Drop-ins an operator copies to /etc/systemd/system/fiberd.service.d/ when a mode needs
# them (network.conf: the fleet's Redis over TCP); installed under $(FIBERD_DOC_DIR).
SYSTEMD_DROPINS := systemd/fiberd.service.d/network.conf
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
SYSTEMD_USER_UNIT_DIR ?= $(PREFIX)/lib/systemd/user
SYSCTL_DIR ?= $(PREFIX)/lib/sysctl.d
# the sed that points a committed unit at the installed fiberd and plugins
SYSTEMD_UNIT_SED = sed -e 's\#/usr/local/bin/fiberd\#$(PREFIX)/bin/fiberd\#' \
	-e 's\#/usr/local/bin/fiberctl\#$(PREFIX)/bin/fiberctl\#' \
	-e 's\#/usr/local/lib/fiberd/plugins\#$(FIBERD_PLUGIN_DIR)\#'

# check-systemd: `systemd-analyze verify` on the units (`--user verify` on the per-user
# pair), with ExecStart pointing at the freshly built fiberd (verify checks that the
# binary exists) and MANPATH at the built man pages (verify runs man(1) on each
# Documentation=man:...); any warning fails.
.PHONY: check-systemd
check-systemd: $(FIBERD) $(FIBERCTL) $(MAN_PAGES)
	@mkdir -p $(BUILD)/systemd-verify/user
	@for u in $(SYSTEMD_UNITS) $(SYSTEMD_USER_UNITS); do \
	  sed -e 's#/usr/local/bin/fiberd#$(abspath $(FIBERD))#' \
	      -e 's#/usr/local/bin/fiberctl#$(abspath $(FIBERCTL))#' \
	      -e 's#/usr/local/lib/fiberd/plugins#$(abspath $(BUILD))/plugins#' \
	      $$u > $(BUILD)/systemd-verify/$${u#systemd/}; \
	done
	@out=$$(cd $(BUILD)/systemd-verify && MANPATH=$(abspath $(MAN_BUILD_DIR)): systemd-analyze verify $(notdir $(SYSTEMD_UNITS)) 2>&1); \
	rc=$$?; \
	if [ $$rc -ne 0 ] || [ -n "$$out" ]; then \
	  echo "$$out" >&2; echo "check-systemd: systemd-analyze verify failed (rc=$$rc)" >&2; exit 1; \
	fi
	@mkdir -p -m 0700 $(BUILD)/systemd-verify/run
	@out=$$(cd $(BUILD)/systemd-verify/user && MANPATH=$(abspath $(MAN_BUILD_DIR)): XDG_RUNTIME_DIR=$(abspath $(BUILD))/systemd-verify/run systemd-analyze --user verify $(notdir $(SYSTEMD_USER_UNITS)) 2>&1); \
	rc=$$?; \
	if [ $$rc -ne 0 ] || [ -n "$$out" ]; then \
	  echo "$$out" >&2; echo "check-systemd: systemd-analyze --user verify failed (rc=$$rc)" >&2; exit 1; \
	fi; echo "check-systemd: ok"

# install: honours PREFIX and DESTDIR. bin/fiberd, the units (paths rewritten), the sysctl
# drop-in, the unit drop-ins operators copy; install-plugins (plugins/build.mk: bundled plugins, fiberd/plugin.h,
# fiberd-plugin.pc) and install-client (client/build.mk: fiberctl) run as prerequisites.
# Afterwards: `systemctl daemon-reload && sysctl --system`.
.PHONY: install-daemon
install: install-daemon
install-daemon: $(FIBERD) install-plugins install-units
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(FIBERD) $(DESTDIR)$(PREFIX)/bin/fiberd

# The units alone (no build: tests/install.sh installs them for another PREFIX): the
# system pair into $(SYSTEMD_UNIT_DIR), the per-user pair into $(SYSTEMD_USER_UNIT_DIR)
# (`systemctl --user enable --now fiberd.socket`), the sysctl drop-in.
.PHONY: install-units
install-units:
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR) $(DESTDIR)$(SYSCTL_DIR)
	for u in $(SYSTEMD_UNITS); do \
	  $(SYSTEMD_UNIT_SED) $$u > $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$(basename $$u); \
	  chmod 644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$(basename $$u); \
	done
	for u in $(SYSTEMD_USER_UNITS); do \
	  $(SYSTEMD_UNIT_SED) $$u > $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/$$(basename $$u); \
	  chmod 644 $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/$$(basename $$u); \
	done
	install -m 644 systemd/90-fiberd.conf $(DESTDIR)$(SYSCTL_DIR)/90-fiberd.conf
	install -d $(DESTDIR)$(FIBERD_DOC_DIR)/fiberd.service.d
	install -m 644 $(SYSTEMD_DROPINS) $(DESTDIR)$(FIBERD_DOC_DIR)/fiberd.service.d/

# uninstall: what install-daemon put (the units, the sysctl drop-in, bin/fiberd).
# Afterwards: `systemctl daemon-reload`.
.PHONY: uninstall-daemon
uninstall: uninstall-daemon
uninstall-daemon:
	rm -f $(DESTDIR)$(PREFIX)/bin/fiberd $(DESTDIR)$(SYSCTL_DIR)/90-fiberd.conf \
		$(SYSTEMD_DROPINS:systemd/%=$(DESTDIR)$(FIBERD_DOC_DIR)/%) \
		$(SYSTEMD_UNITS:systemd/%=$(DESTDIR)$(SYSTEMD_UNIT_DIR)/%) \
		$(SYSTEMD_USER_UNITS:systemd/user/%=$(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/%)
