// Package eval is evaluation as a library: the one path every qppl command
// that scores a model takes (eval, compare, verify, demo, merge).
//
// It owns:
//   - Prepare (prepare.go): a data source (text file, token file or named
//     dataset) → joined text → token ids → windows → data-spec hash, with
//     the method's special tokens, llama.cpp's trailing-newline trim and BOS
//     fallback applied in one place;
//   - Evaluate (evaluate.go): a backend over the windows → the reduced
//     result, with the base log-prob store (read or written), resume from a
//     run directory's journal, shards and timing;
//   - the run identity (identity.go): everything that decides a result but
//     the window scores, as the journal header of a run directory, and
//     Reduce, which turns window results and an identity into the result
//     JSON (eval, merge and resumed runs write exactly the same bytes);
//   - run directories (rundir.go) and the merge of shard journals
//     (merge.go).
//
// It never opens a concrete backend (the caller passes a backends.Backend)
// and never parses flags. Errors that come from the user's input (files,
// options, a run directory of another run) are *InputError, which the
// command maps to exit code 2; an evaluation stopped by its context is
// reported with the windows it saved (*Interrupted).
//
// Import direction: eval → compare → backends; eval → dataset, tokenizer,
// journal (compare/deps_test.go holds it to that). It finds no files on the
// network itself: the command passes a resolver (dataset/hub). Package
// compare/suite (several models on the same tokens) builds on it.
package eval
