package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "merge" command.
func newMergeCmd() *cli.Command {
	return &cli.Command{
		Name:   "merge",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("merge: not implemented yet") },
	}
}
