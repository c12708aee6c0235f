# make fuzz: run every fuzz target of the repository for a bounded time each
# (issue 7), e.g. `make fuzz FUZZTIME=10s`.
#
# Targets are discovered: every `func FuzzXxx(` in a *_test.go file (outside
# testdata and hidden directories) runs, so a new fuzz test needs no Makefile
# line. FUZZ_TARGETS (PKG:FuzzName, added by package fragments in mk/*.mk)
# is merged in, duplicates removed. `make fuzz-list` prints the list.
#
# The seed corpora in PKG/testdata/fuzz/FuzzName also run in `make test`.
# A failing target does not stop the others; the run fails at the end and
# names them. One failure is not a finding: go1.26's fuzz coordinator can
# report a bare "context deadline exceeded" when -fuzztime expires while a
# worker is mid-input (golang/go#75804, fixed in go1.27); a run that ends so
# and wrote no input is reported as ignored, not failed. go test writes each failing input into
# PKG/testdata/fuzz/FuzzName, where it becomes a regression test once
# checked in.

FUZZTIME     ?= 20s
# Minimizing a new interesting input may take at most this long (the
# default, 60s, can exceed the whole budget).
FUZZMINTIME  ?= 2s
FUZZPARALLEL ?= 1

# fuzz_discover prints PKG:FuzzName for every fuzz function in the tree.
define fuzz_discover
grep -rE --include='*_test.go' --exclude-dir=testdata --exclude-dir='.?*' --exclude-dir=bin \
	-o '^func Fuzz[A-Za-z0-9_]*\(' . 2>/dev/null | \
	sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($$|\1:\2|'
endef

.PHONY: fuzz fuzz-list

fuzz-list:
	@{ $(fuzz_discover); for t in $(FUZZ_TARGETS); do echo $$t; done; } | sort -u

fuzz:
	@targets=$$({ $(fuzz_discover); for t in $(FUZZ_TARGETS); do echo $$t; done; } | sort -u); \
	log=$$(mktemp); n=0; failed=""; flaked=""; \
	for t in $$targets; do \
		pkg=$${t%%:*}; fn=$${t##*:}; n=$$((n+1)); corpus="$$pkg/testdata/fuzz/$$fn"; \
		before=$$(ls "$$corpus" 2>/dev/null | wc -l); \
		echo "== fuzz $$pkg $$fn for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) \
			-fuzzminimizetime $(FUZZMINTIME) -parallel $(FUZZPARALLEL) $$pkg >"$$log" 2>&1; rc=$$?; \
		cat "$$log"; \
		after=$$(ls "$$corpus" 2>/dev/null | wc -l); \
		if [ $$rc -eq 0 ]; then :; \
		elif [ "$$after" -eq "$$before" ] && grep -qx '    context deadline exceeded' "$$log" && \
			! grep -qE 'panic:|Failing input written|build failed|setup failed' "$$log"; then \
			flaked="$$flaked $$t"; \
		else failed="$$failed $$t"; fi; \
	done; rm -f "$$log"; \
	if [ -n "$$flaked" ]; then echo "fuzz: ignored Go's fuzztime deadline race (golang/go#75804; no input written) in:$$flaked"; fi; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed (inputs in PKG/testdata/fuzz/)"; exit 1; fi; \
	echo "fuzz: $$n targets, no findings"
