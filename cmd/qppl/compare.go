package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "compare" command.
func newCompareCmd() *cli.Command {
	return &cli.Command{
		Name:   "compare",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("compare: not implemented yet") },
	}
}
