// Package compare turns a token stream into evaluation windows, drives any
// backends.Backend over them and reduces the per-window results into
// perplexity and KL-divergence statistics.
//
// It owns:
//   - the windowing methods (compare_q, exl3-ppl, llamacpp, hf-strided,
//     lm-eval), each producing []backends.Window;
//   - the Runner, which scores windows in order, reports progress and turns
//     each window's scores into a WindowResult;
//   - Reduce, a pure function from []WindowResult (in window order) to a
//     Result, so sharded or resumed runs give bit-identical statistics;
//   - the statistics (PPL ± SE, bootstrap interval, KLD, Δp, top agreement);
//   - the base log-prob store (llama.cpp's 16-bit --kl-divergence-base file
//     and lossless f32/f64 variants), keyed by data spec and model hashes;
//   - the JSON result types (result.go) and per-token dumps.
//
// Resumable and sharded runs (issue 7) build on three pieces: Runner.Skip
// (SkipFunc leaves out journaled windows and windows of other shards),
// Runner.OnWindow (called with each finished WindowResult, in order, before
// the next window starts: append WindowResult.MarshalBinary to the journal
// there), and Reduce over the union of the journaled and new results.
//
// It imports only backends and the standard library; it never names a
// concrete backend.
//
// Failure model: bad options and mismatched inputs are returned as errors
// naming the offending value or file; a NaN or Inf produced by a backend is
// an error naming the window and position; nothing is dropped silently.
package compare
