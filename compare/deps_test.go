package compare

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportDirection enforces the package map of ../shared/specs/style.md:
// compare, plots and the data and format packages may depend (directly or
// not) only on the qppl packages listed, so compare and plots never reach a
// concrete backend and the leaves stay leaves; the backends, tokenizer and
// checkpoint are checked against the map's forbidden edges. Package eval
// (evaluation as a library) sits above compare and never reaches a model
// reader or a concrete backend: the caller hands it a backends.Backend.
func TestImportDirection(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	const mod = "github.com/qppl/qppl/"
	allowed := map[string][]string{
		"compare":            {"backends"},
		"eval":               {"compare", "backends", "dataset", "tokenizer", "journal"},
		"plots":              {"compare", "backends"},
		"dataset":            {},
		"dataset/hub":        {"dataset"},
		"quant":              {"checkpoint"},
		"journal":            {},
		"fixtures/quantizer": {"quant", "checkpoint"},
	}
	// Packages owned elsewhere are held to the map's forbidden edges only:
	// the two backends never reach each other, no library reaches the
	// fixtures, and neither backend reaches compare or plots.
	forbidden := map[string][]string{
		"reference":     {"backends/cuda", "fixtures", "compare", "plots"},
		"backends/cuda": {"reference", "fixtures", "compare", "plots"},
		"tokenizer":     {"checkpoint", "quant", "arch", "backends", "reference", "compare", "fixtures"},
		"checkpoint":    {"quant", "arch", "backends", "reference", "compare", "fixtures"},
	}
	// Standard-library-only utilities that any package may use.
	utilities := []string{"internal/atomicfile"}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for p := range allowed {
		args = append(args, mod+p)
	}
	for p := range forbidden {
		args = append(args, mod+p)
	}
	slices.Sort(args[3:])
	// Stdout only: on an empty module cache stderr carries "go: downloading" lines.
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		ok, isAllowList := allowed[pkg]
		bad, isForbidList := forbidden[pkg]
		if !isAllowList && !isForbidList {
			t.Fatalf("unexpected package %s in go list output", f[0])
		}
		seen++
		for _, d := range f[1:] {
			dep, internal := strings.CutPrefix(d, mod)
			switch {
			case !internal, slices.Contains(utilities, dep):
			case isAllowList && !slices.Contains(ok, dep):
				t.Errorf("%s depends on %s; the package map allows only %v", pkg, dep, ok)
			case isForbidList && slices.ContainsFunc(bad, func(b string) bool { return dep == b || strings.HasPrefix(dep, b+"/") }):
				t.Errorf("%s depends on %s, which the package map forbids", pkg, dep)
			}
		}
	}
	if seen != len(allowed)+len(forbidden) {
		t.Errorf("go list reported %d of %d packages", seen, len(allowed)+len(forbidden))
	}
}
