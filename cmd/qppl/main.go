package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file that receives a CPU profile of the whole
// process (go tool pprof), for finding where a run spends its time.
const cpuProfileEnv = "QPPL_CPUPROFILE"

// main is wiring only: see run in app.go.
func main() {
	if path := os.Getenv(cpuProfileEnv); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "qppl: %s: %v\n", cpuProfileEnv, err)
			os.Exit(exitError)
		}
		code := run(os.Args, os.Stdin, os.Stdout, os.Stderr)
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
