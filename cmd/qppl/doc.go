// Command qppl measures the exact perplexity and KL divergence of quantized
// LLM checkpoints.
//
// Usage:
//
//	qppl eval     --model DIR|FILE.gguf (--text FILE | --tokens FILE.i32 | --dataset wikitext2) [options]
//	qppl compare  (-d data.json -m models.json | --base DIR --model DIR --label L ...) [options]
//	qppl plot     RESULTS.json... --out FILE.{png,svg,pdf}
//	qppl verify   --model DIR --backends reference,emu|cuda
//	qppl tokenize --tokenizer DIR --text FILE --out FILE.i32
//	qppl quantize --model DIR --scheme S --out DIR
//	qppl convert  --model DIR --to gguf --out FILE.gguf [--type f32|f16]
//	qppl inspect  --model DIR
//	qppl fixture  --arch MODEL_TYPE --out DIR       (qppl fixture --help lists them)
//	qppl merge    DIR...
//	qppl demo
//
// The package is wiring only: each command turns its flags into an options
// struct and calls a run function (eval.go, compare.go, ...); openBackend
// in backend.go is the one place that names concrete backends (GGUF
// models: ggufmodel.go). main calls
// run (app.go), which maps every error to an exit code:
//
//	0        ok
//	1        evaluation error (e.g. a window produced NaN/Inf)
//	2        usage or input error: bad flags (one line on stderr, nothing on
//	         stdout), malformed or mismatched files, outputs that cannot be
//	         written (checked before a run starts)
//	3        regression (compare --baseline) or verify beyond tolerance
//	130/143  interrupted by SIGINT/SIGTERM; with --run-dir, the command that
//	         resumes is printed
//
// Results go to stdout (or the --json/--out files, written atomically);
// progress, warnings and errors go to stderr. A panic is reported as an
// internal error (exit 1), never as a crash.
package main
