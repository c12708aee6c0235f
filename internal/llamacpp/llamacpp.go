// Package llamacpp runs llama.cpp's own code for qppl's tests: its model
// quantizer (llama_model_quantize), its forward pass (per-token NLL from
// llama_decode and llama_get_logits) and ggml's dequantize_row_<type>, from
// the prebuilt CPU libraries of the npm package
// @node-llama-cpp/linux-x64@3.22.1 (libllama, libggml-base). A small C
// program (helper.c, embedded) is compiled against them on first use and
// run on files; nothing is linked into qppl. The C source is csrc/helper.c.
//
// Find looks in $QPPL_LLAMACPP_LIB, else in
// $HOME/.cache/qppl/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64,
// where .ci/run installs the package. When the libraries or a C compiler
// are absent, Find returns a message for t.Skip saying what is missing and
// how to install it; when they are present, a helper that fails to build
// is an error, not a skip.
package llamacpp

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/qppl/qppl/internal/atomicfile"
)

//go:embed csrc/helper.c
var helperSource []byte

// LibEnv names the directory holding libllama*.so and libggml-base.so.
const LibEnv = "QPPL_LLAMACPP_LIB"

// Package is the pinned npm package providing the libraries.
const Package = "@node-llama-cpp/linux-x64@3.22.1"

// DefaultDir is where .ci/run installs Package, relative to $HOME.
const DefaultDir = ".cache/qppl/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

// Helper is the compiled helper program.
type Helper struct {
	Bin    string // the executable
	LibDir string
}

// Find locates the libraries: dir, or "" and a skip message.
func Find() (dir, skip string) {
	dir = os.Getenv(LibEnv)
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, DefaultDir)
	}
	if _, err := os.Stat(filepath.Join(dir, "libggml-base.so")); err != nil {
		return "", fmt.Sprintf("llama.cpp's libraries not found in %s (set %s; install: npm install --prefix $HOME/.cache/qppl/llamacpp %s)", dir, LibEnv, Package)
	}
	if _, err := libllama(dir); err != nil {
		return "", err.Error()
	}
	return dir, ""
}

func libllama(dir string) (string, error) {
	ms, _ := filepath.Glob(filepath.Join(dir, "libllama*.so"))
	for _, m := range ms {
		if !strings.Contains(filepath.Base(m), "common") {
			return m, nil
		}
	}
	return "", fmt.Errorf("no libllama*.so in %s (set %s; install: npm install --prefix $HOME/.cache/qppl/llamacpp %s)", dir, LibEnv, Package)
}

// Build compiles the helper into workDir against the libraries in dir.
// skip is non-empty (and err nil) when no C compiler is available.
func Build(dir, workDir string) (h *Helper, skip string, err error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Sprintf("no C compiler (%s) to build the llama.cpp test helper", cc), nil
	}
	ll, err := libllama(dir)
	if err != nil {
		return nil, err.Error(), nil
	}
	src := filepath.Join(workDir, "helper.c")
	if err := atomicfile.WriteBytes(src, helperSource, 0o644); err != nil {
		return nil, "", err
	}
	bin := filepath.Join(workDir, "llamacpp-helper")
	ggml, _ := filepath.Glob(filepath.Join(dir, "libggml.*so"))
	if len(ggml) == 0 {
		return nil, fmt.Sprintf("no libggml*.so (backend registry) in %s", dir), nil
	}
	out, err := exec.Command(cc, "-O1", "-o", bin, src, ll, ggml[0], filepath.Join(dir, "libggml-base.so"), "-lm", "-Wl,-rpath,"+dir).CombinedOutput()
	if err != nil {
		return nil, "", fmt.Errorf("llamacpp: building the helper against %s: %v\n%s", dir, err, out)
	}
	return &Helper{Bin: bin, LibDir: dir}, "", nil
}

// ErrRefused is returned by Quantize when llama.cpp refuses a type (for
// example one that needs an importance matrix).
var ErrRefused = errors.New("llama.cpp refused")

func (h *Helper) run(args ...string) ([]byte, error) {
	cmd := exec.Command(h.Bin, args...)
	cmd.Env = append(os.Environ(), LibEnv+"="+h.LibDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("llamacpp %s: %w\n%s", args[0], err, lastLines(string(out), 20))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// Quantize runs llama_model_quantize(in, out) with llama.cpp file type
// ftype (llama.h's enum llama_ftype).
func (h *Helper) Quantize(in, out string, ftype int) error {
	msg, err := h.run("quantize", in, out, strconv.Itoa(ftype))
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return fmt.Errorf("%w: quantizing %s to ftype %d: %s", ErrRefused, in, ftype, lastLines(string(msg), 5))
	}
	return err
}

// Window is one sequence: token ids and the first scored position.
type Window struct {
	Tokens []int32
	First  int
}

// NLL runs llama.cpp's forward pass over each window (a fresh context of
// exactly len(Tokens) positions, all logits requested) and returns the NLL
// of targets First..len-1, log-softmax of llama.cpp's float32 logits taken
// in float64.
func (h *Helper) NLL(model string, ws []Window, workDir string) ([][]float64, error) {
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(ws)))
	total := 0
	for _, w := range ws {
		if w.First < 1 || w.First > len(w.Tokens) {
			return nil, fmt.Errorf("llamacpp: first %d outside [1, %d]", w.First, len(w.Tokens))
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(w.Tokens)))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(w.First))
		for _, id := range w.Tokens {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(id))
		}
		total += len(w.Tokens) - w.First
	}
	win, out := filepath.Join(workDir, "windows.bin"), filepath.Join(workDir, "nll.f64")
	if err := atomicfile.WriteBytes(win, buf, 0o644); err != nil {
		return nil, err
	}
	if _, err := h.run("nll", model, win, out); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if len(raw) != 8*total {
		return nil, fmt.Errorf("llamacpp: nll wrote %d bytes, want %d", len(raw), 8*total)
	}
	res := make([][]float64, len(ws))
	k := 0
	for i, w := range ws {
		for range len(w.Tokens) - w.First {
			res[i] = append(res[i], math.Float64frombits(binary.LittleEndian.Uint64(raw[8*k:])))
			k++
		}
	}
	return res, nil
}

// Dequantize decodes n elements of ggml type id typ with ggml's own
// to_float.
func (h *Helper) Dequantize(typ uint32, raw []byte, n int, workDir string) ([]float32, error) {
	src, dst := filepath.Join(workDir, "deq.in"), filepath.Join(workDir, "deq.out")
	if err := atomicfile.WriteBytes(src, raw, 0o644); err != nil {
		return nil, err
	}
	if _, err := h.run("dequantize", strconv.Itoa(int(typ)), strconv.Itoa(n), src, dst); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		return nil, err
	}
	if len(b) != 4*n {
		return nil, fmt.Errorf("llamacpp: dequantize wrote %d bytes, want %d", len(b), 4*n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// Trait is ggml's name, block size and bytes per block of a type id.
type Trait struct {
	ID        uint32
	Name      string
	BlockSize int64
	TypeSize  int64
}

// Traits returns ggml's traits of the type ids.
func (h *Helper) Traits(ids ...uint32) ([]Trait, error) {
	args := []string{"traits"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(int(id)))
	}
	out, err := h.run(args...)
	if err != nil {
		return nil, err
	}
	var res []Trait
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var t Trait
		if _, err := fmt.Sscanf(l, "%d %s %d %d", &t.ID, &t.Name, &t.BlockSize, &t.TypeSize); err != nil {
			return nil, fmt.Errorf("llamacpp: traits line %q: %v", l, err)
		}
		res = append(res, t)
	}
	return res, nil
}

// FileTypes are llama.cpp's file types (llama.h's enum llama_ftype) that
// llama_model_quantize produces from an F32/F16 file, by name.
func FileTypes() []FileType {
	return []FileType{
		{"Q4_0", 2}, {"Q4_1", 3}, {"Q8_0", 7}, {"Q5_0", 8}, {"Q5_1", 9},
		{"Q2_K", 10}, {"Q3_K_S", 11}, {"Q3_K_M", 12}, {"Q3_K_L", 13},
		{"Q4_K_S", 14}, {"Q4_K_M", 15}, {"Q5_K_S", 16}, {"Q5_K_M", 17}, {"Q6_K", 18},
		{"IQ2_XXS", 19}, {"IQ2_XS", 20}, {"Q2_K_S", 21}, {"IQ3_XS", 22}, {"IQ3_XXS", 23},
		{"IQ1_S", 24}, {"IQ4_NL", 25}, {"IQ3_S", 26}, {"IQ3_M", 27}, {"IQ2_S", 28},
		{"IQ2_M", 29}, {"IQ4_XS", 30}, {"IQ1_M", 31}, {"BF16", 32},
	}
}

// FileType is a llama.cpp file type.
type FileType struct {
	Name  string
	FType int
}
