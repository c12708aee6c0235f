package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// STUB: replaced by the owner of the "quantize" command.
func newQuantizeCmd() *cli.Command {
	return &cli.Command{
		Name:   "quantize",
		Usage:  "(not implemented yet)",
		Action: func(*cli.Context) error { return errors.New("quantize: not implemented yet") },
	}
}
