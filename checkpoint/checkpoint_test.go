package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x448/float16"
)

// The worked example of formats.md §5: a 74-byte header padded to 80.
func TestSpecWorkedExample(t *testing.T) {
	got, err := Encode([]WriteTensor{{Name: "layer.weight_packed", DType: I32, Shape: []int{1, 1}, Data: []byte{0x10, 0x87, 0xA9, 0xFE}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	js := `{"layer.weight_packed":{"dtype":"I32","shape":[1,1],"data_offsets":[0,4]}}`
	if len(js) != 74 {
		t.Fatalf("spec JSON is %d bytes, want 74", len(js))
	}
	want := append([]byte{0x50, 0, 0, 0, 0, 0, 0, 0}, js+"      "...)
	want = append(want, 0x10, 0x87, 0xA9, 0xFE)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%q\nwant\n%q", got, want)
	}
	f, err := Open(bytes.NewReader(want), int64(len(want)), "ex.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("layer.weight_packed")
	if ti.Offset != 88 || ti.Size != 4 || f.HeaderSize() != 80 {
		t.Fatalf("tensor %+v header %d", ti, f.HeaderSize())
	}
	vals, shape, err := f.ReadFloat64("layer.weight_packed")
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(int32(-22444272)); vals[0] != want || len(shape) != 2 {
		t.Fatalf("value %v shape %v, want %v", vals, shape, want)
	}
}

// randomTensor makes a tensor of dt with random bytes and a shape whose
// byte size is whole.
func randomTensor(rng *rand.Rand, name string, dt DType) WriteTensor {
	shape := []int{1 + rng.IntN(3), 2 * (1 + rng.IntN(4))}
	if dt == F6E2M3 || dt == F6E3M2 {
		shape[1] = 4 * shape[1]
	}
	n := int64(shape[0] * shape[1])
	size, err := dt.ByteSize(n)
	if err != nil {
		panic(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return WriteTensor{Name: name, DType: dt, Shape: shape, Data: data}
}

func TestRoundTripEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ts []WriteTensor
	for _, dt := range DTypes() {
		ts = append(ts, randomTensor(rng, "t."+strings.ToLower(string(dt)), dt))
	}
	ts = append(ts, WriteTensor{Name: "scalar", DType: F32, Shape: []int{}, Data: []byte{0, 0, 0x80, 0x3f}})
	ts = append(ts, WriteTensor{Name: "empty", DType: BF16, Shape: []int{0, 5}, Data: nil})
	path := filepath.Join(t.TempDir(), "m.safetensors")
	md := map[string]string{"format": "pt"}
	if err := WriteFile(path, ts, md); err != nil {
		t.Fatal(err)
	}
	// The streaming writer and Encode agree byte for byte.
	disk, _ := os.ReadFile(path)
	if mem, err := Encode(ts, md); err != nil || !bytes.Equal(disk, mem) {
		t.Fatalf("WriteFile and Encode differ (%v)", err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	f, err := Open(fh, st.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	if f.HeaderSize()%8 != 0 {
		t.Errorf("header size %d not a multiple of 8", f.HeaderSize())
	}
	if f.Metadata()["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata())
	}
	if len(f.Names()) != len(ts) {
		t.Fatalf("%d tensors, want %d", len(f.Names()), len(ts))
	}
	var prevRank = 1 << 30
	var prevOff int64 = -1
	for _, w := range ts {
		ti, ok := f.Tensor(w.Name)
		if !ok {
			t.Fatalf("missing %s", w.Name)
		}
		raw, err := f.ReadRaw(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, w.Data) && !(len(raw) == 0 && len(w.Data) == 0) {
			t.Errorf("%s: raw bytes differ", w.Name)
		}
		if ti.DType != w.DType || len(ti.Shape) != len(w.Shape) {
			t.Errorf("%s: got %s %v", w.Name, ti.DType, ti.Shape)
		}
	}
	// Layout: dtype rank descending, then name.
	order := append([]WriteTensor(nil), ts...)
	SortForWrite(order)
	for _, w := range order {
		ti, _ := f.Tensor(w.Name)
		r := w.DType.rank()
		if r > prevRank || ti.Offset < prevOff {
			t.Errorf("%s (%s) at %d out of order", w.Name, w.DType, ti.Offset)
		}
		prevRank, prevOff = r, ti.Offset
	}
	if order[0].DType != U64 || order[len(order)-1].DType != BOOL {
		t.Errorf("order starts %s ends %s", order[0].DType, order[len(order)-1].DType)
	}
}

func TestDTypeBits(t *testing.T) {
	want := map[DType]int{BOOL: 8, F4: 4, F6E2M3: 6, F6E3M2: 6, U8: 8, I8: 8, F8E5M2: 8, F8E4M3: 8, F8E8M0: 8,
		F8E4M3FNUZ: 8, F8E5M2FNUZ: 8, I16: 16, U16: 16, F16: 16, BF16: 16, I32: 32, U32: 32, F32: 32, C64: 64, F64: 64, I64: 64, U64: 64}
	if len(DTypes()) != len(want) {
		t.Fatalf("%d dtypes, want %d", len(DTypes()), len(want))
	}
	for dt, b := range want {
		if dt.Bits() != b {
			t.Errorf("%s: %d bits, want %d", dt, dt.Bits(), b)
		}
	}
	if DType("F12").Bits() != 0 {
		t.Error("unknown dtype has bits")
	}
	if _, err := F4.ByteSize(3); err == nil {
		t.Error("3 F4 elements accepted")
	}
	if n, _ := F6E2M3.ByteSize(4); n != 3 {
		t.Errorf("4 F6 = %d bytes", n)
	}
}

func TestDecodeFloat64(t *testing.T) {
	nan := math.NaN()
	inf := math.Inf(1)
	le16 := func(v ...uint16) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	cases := []struct {
		dt   DType
		raw  []byte
		want []float64
	}{
		// float8_e4m3fn: bias 7, max 448, 0x7f NaN, smallest subnormal 2^-9.
		{F8E4M3, []byte{0x00, 0x80, 0x01, 0x08, 0x38, 0x7e, 0xfe, 0x7f, 0xff, 0x40, 0x3c}, []float64{0, math.Copysign(0, -1), 0x1p-9, 0x1p-6, 1, 448, -448, nan, nan, 2, 1.5}},
		{F8E5M2, []byte{0x3c, 0x7b, 0x7c, 0xfc, 0x7d, 0x01, 0x40}, []float64{1, 57344, inf, -inf, nan, 0x1p-16, 2}},
		{F8E8M0, []byte{127, 0, 254, 255, 130}, []float64{1, 0x1p-127, 0x1p127, nan, 8}},
		{F8E4M3FNUZ, []byte{0x40, 0x7f, 0x80, 0x00, 0x01}, []float64{1, 240, nan, 0, 0x1p-10}},
		{F8E5M2FNUZ, []byte{0x40, 0x7f, 0x80}, []float64{1, 57344, nan}},
		{F16, le16(0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00, 0xfc00, 0x7e00, 0x3555), []float64{1, -2, 65504, 0x1p-24, 0x1p-14, inf, -inf, nan, 0.333251953125}},
		{BF16, le16(0x3f80, 0xc040, 0x7f80, 0x0001, 0x3eab), []float64{1, -3, inf, 0x1p-133, 0.333984375}},
		{I8, []byte{0x80, 0x7f, 0xff}, []float64{-128, 127, -1}},
		{U8, []byte{0x80, 0xff}, []float64{128, 255}},
		{BOOL, []byte{0, 1, 2}, []float64{0, 1, 1}},
		{I16, le16(0x8000, 0x7fff), []float64{-32768, 32767}},
		{U16, le16(0xffff), []float64{65535}},
		{I32, []byte{0, 0, 0, 0x80, 1, 0, 0, 0}, []float64{math.MinInt32, 1}},
		{U32, []byte{0xff, 0xff, 0xff, 0xff}, []float64{math.MaxUint32}},
		{F32, []byte{0, 0, 0x80, 0x3f, 1, 0, 0, 0}, []float64{1, 0x1p-149}},
		{F64, []byte{1, 0, 0, 0, 0, 0, 0xf0, 0x3f}, []float64{1 + 0x1p-52}},
		{I64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x20, 0}, []float64{-1, 1 << 53}},
		{U64, []byte{0, 0, 0, 0, 0, 0, 0x20, 0}, []float64{1 << 53}},
	}
	for _, c := range cases {
		got := make([]float64, len(c.want))
		if err := DecodeFloat64(c.dt, c.raw, got); err != nil {
			t.Errorf("%s: %v", c.dt, err)
			continue
		}
		for i := range got {
			w := c.want[i]
			if math.IsNaN(w) != math.IsNaN(got[i]) || (!math.IsNaN(w) && (got[i] != w || math.Signbit(got[i]) != math.Signbit(w))) {
				t.Errorf("%s[%d] (%#x): got %v want %v", c.dt, i, c.raw, got[i], w)
			}
		}
	}
	// Every F16 pattern equals an independent decoder's (x448/float16,
	// exact to float32), sign of zero and NaN included.
	for h := 0; h < 1<<16; h++ {
		v := F16ToFloat64(uint16(h))
		w := float64(float16.Frombits(uint16(h)).Float32())
		if math.IsNaN(v) != math.IsNaN(w) || (!math.IsNaN(w) && (v != w || math.Signbit(v) != math.Signbit(w))) {
			t.Fatalf("F16 %#04x = %v, x448/float16 gives %v", h, v, w)
		}
	}
	for _, bad := range []struct {
		dt  DType
		raw []byte
		n   int
		is  error
	}{
		{F4, []byte{0}, 2, ErrUnsupported},
		{C64, make([]byte, 8), 1, ErrUnsupported},
		{DType("Q4"), []byte{0}, 1, ErrUnsupported},
		{F32, make([]byte, 7), 2, nil},
		{I64, []byte{1, 0, 0, 0, 0, 0, 0x20, 0}, 1, nil},
		{U64, []byte{0, 0, 0, 0, 0, 0, 0, 0x80}, 1, nil},
	} {
		err := DecodeFloat64(bad.dt, bad.raw, make([]float64, bad.n))
		if err == nil || (bad.is != nil && !errors.Is(err, bad.is)) {
			t.Errorf("%s %x: err %v", bad.dt, bad.raw, err)
		}
	}
}

// header builds a file from a raw JSON header and a data section.
func header(js string, data int) []byte {
	b := make([]byte, 8, 8+len(js)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(js)))
	b = append(b, js...)
	return append(b, make([]byte, data)...)
}

func TestOpenRejects(t *testing.T) {
	good := header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)
	withLen := func(n uint64) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(b, n)
		return b
	}
	cases := []struct {
		name string
		file []byte
		want string // substring of the message
	}{
		{"empty", nil, "shorter than the 8-byte header length"},
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"truncated header", good[:20], "exceeds the 12 bytes after"},
		{"truncated data", good[:len(good)-1], "run past the end of the data"},
		{"header length > file", withLen(1000), "header length 1000 exceeds the"},
		{"header length 2^60", withLen(1 << 60), "header length 1152921504606846976 exceeds the limit 100000000"},
		{"header length 2^64-1", withLen(math.MaxUint64), "exceeds the limit"},
		{"not json", header(`{not json}`, 0), "header JSON"},
		{"not object", header(`[1,2,3]`, 0), "does not start with '{'"},
		{"leading space", header(` {}`, 0), "does not start with '{'"},
		{"truncated json", header(`{"a":{"dtype":"F32"`, 0), "tensor \"a\""},
		{"invalid utf8", header("{\"\xff\":1}", 0), "UTF-8"},
		{"bad padding", header(`{}  x`, 0), "want space padding"},
		{"newline padding", header("{}\n", 0), "want space padding"},
		{"two objects", header(`{}{}`, 0), "want space padding"},
		{"unknown dtype", header(`{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}`, 8), `tensor "a": unknown dtype "F12"`},
		{"missing dtype", header(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, 8), "missing dtype"},
		{"missing shape", header(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, 8), "missing shape"},
		{"missing offsets", header(`{"a":{"dtype":"F32","shape":[2]}}`, 8), "missing data_offsets"},
		{"null entry", header(`{"a":null}`, 0), "missing dtype"},
		{"entry not object", header(`{"a":5}`, 0), `tensor "a": entry`},
		{"negative dim", header(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), "negative dimension -2"},
		{"fractional dim", header(`{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, 8), `tensor "a": entry`},
		{"huge dim", header(`{"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}}`, 8), `tensor "a": entry`},
		{"shape overflow", header(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), "overflows"},
		{"bytes overflow", header(`{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}}`, 8), "overflow int64 bytes"},
		{"size mismatch", header(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), "hold 8 bytes, want 12 for F32 [3]"},
		{"F4 odd", header(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), "not a whole number of bytes"},
		{"three offsets", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, 8), "has 3 values"},
		{"negative offset", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, 8), "negative data_offsets"},
		{"end before begin", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`, 8), "end before they begin"},
		{"out of range", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 8), "run past the end of the data (8 bytes)"},
		{"hole", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 12), `tensor "b": data_offsets begin at 8, leaving a hole after byte 4`},
		{"hole at start", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "leaving a hole after byte 0"},
		{"overlap", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), `tensor "b": data_offsets [4, 8] overlap`},
		{"trailing bytes", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 9), "1 trailing bytes"},
		{"duplicate tensor", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), `tensor "a": duplicate tensor name`},
		{"duplicate metadata", header(`{"__metadata__":{},"__metadata__":{}}`, 0), "duplicate __metadata__"},
		{"bad metadata", header(`{"__metadata__":{"a":1}}`, 0), "__metadata__ must be an object of strings"},
		{"header too short", header(`{`, 0), "too short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Open(bytes.NewReader(c.file), int64(len(c.file)), "bad.safetensors")
			if err == nil {
				t.Fatalf("accepted: %v", f.Names())
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("error %v does not wrap ErrFormat", err)
			}
			if !strings.Contains(err.Error(), "bad.safetensors") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to name the file and contain %q", err, c.want)
			}
		})
	}
	if _, err := Open(bytes.NewReader(good), int64(len(good)), "good"); err != nil {
		t.Fatalf("good file rejected: %v", err)
	}
}

func TestOpenAccepts(t *testing.T) {
	for _, js := range []string{
		`{}`,
		`{"__metadata__":{"format":"pt"}}   `,
		`{"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F4","shape":[2],"data_offsets":[4,5]},"x":{"dtype":"I8","shape":[],"data_offsets":[5,6],"extra":1}}`,
	} {
		end := 0
		if strings.Contains(js, `"x"`) {
			end = 6
		}
		b := header(js, end)
		if _, err := Open(bytes.NewReader(b), int64(len(b)), "ok"); err != nil {
			t.Errorf("%s: %v", js, err)
		}
	}
}

// failingReader returns fewer bytes than asked for, like a file truncated
// after it was opened.
type failingReader struct{ b []byte }

func (r failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.b)) {
		return 0, errors.New("gone")
	}
	n := copy(p, r.b[off:])
	return n, nil
}

func TestReadShortFile(t *testing.T) {
	good := header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)
	f, err := Open(failingReader{good[:len(good)-4]}, int64(len(good)), "shrunk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadRaw("a"); err == nil || !strings.Contains(err.Error(), `shrunk: tensor "a"`) {
		t.Errorf("short read: %v", err)
	}
	if _, err := f.ReadRaw("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v", err)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
