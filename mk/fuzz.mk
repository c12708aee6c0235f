# make fuzz: run every fuzz target for a bounded time each (issue 7).
#
# A package adds its targets as PKG:FuzzName, in its own mk/*.mk fragment
# or here, e.g.
#   FUZZ_TARGETS += ./tokenizer:FuzzLoad
# The seed corpora in PKG/testdata/fuzz/FuzzName also run in `make test`.
# A crash stops the run; go test writes the failing input into
# PKG/testdata/fuzz/FuzzName, where it becomes a regression test.

FUZZTIME     ?= 20s
# Minimizing a new interesting input may take at most this long (the
# default, 60s, can exceed the whole budget).
FUZZMINTIME  ?= 2s
FUZZPARALLEL ?= 1

FUZZ_TARGETS += ./checkpoint:FuzzOpen
FUZZ_TARGETS += ./checkpoint:FuzzParseConfig
FUZZ_TARGETS += ./checkpoint:FuzzParseIndex

.PHONY: fuzz fuzz-list

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== fuzz $$pkg $$fn for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) \
			-fuzzminimizetime $(FUZZMINTIME) -parallel $(FUZZPARALLEL) $$pkg; \
	done

fuzz-list:
	@for t in $(FUZZ_TARGETS); do echo $$t; done

# quant (helper E): quantization_config parser and packed-tensor decoders.
FUZZ_TARGETS += ./quant:FuzzParse
FUZZ_TARGETS += ./quant:FuzzOpen
