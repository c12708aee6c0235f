package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/eval"
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
		Version:        version, // qppl --version, as qppl version
		Reader:         stdin,
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {}, // run maps errors to codes
		OnUsageError:   onUsageError(""),
		Action:         rootAction,
		Commands: usageErrors([]*cli.Command{
			newEvalCmd(),
			newCompareCmd(),
			newPlotCmd(),
			newVerifyCmd(),
			newTokenizeCmd(),
			newQuantizeCmd(),
			newConvertCmd(),
			newInspectCmd(),
			newFixtureCmd(),
			newMergeCmd(),
			newDemoCmd(),
			newCacheCmd(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintf(c.App.Writer, "qppl version %s\n", version) // as qppl --version
					return nil
				},
			},
		}),
	}
}

// rootAction runs for "qppl" without a known command: help on stdout when
// there is no argument, else a usage error naming the unknown command (cli's
// own "No help topic" error would exit 3, the regression code).
func rootAction(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	return usageErr(fmt.Errorf("unknown command %q (see qppl --help)", c.Args().First()))
}

// usageErrors makes a flag that does not parse a usage error (exit 2) of
// every command, reported in one line on stderr instead of cli's help text
// on stdout.
func usageErrors(cmds []*cli.Command) []*cli.Command {
	for _, cmd := range cmds {
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = onUsageError(cmd.Name)
		}
	}
	return cmds
}

// onUsageError returns an OnUsageErrorFunc that maps a flag parsing error of
// the command name ("" for qppl itself) to a usage error pointing at its help.
func onUsageError(name string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		if name == "" {
			return usageErr(fmt.Errorf("%w (see qppl --help)", err))
		}
		return usageErr(fmt.Errorf("%s: %w (see qppl %s --help)", name, err, name))
	}
}

// checkOutputDirs checks, before a command runs, that the directory of each
// output file (flag name → path; "" = not given) exists and can be written
// in, so that a long run never ends in "no such file or directory" or
// "permission denied". runDir ("" = none) and its
// parents count as existing: the command creates them before it runs.
func checkOutputDirs(cmd string, outs map[string]string, runDir string) error {
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		p := outs[name]
		if p == "" || p == stdoutPath {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return fmt.Errorf("%s: --%s %s is a directory: give a file name", cmd, name, p)
		}
		d := filepath.Dir(p)
		if runDir != "" {
			if rel, err := filepath.Rel(d, filepath.Clean(runDir)); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				continue // d is runDir or one of its parents
			}
		}
		if fi, err := os.Stat(d); err != nil {
			return fmt.Errorf("%s: --%s %s: directory %s: %w", cmd, name, p, d, err)
		} else if !fi.IsDir() {
			return fmt.Errorf("%s: --%s %s: %s is not a directory", cmd, name, p, d)
		}
		if err := probeWritable(d); err != nil {
			return fmt.Errorf("%s: --%s %s: cannot write in directory %s: %v", cmd, name, p, d, err)
		}
	}
	return nil
}

// makeOutDir creates an output directory (and its parents) and checks
// that it can be written in: a usage error (exit 2) naming the flag
// otherwise, before any work.
func makeOutDir(cmd, flag, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usageErr(fmt.Errorf("%s: --%s %s: cannot create it: %v", cmd, flag, dir, err))
	}
	if err := probeWritable(dir); err != nil {
		return usageErr(fmt.Errorf("%s: --%s %s: cannot write in it: %v", cmd, flag, dir, err))
	}
	return nil
}

// stdoutPath as an output file name (--json -) writes to stdout; the
// human-readable summary then goes to stderr.
const stdoutPath = "-"

// writeOutput writes an output file atomically, or to stdout for "-".
func writeOutput(path string, stdout io.Writer, fill func(io.Writer) error) error {
	if path == stdoutPath {
		return fill(stdout)
	}
	return compare.WriteFileAtomic(path, fill)
}

// summaryWriter is where a command prints its summary: stdout, unless an
// output file goes there (--json -).
func summaryWriter(stdout, stderr io.Writer, outs ...string) io.Writer {
	if slices.Contains(outs, stdoutPath) {
		return stderr
	}
	return stdout
}

// probeWritable creates and removes a file in dir: a directory the run
// could not write its output into is found before any work.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".qppl-write-check-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the temporary name is ours, not the user's
		}
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// checkBackendName rejects an unknown --backend before any data is read
// (openBackend, which opens it, runs after tokenization).
func checkBackendName(name string) error {
	switch name {
	case "", "reference", "emu", "cuda":
		return nil
	}
	return fmt.Errorf("unknown backend %q (want reference, emu or cuda)", name)
}

// requireFlags is a command's Before: every named flag must be set, else a
// usage error (exit 2) naming them. It replaces cli's Required, whose error
// exits 1 and prints the help text on stdout.
func requireFlags(names ...string) cli.BeforeFunc {
	return func(c *cli.Context) error {
		var missing []string
		for _, n := range names {
			if !c.IsSet(n) {
				missing = append(missing, "--"+n)
			}
		}
		if len(missing) > 0 {
			name := c.Command.FullName()
			return usageErr(fmt.Errorf("%s: %s required (see qppl %s --help)", name, strings.Join(missing, ", "), name))
		}
		return nil
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
	in.mu.Lock()
	in.journaled = slices.ContainsFunc(args, func(a string) bool { return a == "--run-dir" || strings.HasPrefix(a, "--run-dir=") })
	in.mu.Unlock()
	err := newApp(stdin, stdout, stderr).RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "qppl: %v\n", err)
	if s := in.signal(); s != nil {
		var ie *eval.Interrupted
		if errors.As(err, &ie) && ie.RunDir != "" {
			fmt.Fprintf(stderr, "qppl: resume with:\n  %s\n", shellQuote(args))
		}
		return signalCode(s)
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	if eval.IsInput(err) {
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		// Only urfave/cli itself returns cli.Exit errors (e.g. "qppl help
		// nosuch", code 3): they are usage errors, and 3 means a regression.
		return exitUsage
	}
	return exitError
}
