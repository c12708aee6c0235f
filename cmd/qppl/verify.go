package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "verify" command.
func newVerifyCmd() *cli.Command {
	return &cli.Command{
		Name:   "verify",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("verify: not implemented yet") },
	}
}
