package cuda

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoGPUInDefaultBuild: the default build of qppl never links
// gorgonia.org/cu (its init exits without a GPU) nor backends/cuda/gpu;
// with -tags cuda only backends/cuda/gpu imports it, and with
// -tags 'cuda cudaown' (the own driver binding) nothing does.
func TestNoGPUInDefaultBuild(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	// Output, not CombinedOutput: stderr carries "go: downloading ..." lines
	// on a machine whose module cache is empty, which are not packages.
	out, err := exec.Command(goTool, "list", "-deps", "github.com/qppl/qppl/cmd/qppl").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderrOf(err))
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "gorgonia.org/cu") || p == "github.com/qppl/qppl/backends/cuda/gpu" {
			t.Errorf("default build of cmd/qppl depends on %s", p)
		}
	}
	cmd := exec.Command(goTool, "list", "-tags", "cuda", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/qppl/qppl/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1") // the gpu package is cgo
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags cuda: %v\n%s", err, stderrOf(err))
	}
	importers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "gorgonia.org/cu") {
				if f[0] != "github.com/qppl/qppl/backends/cuda/gpu" {
					t.Errorf("%s imports %s; only backends/cuda/gpu may", f[0], imp)
				}
				importers++
			}
		}
	}
	if importers == 0 {
		t.Error("no package imports gorgonia.org/cu with -tags cuda (expected backends/cuda/gpu)")
	}
	// the own driver binding (toolkits 13.x) does not import gorgonia at all
	cmd = exec.Command(goTool, "list", "-tags", "cuda cudaown", "-deps", "github.com/qppl/qppl/cmd/qppl")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags 'cuda cudaown': %v\n%s", err, stderrOf(err))
	}
	gpu := false
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "gorgonia.org/cu") {
			t.Errorf("-tags 'cuda cudaown' build of cmd/qppl depends on %s", p)
		}
		gpu = gpu || p == "github.com/qppl/qppl/backends/cuda/gpu"
	}
	if !gpu {
		t.Error("-tags 'cuda cudaown' build of cmd/qppl does not include backends/cuda/gpu")
	}
}

// stderrOf returns what a failed command wrote to stderr.
func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
