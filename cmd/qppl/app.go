package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes (documented in docs/runs.md and README.md).
const (
	exitOK        = 0
	exitError     = 1   // evaluation error
	exitUsage     = 2   // usage or input error
	exitRegressed = 3   // compare --baseline or verify beyond tolerance
	exitSIGINT    = 130 // interrupted by SIGINT (128 + 2)
	exitSIGTERM   = 143 // interrupted by SIGTERM (128 + 15)
)

// exitError wraps an error with the process exit code it maps to.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// usageErr marks err as a usage or input error (exit 2).
func usageErr(err error) error { return &codedError{exitUsage, err} }

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:           "qppl",
		Usage:          "exact perplexity and KL divergence of quantized LLM checkpoints",
		Reader:         stdin,
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {}, // run maps errors to codes
		Commands: []*cli.Command{
			newEvalCmd(),
			newCompareCmd(),
			newPlotCmd(),
			newVerifyCmd(),
			newTokenizeCmd(),
			newQuantizeCmd(),
			newInspectCmd(),
			newFixtureCmd(),
			newMergeCmd(),
			newDemoCmd(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintf(c.App.Writer, "qppl %s\n", version)
					return nil
				},
			},
		},
	}
}

// run executes the command line and returns the process exit code. A
// panic never escapes it: it is reported as an internal error (exit 1).
// SIGINT and SIGTERM cancel the command's context (signal.go); an
// interrupted command exits 130 or 143 and, when it has a --run-dir,
// prints the command that resumes it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "qppl: internal error: %v (please report this bug with the command line)\n%s", r, debug.Stack())
			code = exitError
		}
	}()
	ctx, in := watchInterrupts(context.Background(), stderr)
	defer in.close()
	err := newApp(stdin, stdout, stderr).RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "qppl: %v\n", err)
	if s := in.signal(); s != nil {
		var ie *interruptedError
		if errors.As(err, &ie) && ie.runDir != "" {
			fmt.Fprintf(stderr, "qppl: resume with:\n  %s\n", shellQuote(args))
		}
		return signalCode(s)
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitError
}
