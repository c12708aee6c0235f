package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "eval" command.
func newEvalCmd() *cli.Command {
	return &cli.Command{
		Name:   "eval",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("eval: not implemented yet") },
	}
}
