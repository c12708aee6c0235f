package checkpoint_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

// FuzzOpen feeds arbitrary bytes to the safetensors header parser. Open
// must never panic; when it accepts a file, every tensor lies inside it,
// the tensors tile the data section exactly, and reading each one succeeds
// with exactly numel·bits/8 bytes. Seed corpus: testdata/fuzz/FuzzOpen.
func FuzzOpen(f *testing.F) {
	f.Add(append([]byte{0x50, 0, 0, 0, 0, 0, 0, 0}, []byte(`{"layer.weight_packed":{"dtype":"I32","shape":[1,1],"data_offsets":[0,4]}}      `+"\x10\x87\xa9\xfe")...))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := checkpoint.Open(bytes.NewReader(data), int64(len(data)), "fuzz.safetensors")
		if err != nil {
			if !errors.Is(err, checkpoint.ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		var total int64
		for _, name := range file.Names() {
			ti, ok := file.Tensor(name)
			if !ok {
				t.Fatalf("listed tensor %q missing", name)
			}
			if ti.Offset < 8+file.HeaderSize() || ti.Offset+ti.Size > int64(len(data)) {
				t.Fatalf("tensor %q [%d,+%d) outside the data of a %d-byte file", name, ti.Offset, ti.Size, len(data))
			}
			want, err := ti.DType.ByteSize(ti.Numel())
			if err != nil || want != ti.Size {
				t.Fatalf("tensor %q: size %d, numel·bits/8 = %d (%v)", name, ti.Size, want, err)
			}
			total += ti.Size
			raw, err := file.ReadRaw(name)
			if err != nil || int64(len(raw)) != ti.Size {
				t.Fatalf("tensor %q: read %d bytes, err %v", name, len(raw), err)
			}
			if ti.DType.Decodable() {
				v, _, err := file.ReadFloat64(name)
				if err != nil && (ti.DType != checkpoint.I64 && ti.DType != checkpoint.U64) {
					t.Fatalf("tensor %q (%s): %v", name, ti.DType, err)
				}
				if err == nil && int64(len(v)) != ti.Numel() {
					t.Fatalf("tensor %q: %d values for %d elements", name, len(v), ti.Numel())
				}
			}
		}
		if 8+file.HeaderSize()+total != int64(len(data)) {
			t.Fatalf("tensors cover %d bytes of a %d-byte data section", total, int64(len(data))-8-file.HeaderSize())
		}
	})
}

// FuzzParseConfig feeds arbitrary JSON to arch.ParseConfig (checkpoint's
// ParseConfig resolved with the family's defaults) and, when accepted,
// to arch.For and the RoPE frequencies. Nothing may panic, and an accepted
// config has positive, bounded, consistent sizes. Seed corpus:
// testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":256}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := arch.ParseConfig(data, "config.json")
		if err != nil {
			if !errors.Is(err, checkpoint.ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if c.HiddenSize <= 0 || c.NumAttentionHeads <= 0 || c.NumKeyValueHeads <= 0 || c.HeadDim <= 0 ||
			c.NumAttentionHeads%c.NumKeyValueHeads != 0 || c.VocabSize <= 0 || c.NumHiddenLayers <= 0 || c.IntermediateSize <= 0 {
			t.Fatalf("accepted inconsistent sizes: %+v", c)
		}
		s, err := arch.For(c)
		if err != nil {
			return
		}
		inv := s.RopeInvFreq()
		if len(inv) != c.HeadDim/2 {
			t.Fatalf("%d frequencies for head_dim %d", len(inv), c.HeadDim)
		}
		for _, x := range inv {
			if math.IsNaN(x) || x < 0 {
				t.Fatalf("inv_freq %v", inv)
			}
		}
		_ = s.Layer(c.NumHiddenLayers - 1)
	})
}

// FuzzParseIndex feeds arbitrary JSON to the shard index parser: it must
// never panic, and an accepted index names only plain files.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":16},"weight_map":{"a.weight":"model-00001-of-00002.safetensors","b.weight":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := checkpoint.ParseIndex(data, "model.safetensors.index.json")
		if err != nil {
			if !errors.Is(err, checkpoint.ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		for _, s := range ix.Shards() {
			if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
				t.Fatalf("accepted shard name %q", s)
			}
		}
	})
}
