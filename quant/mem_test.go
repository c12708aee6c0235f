package quant

import (
	"encoding/binary"
	"math"
	"sort"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// memSrc is an in-memory Source for tests.
type memSrc struct {
	info map[string]checkpoint.TensorInfo
	data map[string][]byte
}

func newMem() *memSrc {
	return &memSrc{info: map[string]checkpoint.TensorInfo{}, data: map[string][]byte{}}
}

func (m *memSrc) add(name, dt string, shape []int, data []byte) *memSrc {
	m.info[name] = checkpoint.TensorInfo{Name: name, DType: checkpoint.DType(dt), Shape: shape, File: "mem.safetensors", Size: int64(len(data))}
	m.data[name] = data
	return m
}

func (m *memSrc) Tensor(name string) (checkpoint.TensorInfo, bool) {
	ti, ok := m.info[name]
	return ti, ok
}

func (m *memSrc) ReadRaw(name string) ([]byte, error) { return m.data[name], nil }

func (m *memSrc) Names() []string {
	var n []string
	for k := range m.info {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func i32s(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func i64s(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func floats(dt string, v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = EncodeFloat(b, dt, x)
	}
	return b
}

// sameBits compares float64 slices bit for bit (so -0 and +0 differ).
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func mustScheme(t *testing.T, js string) *Scheme {
	t.Helper()
	s, err := ParseJSON([]byte(js), "bfloat16", "test/config.json")
	if err != nil {
		t.Fatalf("ParseJSON: %v", err)
	}
	return s
}

func decode(t *testing.T, s *Scheme, src Source, module string) (Linear, []float64) {
	t.Helper()
	l, err := s.Open(src, module)
	if err != nil {
		t.Fatalf("Open(%s): %v", module, err)
	}
	out, in := l.Shape()
	w := make([]float64, out*in)
	if err := l.Dequantize(w); err != nil {
		t.Fatalf("Dequantize: %v", err)
	}
	return l, w
}
