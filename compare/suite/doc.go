// Package suite runs several models on identical token ids and collects one
// result set, as ExLlamaV3's compare_q does, with a content-addressed result
// cache and a regression gate.
//
// It owns:
//   - compare_q's data-spec and model-spec JSON files (ParseDataSpec,
//     ParseModelSpecs) and qppl's equivalent flags, mapped onto one Plan;
//   - Prepare: the token stream (tokenized once, cached on disk keyed by the
//     spec, the tokenizer file and the data file) and its windows;
//   - Run: the base model (compare_q's out_logits model, or --base) first,
//     then every other model with KL against it, each through an Evaluator
//     (the CLI supplies one that opens a backend and drives compare's
//     Runner), with results cached on disk keyed by the data spec hash, the
//     sha256 of each model's files, the backend and precision and the base;
//   - ResultSet, its JSON file (written atomically) and LoadResults, which
//     also reads single `qppl eval --json` results and compare_q's printed
//     result lists;
//   - Gate: the regression check of a result set against a baseline.
//
// Failure model: every spec and result file error names the file and the
// field; a chat template or other compare_q feature qppl cannot reproduce is
// an "unsupported" error, never approximated; foreign loaders (exllamav2,
// llamacpp, …) map to qppl's loader with a warning. Cache entries are only
// used when every key component matches, and are written atomically, so an
// interrupted run never leaves a partial entry.
package suite
