package main

import "os"

// main is wiring only: see run in app.go.
func main() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) }
