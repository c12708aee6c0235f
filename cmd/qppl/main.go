// Command qppl measures the exact perplexity and KL divergence of quantized
// LLM checkpoints. main is wiring only: see run in app.go.
package main

import "os"

func main() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) }
