# docs/ — the man pages (docs/man/*.scd, written in scdoc, built by `make`), the protocol
# and licence copies `make install` puts under share/doc/fiberd, and check-man.
#
# A page's source names @VERSION@, @PREFIX@, @PLUGIN_DIR@ and @CONFIG_FILE@; the built copies in
# $(BUILD)/man carry the build's PREFIX, and `make install` renders them again with the
# PREFIX of that install (it may differ from the build's), as plugins/build.mk does for
# the .pc file.
MAN_SRCS := $(sort $(wildcard docs/man/*.scd))
# built as $(BUILD)/man/man<section>/<page>, a tree man(1) and MANPATH can read (check-systemd
# points `systemd-analyze verify` at it for the units' Documentation=man:...)
man_section = $(lastword $(subst ., ,$(1)))
MAN_PAGES := $(foreach s,$(MAN_SRCS),$(BUILD)/man/man$(call man_section,$(s:.scd=))/$(notdir $(s:.scd=)))
MAN_BUILD_DIR := $(BUILD)/man
MAN_DIR ?= $(PREFIX)/share/man
DOC_DIR ?= $(PREFIX)/share/doc/fiberd
DOC_FILES := ipc/PROTOCOL.md LICENSE

# $(call gen_man,SOURCE,OUTPUT,PREFIX)
gen_man = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@PREFIX@|$(3)|g' \
	-e 's|@PLUGIN_DIR@|$(3)/lib/fiberd/plugins|g' -e 's|@CONFIG_FILE@|$(FIBERD_CONFIG_FILE)|g' $(1) | scdoc > $(2).tmp && mv $(2).tmp $(2)

define man_rule
$(BUILD)/man/man$(1)/%.$(1): docs/man/%.$(1).scd ipc/protocol.h | deps
	@mkdir -p $$(dir $$@)
	$$(call gen_man,$$<,$$@,$$(PREFIX))
endef
$(foreach sec,1 3 5 7 8,$(eval $(call man_rule,$(sec))))

all: $(MAN_PAGES)

.PHONY: install-docs uninstall-docs
install: install-docs
install-docs: $(MAN_PAGES)
	@set -e; for src in $(MAN_SRCS); do \
	  page=$$(basename $$src .scd); sec=$${page##*.}; \
	  install -d $(DESTDIR)$(MAN_DIR)/man$$sec; \
	  echo "  MAN $(MAN_DIR)/man$$sec/$$page"; \
	  $(call gen_man,$$src,$(DESTDIR)$(MAN_DIR)/man$$sec/$$page,$(PREFIX)); \
	  chmod 0644 $(DESTDIR)$(MAN_DIR)/man$$sec/$$page; \
	done
	install -d $(DESTDIR)$(DOC_DIR)
	install -m 0644 $(DOC_FILES) $(DESTDIR)$(DOC_DIR)/

uninstall: uninstall-docs
uninstall-docs:
	@set -e; for src in $(MAN_SRCS); do \
	  page=$$(basename $$src .scd); sec=$${page##*.}; \
	  rm -f $(DESTDIR)$(MAN_DIR)/man$$sec/$$page; \
	done
	rm -f $(addprefix $(DESTDIR)$(DOC_DIR)/,$(notdir $(DOC_FILES)))
	rmdir $(DESTDIR)$(DOC_DIR) 2>/dev/null || true

# check-man: every page renders with man(1) without a single warning (tests/man.sh; its
# self-test first proves that a broken page is caught).
.PHONY: check-man
check-man: $(MAN_PAGES)
	@bash tests/man.sh $(MAN_PAGES)
