package device

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// proto is a kernel prototype read from a .cu file.
type proto struct {
	file   string   // without .cu
	names  []string // parameter names
	sig    string   // one letter per parameter (p, i, u, f)
	source string   // the prototype as written, for messages
}

var protoRE = regexp.MustCompile(`(?s)EXTERN_C\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)`)

// parseKernelSources reads every kernel prototype of ../kernels/*.cu.
func parseKernelSources(t *testing.T) map[string]proto {
	t.Helper()
	files, err := filepath.Glob("../kernels/*.cu")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kernel sources in ../kernels (%v)", err)
	}
	out := map[string]proto{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".cu")
		for _, m := range protoRE.FindAllStringSubmatch(string(src), -1) {
			p := proto{file: base, source: strings.Join(strings.Fields(m[0]), " ")}
			for _, param := range strings.Split(m[2], ",") {
				fields := strings.Fields(strings.ReplaceAll(param, "*", " * "))
				if len(fields) < 2 {
					t.Fatalf("%s: kernel %s: cannot parse parameter %q", f, m[1], param)
				}
				name := fields[len(fields)-1]
				typ := fields[:len(fields)-1]
				var k byte
				switch {
				case slices.Contains(typ, "*"):
					k = 'p'
				case slices.Contains(typ, "unsigned"):
					k = 'u'
				case slices.Contains(typ, "int"):
					k = 'i'
				case slices.Contains(typ, "float"):
					k = 'f'
				default:
					t.Fatalf("%s: kernel %s: parameter %q has a type the launch path cannot pass", f, m[1], param)
				}
				p.names = append(p.names, name)
				p.sig += string(k)
			}
			if _, dup := out[m[1]]; dup {
				t.Fatalf("kernel %s is defined twice", m[1])
			}
			out[m[1]] = p
		}
	}
	return out
}

// wrapper is a Go function that launches a kernel.
type wrapper struct {
	fn     string
	pos    string
	kernel string
	args   []string // argument names after the geometry (conversions stripped)
	params map[string]bool
}

// parseWrappers finds every Launch call in the non-test Go files of dirs.
// Kernel names are string literals or constants declared in those files.
func parseWrappers(t *testing.T, dirs ...string) (ws []wrapper, stray []string) {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]string{}
	var files []*ast.File
	for _, dir := range dirs {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, sp := range gd.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(bl.Value)
							}
						}
					}
				}
			}
		}
	}
	name := func(e ast.Expr) string {
		switch x := e.(type) {
		case *ast.BasicLit:
			s, _ := strconv.Unquote(x.Value)
			return s
		case *ast.Ident:
			return consts[x.Name]
		case *ast.SelectorExpr:
			return consts[x.Sel.Name]
		}
		return ""
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			params := map[string]bool{}
			for _, fl := range fd.Type.Params.List {
				for _, n := range fl.Names {
					params[n.Name] = true
				}
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Launch" || len(call.Args) < 4 {
					return true
				}
				pos := fset.Position(call.Pos()).String()
				if !strings.HasPrefix(fd.Name.Name, "launch") && !strings.HasPrefix(fd.Name.Name, "Launch") {
					stray = append(stray, pos+" in "+fd.Name.Name)
					return true
				}
				w := wrapper{fn: fd.Name.Name, pos: pos, kernel: name(call.Args[0]), params: params}
				for _, a := range call.Args[4:] {
					// int32(x), float32(x): the conversion of a parameter
					if c, ok := a.(*ast.CallExpr); ok && len(c.Args) == 1 {
						if id, ok := c.Fun.(*ast.Ident); ok && (id.Name == "int32" || id.Name == "uint32" || id.Name == "float32") {
							a = c.Args[0]
						}
					}
					id, ok := a.(*ast.Ident)
					if !ok {
						w.args = append(w.args, "<expression>")
						continue
					}
					w.args = append(w.args, id.Name)
				}
				ws = append(ws, w)
				return true
			})
		}
	}
	return ws, stray
}

// checkKernels returns every disagreement between the kernel prototypes,
// the signature table, the source list and the launch wrappers.
func checkKernels(protos map[string]proto, table map[string]KernelInfo, sources []string, ws []wrapper, stray []string) []string {
	var bad []string
	errf := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	for name, p := range protos {
		info, ok := table[name]
		switch {
		case !ok:
			errf("kernel %s (%s.cu) is not in Kernels()", name, p.file)
		case info.Sig != p.sig || info.Source != p.file:
			errf("Kernels()[%s] = {%s, %s}, the prototype in %s.cu says {%s, %s}: %s", name, info.Sig, info.Source, p.file, p.sig, p.file, p.source)
		}
	}
	for name := range table {
		if _, ok := protos[name]; !ok {
			errf("Kernels() lists %s, which no ../kernels/*.cu defines", name)
		}
	}
	var files []string
	for _, p := range protos {
		if !slices.Contains(files, p.file) {
			files = append(files, p.file)
		}
	}
	slices.Sort(files)
	if !slices.Equal(sources, files) {
		errf("Sources() = %v, kernel files with kernels = %v", sources, files)
	}
	for _, s := range stray {
		errf("Launch outside a typed wrapper (launch*/Launch* function): %s", s)
	}
	seen := map[string]string{}
	for _, w := range ws {
		p, ok := protos[w.kernel]
		if !ok {
			errf("%s: %s launches %q, which is not a kernel of ../kernels", w.pos, w.fn, w.kernel)
			continue
		}
		if prev, dup := seen[w.kernel]; dup {
			errf("%s: %s is a second wrapper of %s (first: %s)", w.pos, w.fn, w.kernel, prev)
		}
		seen[w.kernel] = w.fn
		if !slices.Equal(w.args, p.names) {
			errf("%s: %s passes (%s) to %s, whose prototype in %s.cu takes (%s)", w.pos, w.fn,
				strings.Join(w.args, ", "), w.kernel, p.file, strings.Join(p.names, ", "))
		}
		for _, a := range w.args {
			if !w.params[a] {
				errf("%s: %s passes %s to %s, which is not one of its parameters", w.pos, w.fn, a, w.kernel)
			}
		}
	}
	for name := range protos {
		if _, ok := seen[name]; !ok {
			errf("kernel %s has no typed launch wrapper", name)
		}
	}
	sort.Strings(bad)
	return bad
}

// TestKernelTableMatchesSources: the Go signature table, the typed launch
// wrappers (here and in backends/cuda) and the kernel prototypes in the .cu
// files describe the same kernels — each kernel has one table entry with
// its prototype's parameter kinds and file, and one wrapper that passes
// its own parameters named as the prototype names them, in the same order,
// so two same-typed arguments cannot be swapped. No Launch call bypasses
// the wrappers.
func TestKernelTableMatchesSources(t *testing.T) {
	protos := parseKernelSources(t)
	ws, stray := parseWrappers(t, ".", "..")
	for _, b := range checkKernels(protos, Kernels(), Sources(), ws, stray) {
		t.Error(b)
	}
	if len(protos) < 19 || len(ws) != len(protos) {
		t.Errorf("parsed %d prototypes and %d wrappers", len(protos), len(ws))
	}
}

// TestKernelCheckFindsDrift: each kind of drift the check exists for is
// reported (a test that cannot fail is a defect).
func TestKernelCheckFindsDrift(t *testing.T) {
	protos := parseKernelSources(t)
	ws, stray := parseWrappers(t, ".", "..")
	clone := func() (map[string]KernelInfo, []wrapper) {
		w := slices.Clone(ws)
		for i := range w {
			w[i].args = slices.Clone(w[i].args)
		}
		return Kernels(), w
	}
	ropeAt := slices.IndexFunc(ws, func(w wrapper) bool { return w.kernel == KRope })
	if ropeAt < 0 {
		t.Fatal("no rope wrapper parsed")
	}
	for _, c := range []struct {
		name   string
		mutate func(map[string]KernelInfo, []wrapper) ([]wrapper, []string)
		want   string
	}{
		{"swapped cos and sin", func(_ map[string]KernelInfo, w []wrapper) ([]wrapper, []string) {
			a := w[ropeAt].args
			a[1], a[2] = a[2], a[1]
			return w, stray
		}, "LaunchRope passes (x, sn, cs, T, H, D) to rope"},
		{"missing wrapper", func(_ map[string]KernelInfo, w []wrapper) ([]wrapper, []string) {
			return slices.Delete(w, ropeAt, ropeAt+1), stray
		}, "kernel rope has no typed launch wrapper"},
		{"table signature", func(tb map[string]KernelInfo, w []wrapper) ([]wrapper, []string) {
			tb[KRope] = KernelInfo{"pppii", "elementwise"}
			return w, stray
		}, "Kernels()[rope] = {pppii, elementwise}"},
		{"table entry without kernel", func(tb map[string]KernelInfo, w []wrapper) ([]wrapper, []string) {
			tb["dq_gone"] = KernelInfo{"p", "dq_gone"}
			return w, stray
		}, "Kernels() lists dq_gone"},
		{"stray launch", func(_ map[string]KernelInfo, w []wrapper) ([]wrapper, []string) {
			return w, append(slices.Clone(stray), "forward.go:1 in forward")
		}, "Launch outside a typed wrapper"},
	} {
		tb, w := clone()
		w, st := c.mutate(tb, w)
		bad := checkKernels(protos, tb, Sources(), w, st)
		if !strings.Contains(strings.Join(bad, "\n"), c.want) {
			t.Errorf("%s: problems %q, want one containing %q", c.name, bad, c.want)
		}
	}
}
