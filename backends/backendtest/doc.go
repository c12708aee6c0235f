// Package backendtest is the conformance suite every backends.Backend runs
// (reference, emu, and the cuda backend behind its build tag), in the style
// of gonum's blas/testblas: the implementation's test calls
//
//	backendtest.Run(t, func(t *testing.T, dir string) backends.Backend { ... })
//
// and Run writes small deterministic models of every architecture (llama
// with llama3 RoPE scaling, mistral with an untied BF16 head, qwen2 with q/k/v
// biases, qwen3 with q/k norms and head_dim ≠ hidden/heads) into
// t.TempDir(), opens each through newBackend, and checks the contract of
// package backends:
//
//   - Info reports the model's vocabulary;
//   - NLL is finite, non-negative and, when the backend is a LogProber,
//     equals −log_softmax[target] of its own LogProbs rows, which are
//     normalised (log Σ exp = 0);
//   - KL of the backend against its own log-probs is ≈ 0 (both KL coverages),
//     and BaseNLL equals NLL;
//   - TopK ids are distinct, in range, sorted by probability, ties broken by
//     lower id, and the first is the arg-max of the LogProbs row;
//   - a window with First > 1 scores the suffix of the First = 1 window;
//   - two identical calls give bit-identical results (unless disabled);
//   - token ids outside [0, vocab), an empty window, First outside
//     [1, len] and a cancelled context give errors, never a panic; First =
//     len gives empty scores;
//   - Probe, when implemented, returns [T][hidden] embeddings equal to the
//     checkpoint's embedding rows (within tolerance);
//   - NLL agrees with the independent float64 oracle (package
//     internal/oracle, reading the same checkpoint) within an accuracy set by
//     Info().Precision (see Accuracy): without this, a backend computing a
//     wrong but self-consistent distribution would pass every check above.
//
// It fails the test (t.Errorf) naming the architecture, window and position
// of every violation. The models are written by package fixtures
// (fixtures.WriteSuiteModel, also exported here as WriteModel); package
// internal/oracle gives the independent expected values.
package backendtest
