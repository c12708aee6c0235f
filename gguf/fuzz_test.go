package gguf_test

import (
	"bytes"
	"errors"
	"sort"
	"testing"

	"github.com/qppl/qppl/gguf"
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
			want, err := ti.Type.RowBytes(ti.Numel())
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
