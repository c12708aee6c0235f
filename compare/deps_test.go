package compare

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportDirection enforces the package map of ../shared/specs/style.md
// for the packages this one sits among: each may depend (directly or not)
// only on the qppl packages listed, so compare and plots never reach a
// concrete backend, and the data and format packages stay leaves.
func TestImportDirection(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	const mod = "github.com/qppl/qppl/"
	allowed := map[string][]string{
		"compare":            {"backends"},
		"plots":              {"compare", "backends"},
		"dataset":            {},
		"dataset/hub":        {"dataset"},
		"quant":              {"checkpoint"},
		"journal":            {},
		"fixtures/quantizer": {"quant", "checkpoint"},
	}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for p := range allowed {
		args = append(args, mod+p)
	}
	slices.Sort(args[3:])
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		ok, known := allowed[pkg]
		if !known {
			t.Fatalf("unexpected package %s in go list output", f[0])
		}
		seen++
		for _, d := range f[1:] {
			if dep, internal := strings.CutPrefix(d, mod); internal && !slices.Contains(ok, dep) {
				t.Errorf("%s depends on %s; the package map allows only %v", pkg, dep, ok)
			}
		}
	}
	if seen != len(allowed) {
		t.Errorf("go list reported %d of %d packages", seen, len(allowed))
	}
}
