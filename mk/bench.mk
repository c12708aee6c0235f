# Benchmarks (owned by the reference backend; other packages add rows).
#
#   make bench            runs every target listed in BENCH_TARGETS, then
#                         prints one table of their results.
#
# To add a row: append a target name to BENCH_TARGETS and write that target
# so that it appends `go test -bench` result lines (the lines starting with
# "Benchmark") to $(BENCH_OUT), for example:
#
#   BENCH_TARGETS += bench-emu
#   bench-emu:
#   	$(GO) test -run '^$$' -bench 'Forward' -benchtime=1x ./backends/cuda/emu | tee -a $(BENCH_OUT)
#
# Custom metrics reported with b.ReportMetric (tokens/s, peakRSS_MB, ...)
# become table columns automatically.

BENCH_OUT ?= bin/bench.txt
# Set QPPL_BENCH_MODEL_DIR to an existing directory to generate the random
# SmolLM2-shaped model once and reuse it across runs.
QPPL_BENCH_MODEL_DIR ?=
export QPPL_BENCH_MODEL_DIR

# Set QPPL_BENCH_ANCHOR_DIR to keep the anchor's generated models (the 1B
# W4A16 one takes minutes to write) across runs.
QPPL_BENCH_ANCHOR_DIR ?=
BENCH_ANCHOR_FLAGS ?=

BENCH_TARGETS += bench-reference bench-anchor

.PHONY: bench bench-reference bench-anchor

bench:
	@mkdir -p $(dir $(BENCH_OUT)) && : > $(BENCH_OUT)
	@$(MAKE) --no-print-directory $(BENCH_TARGETS)
	@echo
	@awk "$$QPPL_BENCH_TABLE_AWK" $(BENCH_OUT)

# Reference backend: one 512-token window of a random BF16 model shaped like
# SmolLM2-135M (vocab 49152, hidden 576, 30 layers, 9/3 heads, 1536).
bench-reference:
	$(GO) test -run '^$$' -bench 'BenchmarkForward_SmolLM2Shaped_T512' -benchtime=1x -count=1 ./reference | tee -a $(BENCH_OUT)

# Whole-process `qppl eval` of one 512-token window against the PyTorch
# float64 + OpenBLAS anchor of ../shared/bench, interleaved (torch, qppl)
# pairs, for a SmolLM2-135M-shaped BF16 model (ratio x_torch) and a
# Llama-3.2-1B-shaped W4A16 model (hidden 2048, 16 layers, vocab 128256):
# tokens/s, GFLOP/s, % of the machine's float64 peak, peak RSS. Without
# python3-torch the torch rows are skipped with a message.
bench-anchor: build
	$(GO) run ./internal/benchanchor -qppl $(BIN) -shared ../shared $(if $(QPPL_BENCH_ANCHOR_DIR),-dir $(QPPL_BENCH_ANCHOR_DIR)) $(BENCH_ANCHOR_FLAGS) | tee -a $(BENCH_OUT)

# Formats `go test -bench` result lines as a table: one row per benchmark,
# one column per unit (s/op first, then custom metrics in order of first
# appearance).
define QPPL_BENCH_TABLE_AWK
/^Benchmark/ {
	name = $$1
	sub(/-[0-9]+$$/, "", name)
	if (!(name in seen)) { seen[name] = 1; names[++nn] = name }
	for (i = 3; i + 1 <= NF; i += 2) {
		v = $$i; u = $$(i + 1)
		if (u == "ns/op") { v = sprintf("%.3f", v / 1e9); u = "s/op" }
		if (!(u in useen)) { useen[u] = 1; units[++nu] = u }
		val[name, u] = v
	}
}
END {
	if (nn == 0) { print "no benchmark results"; exit 1 }
	w = 10
	for (i = 1; i <= nn; i++) if (length(names[i]) > w) w = length(names[i])
	line = sprintf("%-" w "s", "benchmark")
	for (j = 1; j <= nu; j++) line = line sprintf("  %14s", units[j])
	print line
	for (i = 1; i <= nn; i++) {
		line = sprintf("%-" w "s", names[i])
		for (j = 1; j <= nu; j++) {
			v = ((names[i], units[j]) in val) ? val[names[i], units[j]] : "-"
			line = line sprintf("  %14s", v)
		}
		print line
	}
}
endef
export QPPL_BENCH_TABLE_AWK
