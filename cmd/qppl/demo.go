package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "demo" command.
func newDemoCmd() *cli.Command {
	return &cli.Command{
		Name:   "demo",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("demo: not implemented yet") },
	}
}
