package gguf_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/gguf/ggml"
)

// FuzzOpen feeds arbitrary bytes to the GGUF header parser. Open must never
// panic and every error must wrap ErrFormat or ErrUnsupported; when it
// accepts a file, every tensor lies inside the data section at an aligned
// offset, has exactly its type's byte size, overlaps no other tensor, and
// reads back. Run by make fuzz (mk/fuzz.mk discovers it).
func FuzzOpen(f *testing.F) {
	f.Add(validFile())
	var buf bytes.Buffer
	u8, _ := gguf.ScalarArray(gguf.TypeUint8, []byte{1, 2})
	gguf.Write(&buf, []gguf.KV{
		{Key: "general.alignment", Value: gguf.Uint32Value(64)},
		{Key: "s", Value: gguf.StringArray([]string{"a", "bc"})},
		{Key: "n", Value: gguf.ArrayOf([]gguf.Value{u8})},
	}, []gguf.WriteTensor{
		{Name: "q", Dims: []int64{32, 2}, Type: gguf.Q4_0, Data: make([]byte, 36)},
		{Name: "h", Dims: []int64{3}, Type: gguf.F16, Data: make([]byte, 6)},
	})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Open(bytes.NewReader(data), int64(len(data)), "fuzz.gguf")
		if err != nil {
			if !errors.Is(err, gguf.ErrFormat) && !errors.Is(err, gguf.ErrUnsupported) {
				t.Fatalf("error %v wraps neither ErrFormat nor ErrUnsupported", err)
			}
			return
		}
		ts := append([]gguf.TensorInfo(nil), file.Tensors...)
		sort.Slice(ts, func(a, b int) bool { return ts[a].Offset < ts[b].Offset })
		end := file.DataOffset
		for _, ti := range ts {
			if ti.Offset < end || ti.Offset+ti.Size > int64(len(data)) || (ti.Offset-file.DataOffset)%file.Alignment != 0 {
				t.Fatalf("tensor %q [%d,+%d) misplaced (data at %d, previous end %d, file %d)", ti.Name, ti.Offset, ti.Size, file.DataOffset, end, len(data))
			}
			want, err := ggml.RowBytes(ti.Type, ti.Numel())
			if err != nil || want != ti.Size {
				t.Fatalf("tensor %q: size %d, want %d (%v)", ti.Name, ti.Size, want, err)
			}
			end = ti.Offset + ti.Size
			raw, err := file.ReadRaw(ti.Name)
			if err != nil || int64(len(raw)) != ti.Size {
				t.Fatalf("tensor %q: read %d bytes: %v", ti.Name, len(raw), err)
			}
		}
		for _, kv := range file.KVs {
			_ = kv.Value.String()
		}
	})
}

// FuzzOpenModel writes arbitrary bytes (seeded with a tiny converted
// model) to a file and opens it as a model: OpenModel must never panic,
// and a model it accepts must decode every Linear and report its bpw.
func FuzzOpenModel(f *testing.F) {
	dir := f.TempDir()
	o, _ := fixtures.Defaults("qwen3")
	o.Vocab, o.Hidden, o.Intermediate, o.Layers, o.Heads, o.KVHeads, o.HeadDim = 258, 8, 8, 1, 2, 1, 4
	o.Init = fixtures.InitRandom
	o.Config = map[string]any{"sliding_window": nil, "use_sliding_window": false}
	if err := fixtures.Write(filepath.Join(dir, "m"), o); err != nil {
		f.Fatal(err)
	}
	seed := filepath.Join(dir, "m.gguf")
	if err := gguf.ConvertFile(filepath.Join(dir, "m"), seed, gguf.ConvertOptions{Type: gguf.F16}); err != nil {
		f.Fatal(err)
	}
	// The seed without its tokenizer metadata (OpenModel does not read it):
	// a few kilobytes.
	src, err := os.Open(seed)
	if err != nil {
		f.Fatal(err)
	}
	st, _ := src.Stat()
	gf, err := gguf.Open(src, st.Size(), seed)
	if err != nil {
		f.Fatal(err)
	}
	var kvs []gguf.KV
	for _, kv := range gf.KVs {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, kv)
		}
	}
	var ts []gguf.WriteTensor
	for _, ti := range gf.Tensors {
		raw, _ := gf.ReadRaw(ti.Name)
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: raw})
	}
	src.Close()
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, ts); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	work := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(work, "f.gguf")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := gguf.OpenModel(p, gguf.Options{})
		if err != nil {
			return
		}
		defer m.Close()
		if _, err := m.Inspect(); err != nil {
			t.Fatalf("opened but Inspect fails: %v", err)
		}
		for i := 0; i < m.Spec.Layers; i++ {
			for _, al := range m.Spec.LayerLinears(i) {
				l, err := m.Linear(al.Module)
				if err != nil {
					t.Fatalf("opened but %s: %v", al.Module, err)
				}
				out, in := l.Shape()
				_ = l.Dequantize(make([]float64, out*in)) // may fail (NaN weights), never panic
			}
		}
	})
}
