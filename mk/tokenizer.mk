# Tokenizer (owned by tokenizer/).
#
#   make bench-tokenizer   encode the 1.3 MB WikiText-2 test corpus with the
#                          llama3, mistral and gpt2 tokenizer.json files on one
#                          core (needs ../shared; skipped without it)
#   make fuzz-tokenizer    fuzz the tokenizer.json parser and the split
#                          scanners (against regexp2), FUZZTIME each
#
# `make fuzz` (mk/fuzz.mk) runs the FUZZ_TARGETS below with the others.

FUZZTIME     ?= 20s
FUZZMINTIME  ?= 2s
FUZZPARALLEL ?= 1
BENCH_OUT    ?= bin/bench.txt

FUZZ_TARGETS += ./tokenizer:FuzzLoad ./tokenizer:FuzzScanner

BENCH_TARGETS += bench-tokenizer

.PHONY: bench-tokenizer fuzz-tokenizer

bench-tokenizer:
	@mkdir -p $(dir $(BENCH_OUT))
	GOMAXPROCS=1 $(GO) test -run '^$$' -bench 'BenchmarkEncode_WikiText2' -benchtime=3x -count=1 ./tokenizer | tee -a $(BENCH_OUT)

fuzz-tokenizer:
	@set -e; for fn in FuzzLoad FuzzScanner; do \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) \
			-fuzzminimizetime $(FUZZMINTIME) -parallel $(FUZZPARALLEL) ./tokenizer; \
	done
