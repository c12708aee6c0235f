package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "plot" command.
func newPlotCmd() *cli.Command {
	return &cli.Command{
		Name:   "plot",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("plot: not implemented yet") },
	}
}
