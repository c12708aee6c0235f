package ggml

// The bridge to llama.cpp's own ggml (libggml-base from the npm package
// @node-llama-cpp/linux-x64@3.22.1): testdata/ggmlref.c is compiled against
// it once per test binary and run on files.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// LibEnv names the directory holding llama.cpp's libggml-base.so.
const LibEnv = "QPPL_LLAMACPP_LIB"

// defaultLibDir is where .ci/run installs the npm package (under $HOME).
const defaultLibDir = ".cache/qppl/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

type ggmlRef struct {
	bin string
	dir string // scratch directory for the files exchanged
}

var (
	refOnce sync.Once
	refVal  *ggmlRef
	refSkip string
	refErr  error
)

// libggml returns the helper, or skips the test naming what it looked for.
func libggml(t testing.TB) *ggmlRef {
	t.Helper()
	refOnce.Do(func() { refVal, refSkip, refErr = buildRef() })
	if refErr != nil {
		t.Fatal(refErr)
	}
	if refVal == nil {
		t.Skip(refSkip)
	}
	return refVal
}

func buildRef() (*ggmlRef, string, error) {
	dir := os.Getenv(LibEnv)
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, defaultLibDir)
	}
	if _, err := os.Stat(filepath.Join(dir, "libggml-base.so")); err != nil {
		return nil, fmt.Sprintf("llama.cpp's libggml-base.so not found in %s (set %s to its directory; install: npm install --prefix $HOME/.cache/qppl/llamacpp @node-llama-cpp/linux-x64@3.22.1)", dir, LibEnv), nil
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Sprintf("no C compiler (%s) to build testdata/ggmlref.c against %s", cc, dir), nil
	}
	tmp, err := os.MkdirTemp("", "ggmlref")
	if err != nil {
		return nil, "", err
	}
	bin := filepath.Join(tmp, "ggmlref")
	out, err := exec.Command(cc, "-O1", "-o", bin, "testdata/ggmlref.c", "-L"+dir, "-l:libggml-base.so", "-Wl,-rpath,"+dir).CombinedOutput()
	if err != nil {
		// The library is there: a failing build is a defect, not a skip.
		return nil, "", fmt.Errorf("building testdata/ggmlref.c against %s: %v\n%s", dir, err, out)
	}
	return &ggmlRef{bin: bin, dir: tmp}, "", nil
}

func (r *ggmlRef) run(t testing.TB, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(r.bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ggmlref %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func (r *ggmlRef) file(t testing.TB, data []byte) string {
	t.Helper()
	f, err := os.CreateTemp(r.dir, "in")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// dequantize is ggml's to_float (dequantize_row_<type>) of n elements.
func (r *ggmlRef) dequantize(t testing.TB, typ Type, src []byte, n int) []float32 {
	t.Helper()
	in := r.file(t, src)
	out := in + ".out"
	r.run(t, "dequantize", strconv.Itoa(int(typ)), strconv.Itoa(n), in, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4*n {
		t.Fatalf("ggmlref dequantize %s: %d bytes, want %d", typ, len(b), 4*n)
	}
	y := make([]float32, n)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return y
}

// quantize is ggml_quantize_chunk of rows x perRow values (imatrix may be
// nil) for each of types, in one helper process.
func (r *ggmlRef) quantize(t testing.TB, types []Type, x []float32, perRow int, imatrix []float32) map[Type][]byte {
	t.Helper()
	in := r.file(t, f32Bytes(x))
	im := "-"
	if imatrix != nil {
		im = r.file(t, f32Bytes(imatrix))
	}
	ids := make([]string, len(types))
	for i, typ := range types {
		ids[i] = strconv.Itoa(int(typ))
	}
	out := in + ".q"
	r.run(t, "quantize", strings.Join(ids, ","), strconv.Itoa(len(x)/perRow), strconv.Itoa(perRow), in, im, out)
	q := map[Type][]byte{}
	for i, typ := range types {
		b, err := os.ReadFile(out + "." + ids[i])
		if err != nil {
			t.Fatal(err)
		}
		q[typ] = b
	}
	return q
}

// traits is ggml's (name, blck_size, type_size, has to_float) of id.
func (r *ggmlRef) traits(t testing.TB, ids []Type) map[Type][4]string {
	args := []string{"traits"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(int(id)))
	}
	m := map[Type][4]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(r.run(t, args...))), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Fatalf("ggmlref traits: bad line %q", line)
		}
		id, _ := strconv.Atoi(f[0])
		m[Type(id)] = [4]string{f[1], f[2], f[3], f[5]}
	}
	return m
}
