package quant

import (
	"testing"
)

// FuzzOpen builds a module's tensors (names of one format, dtypes and
// shapes partly chosen by the input, contents from the input) and opens and
// decodes it: every outcome must be an error or a finite decode, never a
// panic or an out-of-range access.
func FuzzOpen(f *testing.F) {
	f.Add(uint8(0), []byte{2, 2, 1, 8, 0x10, 0x87, 0xA9, 0xFE, 0x00, 0x3F})
	f.Add(uint8(3), []byte{1, 8, 1, 1, 0x10, 0x3A, 0xD4, 0x76, 0x0F, 0x82, 0x76, 0x2C, 0x7E, 0, 0, 0x60, 0x44})
	f.Add(uint8(7), []byte{1, 8, 8, 1, 0x10, 0x87, 0xA9, 0xFE, 0x77, 0x77, 0x77, 0x77})
	f.Add(uint8(8), []byte{8, 1, 1, 1, 0x20, 0x64, 0x31, 0x75})
	configs := []string{
		ctJSON(FormatPackQuantized, intArgs(4, "group", 8, true), ""),
		ctJSON(FormatPackQuantized, intArgs(3, "group", 4, false), ""),
		ctJSON(FormatPackQuantized, intArgs(8, "channel", -1, false), ""),
		ctJSON(FormatNVFP4, `{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16}`, `{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16,"dynamic":"local"}`),
		ctJSON(FormatMXFP4, `{"num_bits":4,"type":"float","strategy":"group","group_size":32}`, ""),
		ctJSON(FormatFloatQuantized, `{"num_bits":8,"type":"float","strategy":"block","block_structure":[2,3]}`, `{"num_bits":8,"type":"float","strategy":"tensor","dynamic":false}`),
		ctJSON(FormatIntQuantized, intArgs(8, "group", 4, false), `{"num_bits":8,"type":"int","strategy":"token","dynamic":true}`),
		`{"quant_method":"gptq","bits":4,"group_size":8,"desc_act":true,"sym":true}`,
		`{"quant_method":"awq","bits":4,"group_size":8}`,
		`{"quant_method":"gptq","bits":2,"group_size":-1,"checkpoint_format":"gptq_v2"}`,
	}
	schemes := make([]*Scheme, len(configs))
	for i, c := range configs {
		s, err := ParseJSON([]byte(c), "bfloat16", "fuzz")
		if err != nil {
			f.Fatal(err)
		}
		schemes[i] = s
	}
	tensorSets := [][]struct{ suffix, dtype string }{
		{{"weight_packed", "I32"}, {"weight_scale", "BF16"}, {"weight_shape", "I64"}, {"weight_g_idx", "I32"}},
		{{"weight_packed", "I32"}, {"weight_scale", "F16"}, {"weight_shape", "I32"}, {"weight_zero_point", "I32"}},
		{{"weight_packed", "I32"}, {"weight_scale", "F32"}, {"weight_shape", "I64"}, {"weight_zero_point", "I8"}},
		{{"weight_packed", "U8"}, {"weight_scale", "F8_E4M3"}, {"weight_global_scale", "F32"}, {"input_global_scale", "F32"}},
		{{"weight_packed", "U8"}, {"weight_scale", "U8"}},
		{{"weight", "F8_E4M3"}, {"weight_scale", "BF16"}, {"input_scale", "BF16"}},
		{{"weight", "I8"}, {"weight_scale", "BF16"}, {"weight_zero_point", "I8"}},
		{{"qweight", "I32"}, {"qzeros", "I32"}, {"scales", "F16"}, {"g_idx", "I32"}},
		{{"qweight", "I32"}, {"qzeros", "I32"}, {"scales", "F16"}},
		{{"qweight", "I32"}, {"qzeros", "I32"}, {"scales", "BF16"}},
	}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		k := int(sel) % len(configs)
		src := newMem()
		next := func() int {
			if len(data) == 0 {
				return 1
			}
			v := int(data[0])
			data = data[1:]
			return v
		}
		for _, ts := range tensorSets[k] {
			shape := []int{next() % 17, next() % 17}
			if ts.suffix == "weight_shape" || ts.suffix == "weight_g_idx" || ts.suffix == "weight_global_scale" || ts.suffix == "input_global_scale" || ts.suffix == "input_scale" || ts.suffix == "g_idx" {
				shape = shape[:1]
			}
			n := int(numel(shape)) * dtypeSize(ts.dtype)
			b := make([]byte, n)
			m := copy(b, data)
			data = data[m:]
			src.add("m."+ts.suffix, ts.dtype, shape, b)
		}
		l, err := schemes[k].Open(src, "m")
		if err != nil {
			return
		}
		out, in := l.Shape()
		if out*in > 1<<16 {
			return
		}
		w := make([]float64, out*in)
		_ = l.Dequantize(w)
		if q := l.InputQuantizer(); q != nil && in > 0 {
			x := make([]float64, 2*in)
			for i := range x {
				x[i] = float64(i%7) - 3
			}
			_ = q.Quantize(x, 2, in)
		}
	})
}
