package checkpoint

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkOpen_SmolLM2Header parses and validates a header shaped like
// SmolLM2-135M's (272 tensors; data section zero-length stand-ins).
func BenchmarkOpen_SmolLM2Header(b *testing.B) {
	var ts []WriteTensor
	for l := 0; l < 30; l++ {
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
			ts = append(ts, WriteTensor{Name: fmt.Sprintf("model.layers.%d.%s.weight", l, n), DType: BF16, Shape: []int{1, 2}, Data: make([]byte, 4)})
		}
	}
	file, err := Encode(ts, map[string]string{"format": "pt"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(file)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Open(bytes.NewReader(file), int64(len(file)), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFloat64 decodes 576×1536 elements (one SmolLM2 MLP matrix).
func BenchmarkDecodeFloat64(b *testing.B) {
	const n = 576 * 1536
	dst := make([]float64, n)
	for _, dt := range []DType{BF16, F16, F32, F8E4M3, I8} {
		raw := make([]byte, n*dt.Bits()/8)
		for i := range raw {
			raw[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("%s_576x1536", dt), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for i := 0; i < b.N; i++ {
				if err := DecodeFloat64(dt, raw, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
