package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "tokenize" command.
func newTokenizeCmd() *cli.Command {
	return &cli.Command{
		Name:   "tokenize",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("tokenize: not implemented yet") },
	}
}
