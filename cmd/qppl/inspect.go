package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "inspect" command.
func newInspectCmd() *cli.Command {
	return &cli.Command{
		Name:   "inspect",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("inspect: not implemented yet") },
	}
}
