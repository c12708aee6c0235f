package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/gguf"
)

// builder writes raw GGUF bytes field by field, so tests can lie.
type builder struct{ bytes.Buffer }

func (b *builder) u32(v uint32) *builder { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *builder) u64(v uint64) *builder { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *builder) str(s string) *builder { b.u64(uint64(len(s))); b.WriteString(s); return b }
func (b *builder) pad(align int) *builder {
	for b.Len()%align != 0 {
		b.WriteByte(0)
	}
	return b
}

// validFile returns a small valid v3 file: two metadata keys and two F32
// tensors of 8 and 4 elements.
func validFile() []byte {
	var b builder
	b.u32(0x46554747).u32(3).u64(2).u64(2)
	b.str("general.architecture").u32(8).str("llama")
	b.str("general.alignment").u32(4).u32(32)
	b.str("a").u32(1).u64(8).u32(0).u64(0)
	b.str("b").u32(1).u64(4).u32(0).u64(32)
	b.pad(32)
	for i := 0; i < 8; i++ {
		b.u32(math.Float32bits(float32(i)))
	}
	for i := 0; i < 4; i++ {
		b.u32(math.Float32bits(float32(-i)))
	}
	return b.Bytes()
}

func open(data []byte) (*gguf.File, error) {
	return gguf.Open(bytes.NewReader(data), int64(len(data)), "x.gguf")
}

func TestOpenValid(t *testing.T) {
	f, err := open(validFile())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 || len(f.Tensors) != 2 || len(f.KVs) != 2 {
		t.Fatalf("parsed %+v", f)
	}
	a, _ := f.Tensor("a")
	raw, err := f.ReadRaw("a")
	if err != nil || len(raw) != 32 || a.Offset != f.DataOffset || a.Size != 32 {
		t.Fatalf("tensor a %+v: %d bytes, %v", a, len(raw), err)
	}
	dst := make([]float32, 8)
	if err := gguf.PlainDecoder(gguf.F32, raw, 8, dst); err != nil || dst[7] != 7 {
		t.Fatalf("decoded %v, %v", dst, err)
	}
	if v, _ := f.Get("general.architecture"); v.String() != `"llama"` {
		t.Fatalf("architecture %v", v)
	}
}

// hostile builds a file from a header prefix written by fn.
func hostile(fn func(b *builder)) []byte {
	var b builder
	fn(&b)
	return b.Bytes()
}

// TestOpenHostile: every malformed or lying file is an error wrapping
// ErrFormat (or ErrUnsupported) that names the file and the field, never a
// panic or a huge allocation.
func TestOpenHostile(t *testing.T) {
	hdr := func(b *builder, nt, nkv uint64) { b.u32(0x46554747).u32(3).u64(nt).u64(nkv) }
	valid := validFile()
	cases := []struct {
		name  string
		data  []byte
		unsup bool
		want  string // substring of the error
	}{
		{"empty", nil, false, "magic"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), false, "magic"},
		{"version 1", hostile(func(b *builder) { b.u32(0x46554747).u32(1) }), true, "v1"},
		{"big endian", hostile(func(b *builder) { b.u32(0x46554747).u32(0x03000000) }), true, "big-endian"},
		{"version 9", hostile(func(b *builder) { b.u32(0x46554747).u32(9) }), false, "version"},
		{"truncated counts", valid[:12], false, "tensor_count"},
		{"huge tensor count", hostile(func(b *builder) { hdr(b, 1<<62, 0) }), false, "tensor_count"},
		{"lying kv count", hostile(func(b *builder) { hdr(b, 0, 1000) }), false, "metadata_kv_count"},
		{"huge string", hostile(func(b *builder) { hdr(b, 0, 1); b.u64(1 << 60).Write(make([]byte, 16)) }), false, "length"},
		{"string past end", hostile(func(b *builder) { hdr(b, 0, 1); b.u64(1000).WriteString("abcdefghijklmn") }), false, "truncated"},
		{"unknown value type", hostile(func(b *builder) { hdr(b, 0, 1); b.str("k").u32(13) }), false, "unknown value type"},
		{"unknown array type", hostile(func(b *builder) { hdr(b, 0, 1); b.str("k").u32(9).u32(77).u64(0) }), false, "element type"},
		{"huge array", hostile(func(b *builder) { hdr(b, 0, 1); b.str("k").u32(9).u32(10).u64(1 << 61) }), false, "array length"},
		{"deep arrays", hostile(func(b *builder) {
			hdr(b, 0, 1)
			b.str("k").u32(9)
			for i := 0; i < 20; i++ {
				b.u32(9).u64(1)
			}
			b.u32(0).u64(0)
		}), false, "nested"},
		{"bad bool", hostile(func(b *builder) { hdr(b, 0, 1); b.str("k").u32(7).WriteByte(2) }), false, "bool"},
		{"duplicate key", hostile(func(b *builder) { hdr(b, 0, 2); b.str("k").u32(4).u32(1).str("k").u32(4).u32(1) }), false, "twice"},
		{"alignment 3", hostile(func(b *builder) { hdr(b, 0, 1); b.str("general.alignment").u32(4).u32(3) }), false, "general.alignment"},
		{"alignment string", hostile(func(b *builder) { hdr(b, 0, 1); b.str("general.alignment").u32(8).str("32") }), false, "general.alignment"},
		{"5 dims", hostile(func(b *builder) { hdr(b, 1, 0); b.str("t").u32(5).u64(1).u64(1).u64(1).u64(1).u64(1).u32(0).u64(0) }), false, "n_dims"},
		{"zero dim", hostile(func(b *builder) { hdr(b, 1, 0); b.str("t").u32(1).u64(0).u32(0).u64(0) }), false, "ne[0]"},
		{"overflowing dims", hostile(func(b *builder) {
			hdr(b, 1, 0)
			b.str("t").u32(2).u64(1 << 40).u64(1 << 40).u32(0).u64(0)
			b.Write(make([]byte, 64))
		}), false, "ne[1]"},
		{"unknown ggml type", hostile(func(b *builder) { hdr(b, 1, 0); b.str("t").u32(1).u64(32).u32(4).u64(0); b.Write(make([]byte, 64)) }), true, "type id 4"},
		{"partial block", hostile(func(b *builder) { hdr(b, 1, 0); b.str("t").u32(1).u64(31).u32(2).u64(0); b.Write(make([]byte, 64)) }), false, "block size"},
		{"misaligned offset", hostile(func(b *builder) {
			hdr(b, 1, 0)
			b.str("t").u32(1).u64(1).u32(0).u64(4)
			b.pad(32).Write(make([]byte, 64))
		}), false, "alignment"},
		{"offset past end", hostile(func(b *builder) {
			hdr(b, 1, 0)
			b.str("t").u32(1).u64(1).u32(0).u64(1 << 40)
			b.pad(32).Write(make([]byte, 64))
		}), false, "offset"},
		{"size past end", hostile(func(b *builder) {
			hdr(b, 1, 0)
			b.str("t").u32(1).u64(1000).u32(0).u64(0)
			b.pad(32).Write(make([]byte, 64))
		}), false, "truncated"},
		{"overlap", hostile(func(b *builder) {
			hdr(b, 2, 0)
			b.str("t").u32(1).u64(16).u32(0).u64(0)
			b.str("u").u32(1).u64(16).u32(0).u64(32)
			b.pad(32).Write(make([]byte, 256))
		}), false, "overlaps"},
		{"duplicate tensor", hostile(func(b *builder) {
			hdr(b, 2, 0)
			b.str("t").u32(1).u64(8).u32(0).u64(0)
			b.str("t").u32(1).u64(8).u32(0).u64(32)
			b.pad(32).Write(make([]byte, 128))
		}), false, "twice"},
		{"long name", hostile(func(b *builder) {
			hdr(b, 1, 0)
			b.str(strings.Repeat("n", 64)).u32(1).u64(1).u32(0).u64(0)
			b.Write(make([]byte, 64))
		}), false, "name"},
		{"truncated data", valid[:len(valid)-1], false, "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := open(c.data)
			if err == nil {
				t.Fatal("accepted")
			}
			want := gguf.ErrFormat
			if c.unsup {
				want = gguf.ErrUnsupported
			}
			if !errors.Is(err, want) {
				t.Fatalf("%v does not wrap %v", err, want)
			}
			if !strings.Contains(err.Error(), "x.gguf") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name the file and %q", err, c.want)
			}
		})
	}
	// Every truncation of a valid file is refused.
	for n := 0; n < len(valid); n++ {
		if _, err := open(valid[:n]); !errors.Is(err, gguf.ErrFormat) {
			t.Fatalf("%d of %d bytes: %v", n, len(valid), err)
		}
	}
}

// TestValueRoundTrip writes every metadata value type, nested arrays
// included, and reads them back.
func TestValueRoundTrip(t *testing.T) {
	u8, _ := gguf.ScalarArray(gguf.TypeUint8, []byte{1, 2, 255})
	i16, _ := gguf.ScalarArray(gguf.TypeInt16, []byte{0xff, 0xff, 2, 0})
	b8, _ := gguf.ScalarArray(gguf.TypeBool, []byte{1, 0})
	f64, _ := gguf.ScalarArray(gguf.TypeFloat64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(-2.5)))
	kvs := []gguf.KV{
		{Key: "u16", Value: gguf.Uint16Value(65535)},
		{Key: "u32", Value: gguf.Uint32Value(1 << 31)},
		{Key: "i32", Value: gguf.Int32Value(-7)},
		{Key: "u64", Value: gguf.Uint64Value(1 << 63)},
		{Key: "f32", Value: gguf.Float32Value(1e-5)},
		{Key: "f64", Value: gguf.Float64Value(math.Pi)},
		{Key: "bool", Value: gguf.BoolValue(true)},
		{Key: "str", Value: gguf.StringValue("héllo")},
		{Key: "strs", Value: gguf.StringArray([]string{"a", "", "ccc"})},
		{Key: "u8s", Value: u8},
		{Key: "i16s", Value: i16},
		{Key: "bools", Value: b8},
		{Key: "f64s", Value: f64},
		{Key: "nested", Value: gguf.ArrayOf([]gguf.Value{gguf.StringArray([]string{"x"}), gguf.ArrayOf([]gguf.Value{u8}), gguf.Int32Array([]int32{-1, 2})})},
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, []gguf.WriteTensor{{Name: "t", Dims: []int64{32, 2}, Type: gguf.Q8_0, Data: make([]byte, 68)}}); err != nil {
		t.Fatal(err)
	}
	f, err := open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) gguf.Value {
		v, ok := f.Get(k)
		if !ok {
			t.Fatalf("no %s", k)
		}
		return v
	}
	if v, _ := get("u16").Uint(); v != 65535 {
		t.Error("u16", v)
	}
	if v, _ := get("u32").Uint(); v != 1<<31 {
		t.Error("u32", v)
	}
	if v, _ := get("i32").Int(); v != -7 {
		t.Error("i32", v)
	}
	if v, ok := get("u64").Uint(); v != 1<<63 || !ok {
		t.Error("u64", v)
	}
	if _, ok := get("u64").Int(); ok {
		t.Error("2^63 read as int64")
	}
	if v, _ := get("f32").Float(); v != float64(float32(1e-5)) {
		t.Error("f32", v)
	}
	if v, _ := get("f64").Float(); v != math.Pi {
		t.Error("f64", v)
	}
	if v, ok := get("bool").Bool(); !v || !ok {
		t.Error("bool")
	}
	if v, _ := get("str").Str(); v != "héllo" {
		t.Error("str", v)
	}
	a, _ := get("strs").Array()
	if ss, _ := a.Strings(); strings.Join(ss, ",") != "a,,ccc" {
		t.Error("strs", ss)
	}
	a, _ = get("u8s").Array()
	if v, _ := a.At(2).Uint(); a.Len != 3 || v != 255 {
		t.Error("u8s")
	}
	a, _ = get("i16s").Array()
	if v, _ := a.At(0).Int(); v != -1 {
		t.Error("i16s", v)
	}
	a, _ = get("bools").Array()
	if v, _ := a.At(0).Bool(); !v {
		t.Error("bools")
	}
	a, _ = get("f64s").Array()
	if v, _ := a.At(0).Float(); v != -2.5 {
		t.Error("f64s", v)
	}
	a, _ = get("nested").Array()
	inner, _ := a.At(1).Array()
	deep, _ := inner.At(0).Array()
	last, _ := a.At(2).Array()
	if v, _ := deep.At(1).Uint(); a.Len != 3 || v != 2 {
		t.Error("nested", v)
	}
	if v, _ := last.At(0).Int(); v != -1 {
		t.Error("nested int32", v)
	}
	ti, _ := f.Tensor("t")
	if ti.Size != 68 || ti.Type != gguf.Q8_0 || ti.Rows() != 2 {
		t.Errorf("tensor %+v", ti)
	}
}

// TestVersion2 reads a v2 file (same layout as v3 for little-endian files).
func TestVersion2(t *testing.T) {
	data := validFile()
	binary.LittleEndian.PutUint32(data[4:], 2)
	if f, err := open(data); err != nil || f.Version != 2 {
		t.Fatalf("v2: %v", err)
	}
}

func TestF16Decode(t *testing.T) {
	cases := map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x0001: 5.960464477539063e-08, 0x7bff: 65504, 0x8000: float32(math.Copysign(0, -1)), 0x0400: 6.103515625e-05}
	for h, want := range cases {
		dst := make([]float32, 1)
		if err := gguf.PlainDecoder(gguf.F16, binary.LittleEndian.AppendUint16(nil, h), 1, dst); err != nil || math.Float32bits(dst[0]) != math.Float32bits(want) {
			t.Errorf("F16 %#04x = %v, want %v (%v)", h, dst[0], want, err)
		}
	}
	dst := make([]float32, 1)
	if err := gguf.PlainDecoder(gguf.Q4_K, make([]byte, 144), 256, make([]float32, 256)); !errors.Is(err, gguf.ErrUnsupported) {
		t.Errorf("Q4_K without a decoder: %v", err)
	}
	_ = dst
}
