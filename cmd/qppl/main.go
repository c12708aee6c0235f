package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/qppl/qppl/internal/atomicfile"
)

// cpuProfileEnv names a file that receives a CPU profile of the whole
// process (go tool pprof), for finding where a run spends its time.
const cpuProfileEnv = "QPPL_CPUPROFILE"

// main is wiring only: see run in app.go.
func main() {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
	}
	// The profile is held in memory and written whole at the end (as
	// every file qppl writes: internal/atomicfile), so an interrupted run
	// leaves no partial profile.
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		fmt.Fprintf(os.Stderr, "qppl: %s: %v\n", cpuProfileEnv, err)
		os.Exit(exitError)
	}
	code := run(os.Args, os.Stdin, os.Stdout, os.Stderr)
	pprof.StopCPUProfile()
	if err := atomicfile.WriteBytes(path, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "qppl: %s: %v\n", cpuProfileEnv, err)
		if code == 0 {
			code = exitError
		}
	}
	os.Exit(code)
}
