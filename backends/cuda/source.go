package cuda

import (
	"fmt"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/quant"
)

// source is where New reads a model's weights: a safetensors checkpoint
// through package quant (ckptSource), or a GGUF file through package gguf
// (ggufSource, gguf.go). Names are Hugging Face names (package arch).
type source interface {
	// where names the model (directory or file) in messages.
	where() string
	// linear opens a Linear module (name without ".weight"); for a tied
	// head (arch.HeadModule) only sources whose embedding is not a plain
	// float table are asked (tiedHead).
	linear(module string) (quant.Linear, error)
	// float64s decodes a small dense tensor (norm weight, bias).
	float64s(name string) ([]float64, []int, error)
	// shape returns a tensor's shape (and marks it as used).
	shape(name string) ([]int, bool)
	// embedding returns the embedding table [V][C] as bytes of a kernel
	// dtype holding its values exactly.
	embedding(spec *arch.Spec) ([]byte, device.DType, error)
	// table returns a dense 2-D tensor [rows][cols] as embedding does
	// (gemma4's embed_tokens_per_layer and per_layer_model_projection).
	table(name string, rows, cols int) ([]byte, device.DType, error)
	// tiedHead returns the head of a tied model when it is not the
	// embedding table as uploaded (a quantized GGUF token_embd: the head
	// reads it packed); nil: the head is the embedding table.
	tiedHead(spec *arch.Spec) (quant.Linear, error)
	// track starts recording the tensors read.
	track() usage
	// ropeInvFreq returns the RoPE inverse frequencies (nil: the
	// architecture's, arch.Spec.RopeInvFreq).
	ropeInvFreq() []float64
	// kvScales reads (and checks) each layer's FP8 KV cache scales (K,
	// V) and returns them when --kv-cache-quant mode applies them, else
	// nil.
	kvScales(spec *arch.Spec, mode string) ([][2][]float32, error)
}

// usage is a source's record of the tensors read (checkpoint.Usage,
// gguf.Usage).
type usage interface {
	Stop()
	Check(what string) error
}

// ckptSource reads a safetensors checkpoint through its quant.Scheme, so
// the kernels see exactly the tensors quant decodes.
type ckptSource struct {
	m      *checkpoint.Model
	scheme *quant.Scheme
}

func (s ckptSource) where() string { return s.m.Dir }

func (s ckptSource) linear(module string) (quant.Linear, error) {
	return s.scheme.Linear(s.m, module)
}

func (s ckptSource) float64s(name string) ([]float64, []int, error) { return s.m.ReadFloat64(name) }

func (s ckptSource) shape(name string) ([]int, bool) {
	ti, ok := s.m.Tensor(name)
	return ti.Shape, ok
}

// embedding returns the table's bytes as stored (F32/BF16/F16), or
// decoded to F32 (F64 checkpoints).
func (s ckptSource) embedding(spec *arch.Spec) ([]byte, device.DType, error) {
	return s.table(spec.EmbedTensor(), spec.Vocab, spec.Hidden)
}

func (s ckptSource) table(name string, rows, cols int) ([]byte, device.DType, error) {
	ti, ok := s.m.Tensor(name)
	if !ok {
		return nil, 0, fmt.Errorf("cuda: missing tensor %s", name)
	}
	if len(ti.Shape) != 2 || ti.Shape[0] != rows || ti.Shape[1] != cols {
		return nil, 0, fmt.Errorf("cuda: %s: shape %v, want [%d %d]", name, ti.Shape, rows, cols)
	}
	if dt, ok := dtypeCode(string(ti.DType)); ok {
		raw, err := s.m.ReadRaw(name)
		if err != nil {
			return nil, 0, fmt.Errorf("cuda: %w", err)
		}
		if len(raw) != rows*cols*dt.Size() {
			return nil, 0, fmt.Errorf("cuda: %s: %d bytes, want %d", name, len(raw), rows*cols*dt.Size())
		}
		return raw, dt, nil
	}
	v, _, err := s.m.ReadFloat64(name)
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: %w", err)
	}
	return f64ToF32Bytes(v), device.F32, nil
}

func (s ckptSource) tiedHead(*arch.Spec) (quant.Linear, error) { return nil, nil }

// track records the tensors read; those under the architecture's ignored
// prefixes (a vision tower) count as accounted for: left alone on purpose,
// reported by the caller.
func (s ckptSource) track() usage {
	u := s.m.TrackUsage()
	u.Ignore(s.m.Config.IgnoredPrefixes)
	return u
}

func (s ckptSource) ropeInvFreq() []float64 { return nil }

func (s ckptSource) kvScales(spec *arch.Spec, mode string) ([][2][]float32, error) {
	kvOn, err := s.scheme.KVQuantEnabled(mode)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", s.m.Dir, err)
	}
	if s.scheme.KV == nil {
		return nil, nil
	}
	var kv [][2][]float32
	for i := 0; i < spec.Layers; i++ { // read and checked whether or not applied
		sc, err := s.scheme.KV.OpenScales(s.m, spec.Layer(i).Prefix+"self_attn", spec.KVHeads)
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		if kvOn {
			kv = append(kv, [2][]float32{f32s(sc.K), f32s(sc.V)})
		}
	}
	return kv, nil
}
