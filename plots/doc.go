// Package plots draws compare_q-style charts of quantization results with
// gonum.org/v1/plot: bits per weight (or VRAM) against perplexity or KL
// divergence, one colour per format family, and per-model KL-divergence
// distributions drawn from the percentiles stored in a result set.
//
// Input is a slice of Model values (built from package compare results by
// the caller) and Options. Output is PNG, SVG or PDF, chosen by the file
// extension or format name, written atomically by Save.
//
// Layout. The chart is drawn on one canvas: a centred title and subtitle, a
// legend row of format families, then the data area. Families come from the
// first word of a label; a "[colour]" tag in a label (as in ExLlamaV3's
// compare_q) forces that point's colour and is not printed. Points of one
// family are joined by a dotted line sorted by x. Every point carries a
// two-line label (label, value) placed by a deterministic greedy algorithm
// (placeLabels): candidate boxes around the point, then on rings further
// away, first fit without collision against other labels, point markers and
// the data-area border, with a leader line when the label is displaced.
//
// Determinism. The same models and options give byte-identical SVG output
// (PNG too; PDF embeds a creation date). No package-level state is mutated.
//
// Errors. Invalid options, an unknown format, no plottable points, or a
// model lacking the requested metric are returned as errors naming the
// model; nothing is written on error. Points that cannot be drawn (a
// non-positive value on a log axis, filtered by MaxX/MaxY/Mask) are dropped
// and reported in Report.Dropped, never silently.
package plots
