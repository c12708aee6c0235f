package main

// Interrupted runs: the error that makes run print the resume command.
// Run directories, identities and merging live in package eval.

import (
	"fmt"
	"strings"

	"github.com/qppl/qppl/eval"
)

// journalPath is the journal file of a run directory.
func journalPath(dir string) string { return eval.JournalPath(dir) }

// interruptedError is returned by a run that stopped on a signal or
// cancellation; run prints the resume command for it.
type interruptedError struct {
	err         error
	runDir      string // "" without --run-dir
	done, total int    // windows journaled / of this run (shard)
	// note, when set (compare --run-dir), replaces the count of saved
	// windows in the message.
	note string
}

func (e *interruptedError) Error() string {
	if e.runDir == "" {
		return fmt.Sprintf("%v; nothing was saved (no --run-dir): rerun with --run-dir DIR to make the run resumable", e.err)
	}
	if e.note != "" {
		return fmt.Sprintf("%v; %s", e.err, e.note)
	}
	return fmt.Sprintf("%v; %d of %d windows are saved in %s", e.err, e.done, e.total, journalPath(e.runDir))
}

func (e *interruptedError) Unwrap() error { return e.err }

// shellQuote quotes args for a POSIX shell, leaving plain words as they are.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,@%+") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
