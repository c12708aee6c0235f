package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "fixture" command.
func newFixtureCmd() *cli.Command {
	return &cli.Command{
		Name:   "fixture",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("fixture: not implemented yet") },
	}
}
