package quant

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

// Worked examples of ../shared/specs/formats.md, byte for byte.

func ctJSON(format, weights, input string) string {
	if input == "" {
		input = "null"
	}
	return fmt.Sprintf(`{"config_groups":{"group_0":{"format":%q,"targets":["Linear"],"input_activations":%s,"output_activations":null,"weights":%s}},
"format":%q,"ignore":["lm_head"],"kv_cache_scheme":null,"quant_method":"compressed-tensors","quantization_status":"compressed","sparsity_config":{},"transform_config":{},"version":"0.x.y"}`,
		format, input, weights, format)
}

func intArgs(bits int, strategy string, gs int, sym bool) string {
	g := "null"
	if gs != 0 {
		g = fmt.Sprint(gs)
	}
	return fmt.Sprintf(`{"actorder":null,"block_structure":null,"dynamic":false,"group_size":%s,"num_bits":%d,"observer":"minmax","observer_kwargs":{},"scale_dtype":null,"strategy":%q,"symmetric":%v,"type":"int","zp_dtype":null}`, g, bits, strategy, sym)
}

// §2.1 sym example: s=0.5 (bf16 00 3F), word 0xFEA98710 (bytes 10 87 A9 FE).
func TestSpecPackInt4SymExample(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, true), ""))
	src := newMem().
		add("m.weight_packed", "I32", []int{1, 1}, []byte{0x10, 0x87, 0xA9, 0xFE}).
		add("m.weight_scale", "BF16", []int{1, 1}, []byte{0x00, 0x3F}).
		add("m.weight_shape", "I64", []int{2}, i64s(1, 8))
	l, w := decode(t, s, src, "m")
	sameBits(t, "W", w, []float64{-4, -3.5, -0.5, 0, 0.5, 1, 3, 3.5})
	if got := int32(l.(*PackedInt).Packed[0]); got != -22444272 {
		t.Errorf("word as I32 = %d, want -22444272", got)
	}
	if l.StoredBytes() != 4+2+16 {
		t.Errorf("StoredBytes = %d, want 22", l.StoredBytes())
	}
	if l.Format() != "ct-int4-g8-sym" {
		t.Errorf("Format = %q", l.Format())
	}
}

// §2.1 asym zero point example: zp=[-8,-3,0,1,2,3,4,7] packed along dim 0 →
// I32 [1,1] 0xFCBA9850 (bytes 50 98 BA FC).
func TestSpecPackedZeroPointExample(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, false), ""))
	// 8 rows × 8 columns, every code u = 8 (q = 0): W = -zp * s.
	src := newMem().
		add("m.weight_packed", "I32", []int{8, 1}, i32s(0x88888888, 0x88888888, 0x88888888, 0x88888888, 0x88888888, 0x88888888, 0x88888888, 0x88888888)).
		add("m.weight_scale", "BF16", []int{8, 1}, floats("BF16", 1, 1, 1, 1, 1, 1, 1, 0.5)).
		add("m.weight_zero_point", "I32", []int{1, 1}, []byte{0x50, 0x98, 0xBA, 0xFC}).
		add("m.weight_shape", "I64", []int{2}, i64s(8, 8))
	l, w := decode(t, s, src, "m")
	zp := []int32{-8, -3, 0, 1, 2, 3, 4, 7}
	for r := 0; r < 8; r++ {
		if got := l.(*PackedInt).Zero[r]; got != zp[r] {
			t.Errorf("zero[%d] = %d, want %d", r, got, zp[r])
		}
		sc := 1.0
		if r == 7 {
			sc = 0.5
		}
		for c := 0; c < 8; c++ {
			if want := -float64(zp[r]) * sc; w[r*8+c] != want {
				t.Errorf("W[%d,%d] = %v, want %v", r, c, w[r*8+c], want)
			}
		}
	}
}

// §2.1 CT test vectors.
func TestSpecCTVectors(t *testing.T) {
	cases := []struct {
		bits  int
		words []uint32
		q     []int
	}{
		{4, []uint32{0x76543210, 0x0000CBA9}, []int{-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, -8, -8, -8, -8}},
		{8, []uint32{0x84838281}, []int{1, 2, 3, 4}},
	}
	for _, c := range cases {
		s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(c.bits, "channel", -1, true), ""))
		src := newMem().
			add("m.weight_packed", "I32", []int{1, len(c.words)}, i32s(c.words...)).
			add("m.weight_scale", "F32", []int{1, 1}, floats("F32", 1)).
			add("m.weight_shape", "I64", []int{2}, i64s(1, int64(len(c.q))))
		_, w := decode(t, s, src, "m")
		want := make([]float64, len(c.q))
		for i, q := range c.q {
			want[i] = float64(q)
		}
		sameBits(t, fmt.Sprintf("int%d", c.bits), w, want)
		if int32(c.words[0]) == -2071756159 != (c.bits == 8) {
			t.Errorf("I32 view of 0x84838281 should be -2071756159")
		}
	}
}

// §2.2 NVFP4 example: bytes 10 3A D4 76 0F 82 76 2C, scale 0x7E, gs 896
// (F32 bytes 00 00 60 44); effective scale 0.5.
func TestSpecNVFP4Example(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatNVFP4, `{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16,"symmetric":true,"dynamic":false,"scale_dtype":"torch.float8_e4m3fn"}`, ""))
	src := newMem().
		add("m.weight_packed", "U8", []int{1, 8}, []byte{0x10, 0x3A, 0xD4, 0x76, 0x0F, 0x82, 0x76, 0x2C}).
		add("m.weight_scale", "F8_E4M3", []int{1, 1}, []byte{0x7E}).
		add("m.weight_global_scale", "F32", []int{1}, []byte{0x00, 0x00, 0x60, 0x44})
	l, w := decode(t, s, src, "m")
	negZero := math.Copysign(0, -1)
	sameBits(t, "W", w, []float64{0, .25, -.5, .75, 1, -1.5, 2, 3, -3, 0, .5, negZero, 2, 3, -1, .5})
	if l.(*NVFP4).GlobalScale != 896 {
		t.Errorf("global scale %v", l.(*NVFP4).GlobalScale)
	}
}

// §2.2 E4M3 reference values and §8.5 E4 tie (38 → 40, 0x62).
func TestSpecE4M3(t *testing.T) {
	for _, c := range []struct {
		v float64
		b byte
	}{{448, 0x7E}, {224, 0x76}, {-128, 0xF0}, {1.25, 0x3A}, {40, 0x62}, {0x1p-9, 0x01}, {0x1p-8, 0x02}} {
		if got := EncodeE4M3(c.v); got != c.b {
			t.Errorf("EncodeE4M3(%v) = %02X, want %02X", c.v, got, c.b)
		}
		if got := DecodeE4M3(c.b); got != c.v {
			t.Errorf("DecodeE4M3(%02X) = %v, want %v", c.b, got, c.v)
		}
	}
	for _, c := range []struct{ in, want float64 }{{38, 40}, {214.67, 208}, {216, 224}, {-449.56, -448}, {1e-9, 0}, {0x1p-10, 0}, {1.5 * 0x1p-9, 0x1p-8}, {29.66, 30}, {-1.171, -1.125}} {
		if got := RoundE4M3(c.in); got != c.want {
			t.Errorf("RoundE4M3(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(DecodeE4M3(0x7F)) || !math.IsNaN(DecodeE4M3(0xFF)) {
		t.Error("0x7F/0xFF must decode to NaN")
	}
}

// §2.3 FP8 channel example: bytes 7E F0 3A 00 with s = 2^-7 (bf16 3C00).
func TestSpecFP8ChannelExample(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatFloatQuantized, `{"num_bits":8,"type":"float","strategy":"channel","symmetric":true,"dynamic":false}`, ""))
	src := newMem().
		add("m.weight", "F8_E4M3", []int{1, 4}, []byte{0x7E, 0xF0, 0x3A, 0x00}).
		add("m.weight_scale", "BF16", []int{1, 1}, []byte{0x00, 0x3C})
	l, w := decode(t, s, src, "m")
	sameBits(t, "W", w, []float64{3.5, -1, 0.009765625, 0})
	if l.Format() != "fp8-channel" {
		t.Errorf("Format = %q", l.Format())
	}
}

// §2.4 int-quantized example: bytes 7F 80 20 00 with s = 2^-6 (bf16 3C80).
func TestSpecInt8Example(t *testing.T) {
	s := mustScheme(t, ctJSON(FormatIntQuantized, intArgs(8, "channel", -1, true), `{"num_bits":8,"type":"int","strategy":"token","symmetric":true,"dynamic":true}`))
	src := newMem().
		add("m.weight", "I8", []int{1, 4}, []byte{0x7F, 0x80, 0x20, 0x00}).
		add("m.weight_scale", "BF16", []int{1, 1}, []byte{0x80, 0x3C})
	l, w := decode(t, s, src, "m")
	sameBits(t, "W", w, []float64{127.0 / 64, -2, 0.5, 0})
	if l.InputQuantizer() == nil {
		t.Error("W8A8 must have an input quantizer")
	}
}

// §4 GPTQ example: u=[0,1,7,8,9,10,14,15] down one column → 0xFEA98710;
// symmetric z=8 → v1 qzeros word 0x77777777 (2004318071), v2 0x88888888.
func TestSpecGPTQExample(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		cf, zw := "gptq", uint32(0x77777777)
		if v2 {
			cf, zw = "gptq_v2", 0x88888888
		}
		s := mustScheme(t, fmt.Sprintf(`{"quant_method":"gptq","bits":4,"group_size":8,"desc_act":false,"sym":true,"checkpoint_format":%q}`, cf))
		// in=8, out=8: column o has codes u[i] for all o.
		qw := make([]uint32, 8)
		for o := range qw {
			qw[o] = 0xFEA98710
		}
		src := newMem().
			add("m.qweight", "I32", []int{1, 8}, i32s(qw...)).
			add("m.qzeros", "I32", []int{1, 1}, i32s(zw)).
			add("m.scales", "F16", []int{1, 8}, floats("F16", 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25)).
			add("m.g_idx", "I32", []int{8}, i32s(0, 0, 0, 0, 0, 0, 0, 0))
		_, w := decode(t, s, src, "m")
		u := []float64{0, 1, 7, 8, 9, 10, 14, 15}
		for o := 0; o < 8; o++ {
			sc := 0.5
			if o == 7 {
				sc = 0.25
			}
			for i := 0; i < 8; i++ {
				if want := (u[i] - 8) * sc; w[o*8+i] != want {
					t.Fatalf("%s W[%d,%d] = %v, want %v", cf, o, i, w[o*8+i], want)
				}
			}
		}
	}
	if int32(0x77777777) != 2004318071 {
		t.Fatal("word value")
	}
}

// §4 AWQ example: column values 0..7 → 0x75316420 (bytes 20 64 31 75).
func TestSpecAWQExample(t *testing.T) {
	s := mustScheme(t, `{"quant_method":"awq","bits":4,"group_size":8,"zero_point":true,"version":"gemm"}`)
	qw := make([]uint32, 8) // [in=8][out/8=1]
	for i := range qw {
		qw[i] = 0x75316420
	}
	src := newMem().
		add("m.qweight", "I32", []int{8, 1}, []byte{0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75, 0x20, 0x64, 0x31, 0x75}).
		add("m.qzeros", "I32", []int{1, 1}, i32s(0)).
		add("m.scales", "F16", []int{1, 8}, floats("F16", 1, 1, 1, 1, 1, 1, 1, 1))
	_, w := decode(t, s, src, "m")
	for o := 0; o < 8; o++ {
		for i := 0; i < 8; i++ {
			if w[o*8+i] != float64(o) {
				t.Fatalf("W[%d,%d] = %v, want %d", o, i, w[o*8+i], o)
			}
		}
	}
}

// AWQOrder and AWQNibble are the spec's ORDER and REV tables, inverse to
// each other.
func TestAWQOrderTables(t *testing.T) {
	order := [8]int{0, 2, 4, 6, 1, 3, 5, 7}
	rev := [8]int{0, 4, 1, 5, 2, 6, 3, 7}
	for k := range 8 {
		if AWQOrder(k) != order[k] || AWQNibble(k) != rev[k] || AWQNibble(AWQOrder(k)) != k {
			t.Errorf("k=%d: AWQOrder %d AWQNibble %d", k, AWQOrder(k), AWQNibble(k))
		}
	}
}

// unionSrc reads tensors from a checkpoint.File first, then from a memSrc.
type unionSrc struct {
	f *checkpoint.File
	m *memSrc
}

func (u unionSrc) Tensor(n string) (checkpoint.TensorInfo, bool) {
	if ti, ok := u.f.Tensor(n); ok {
		return ti, true
	}
	return u.m.Tensor(n)
}
func (u unionSrc) ReadRaw(n string) ([]byte, error) {
	if _, ok := u.f.Tensor(n); ok {
		return u.f.ReadRaw(n)
	}
	return u.m.ReadRaw(n)
}
func (u unionSrc) Names() []string { return append(u.f.Names(), u.m.Names()...) }

// §5: the safetensors example file (N = 80, the packed word of §2.1) read by
// checkpoint.Open and decoded with the §2.1 scale.
func TestSpecSafetensorsExample(t *testing.T) {
	hdr := `{"layer.weight_packed":{"dtype":"I32","shape":[1,1],"data_offsets":[0,4]}}`
	if len(hdr) != 74 {
		t.Fatalf("header is %d bytes, spec says 74", len(hdr))
	}
	file := append([]byte{0x50, 0, 0, 0, 0, 0, 0, 0}, hdr+"      "...)
	file = append(file, 0x10, 0x87, 0xA9, 0xFE)
	f, err := checkpoint.Open(bytes.NewReader(file), int64(len(file)), "example.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	s := mustScheme(t, ctJSON(FormatPackQuantized, intArgs(4, "group", 8, true), ""))
	src := unionSrc{f, newMem().
		add("layer.weight_scale", "BF16", []int{1, 1}, []byte{0x00, 0x3F}).
		add("layer.weight_shape", "I64", []int{2}, i64s(1, 8))}
	_, w := decode(t, s, src, "layer")
	sameBits(t, "W", w, []float64{-4, -3.5, -0.5, 0, 0.5, 1, 3, 3.5})
}
