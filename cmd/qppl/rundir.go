package main

// Run directories, identities, merging and the interruption error
// (eval.Interrupted, after which run prints the resume command) live in
// package eval.

import (
	"strings"

	"github.com/qppl/qppl/eval"
)

// journalPath is the journal file of a run directory.
func journalPath(dir string) string { return eval.JournalPath(dir) }

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
