package compare

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// TokensHash is the hex sha256 of ids as int32 little-endian bytes (the
// bytes of a .i32 token file).
func TokensHash(ids []int32) string {
	h := sha256.New()
	var buf [4096]byte
	for len(ids) > 0 {
		n := min(len(ids), len(buf)/4)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(ids[i]))
		}
		h.Write(buf[:4*n])
		ids = ids[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Hash is the hex sha256 of the canonical JSON object {"ctx", "method",
// "rows", "stride", "tokens_hash"} (keys sorted). The stride of a method
// without one (exl3-ppl, llamacpp, lm-eval) enters as 0.
func (d DataSpec) Hash() string {
	stride := d.Stride
	if !Method(d.Method).UsesStride() {
		stride = 0
	}
	b, _ := json.Marshal(struct {
		Ctx        int    `json:"ctx"`
		Method     string `json:"method"`
		Rows       int    `json:"rows"`
		Stride     int    `json:"stride"`
		TokensHash string `json:"tokens_hash"`
	}{d.Ctx, d.Method, d.Rows, stride, d.TokensHash})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ModelFiles lists the files of a model directory that define its weights:
// config.json, model.safetensors.index.json when present, and every
// *.safetensors file, sorted by name; for a .gguf file, the file (every
// part, in order, of a split model).
func ModelFiles(dir string) ([]string, error) {
	if st, err := os.Stat(dir); err == nil && st.Mode().IsRegular() && strings.HasSuffix(strings.ToLower(dir), ".gguf") {
		return ggufFiles(dir), nil
	}
	var files []string
	for _, name := range []string{"config.json", "model.safetensors.index.json"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		} else if name == "config.json" {
			return nil, fmt.Errorf("model files of %s: %w", dir, err)
		}
	}
	st, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, err
	}
	if len(st) == 0 {
		return nil, fmt.Errorf("model files of %s: no *.safetensors file", dir)
	}
	slices.Sort(st)
	return append(files, st...), nil
}

// HashFiles is the hex sha256 over, for each file in order, its base name,
// a NUL, the hex sha256 of its content and a newline. It reads each file
// once, streaming.
func HashFiles(paths []string) (string, error) {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("hashing model files: %w", err)
		}
		fh := sha256.New()
		// 1 MiB reads: io.Copy's 32 KiB cost a system call per 32 KiB
		// (0.6 CPU-s of a 1B model's 918 MB).
		_, err = io.CopyBuffer(fh, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", p, err)
		}
		fmt.Fprintf(h, "%s\x00%s\n", filepath.Base(p), hex.EncodeToString(fh.Sum(nil)))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ModelHash is HashFiles(ModelFiles(dir)).
func ModelHash(dir string) (string, error) {
	files, err := ModelFiles(dir)
	if err != nil {
		return "", err
	}
	return HashFiles(files)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "(none)"
	}
	return strings.Clone(h)
}

// ggufSplit matches llama.cpp's split GGUF names, PREFIX-00001-of-00003.gguf.
var ggufSplit = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// ggufFiles lists a GGUF model's files: the file, or every part of a split
// model in order.
func ggufFiles(path string) []string {
	sm := ggufSplit.FindStringSubmatch(filepath.Base(path))
	if sm == nil {
		return []string{path}
	}
	n, _ := strconv.Atoi(sm[3])
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, filepath.Join(filepath.Dir(path), fmt.Sprintf("%s-%05d-of-%05d.gguf", sm[1], i, n)))
	}
	return out
}
