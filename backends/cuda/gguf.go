package cuda

import (
	"errors"
	"fmt"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/quant"
)

// NewGGUF loads an opened GGUF model (package gguf) onto devs as New does a
// checkpoint: every 2-D weight is uploaded as stored (its ggml type, per
// tensor) and dequantized on the device by dq_ggml (kernels/ggml.cu,
// bit-identical to package gguf/ggml's decoders) into the GEMM dtype;
// F32/F16/BF16 weights go through dq_dense or straight to the GEMM as a
// checkpoint's would. llama.cpp's Q/K row permutation is undone on the
// host by reordering whole stored rows (gguf.Linear.RowOrder), so the
// device computes the Hugging Face model with rotate-half RoPE, as the
// reference does. A quantized token_embd is decoded once to an fp32 table
// for the embedding gather (exact); a tied head then reads the packed
// tensor through dq_ggml. Norms and biases are F32/F16/BF16, uploaded as
// fp32. llama.cpp's rope_freqs factors apply as in the reference. Every
// tensor of the file must be read (gguf.Usage), unless
// opt.AllowUnusedTensors. The caller keeps ownership of m.
func NewGGUF(m *gguf.Model, devs []device.Device, opt Options) (*Backend, error) {
	if m == nil || m.Config == nil {
		return nil, errors.New("cuda: nil GGUF model")
	}
	return newBackend(m.Config, ggufSource{m}, devs, opt)
}

// ggufSource reads a GGUF model by Hugging Face names.
type ggufSource struct{ m *gguf.Model }

func (s ggufSource) where() string { return s.m.Path }

func (s ggufSource) linear(module string) (quant.Linear, error) { return s.m.Linear(module) }

func (s ggufSource) float64s(name string) ([]float64, []int, error) { return s.m.Float64(name) }

// shape is the Hugging Face shape (gguf.Model.Shape: qwen35's conv1d
// [C, 1, K] although stored as ne [K, C]); the tensor is marked read
// (gguf.Usage), as the loader expects. gpt-oss's gate_up_proj_bias is
// no stored tensor (llama.cpp splits it into ffn_gate_exps.bias and
// ffn_up_exps.bias): its shape is that of the value gguf.Model.Float64
// assembles from the halves (marking both read).
func (s ggufSource) shape(name string) ([]int, bool) {
	if _, _, err := s.m.Raw(name); err != nil {
		if s.m.Spec == nil || s.m.Spec.GptOss == nil {
			return nil, false
		}
		_, shape, err := s.m.Float64(name)
		if err != nil {
			return nil, false
		}
		return shape, true
	}
	return s.m.Shape(name)
}

// embedding returns token_embd as stored when it is F32/BF16/F16, else
// its values decoded to fp32 (exact: ggml decodes to fp32).
func (s ggufSource) embedding(spec *arch.Spec) ([]byte, device.DType, error) {
	return s.table(arch.EmbedName, spec.Vocab, spec.Hidden)
}

// table is embedding for any 2-D tensor [rows][cols] (Hugging Face name).
func (s ggufSource) table(name string, rows, cols int) ([]byte, device.DType, error) {
	ti, raw, err := s.m.Raw(name)
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: %w", err)
	}
	if len(ti.Dims) != 2 || ti.Dims[0] != int64(cols) || ti.Dims[1] != int64(rows) {
		return nil, 0, fmt.Errorf("cuda: %s: tensor %q has ne %v, want [%d %d]", ti.File, ti.Name, ti.Dims, cols, rows)
	}
	if dt, ok := ggufFloatDType(ti.Type); ok {
		return raw, dt, nil
	}
	r, err := s.m.Rows(name)
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: %w", err)
	}
	out := make([]byte, 0, 4*rows*cols)
	const chunk = 1024
	buf := make([]float64, chunk*cols)
	for r0 := 0; r0 < rows; r0 += chunk {
		r1 := min(r0+chunk, rows)
		v := buf[:(r1-r0)*cols]
		if err := r.Rows(r0, r1, v); err != nil {
			return nil, 0, fmt.Errorf("cuda: %w", err)
		}
		out = append(out, f64ToF32Bytes(v)...)
	}
	return out, device.F32, nil
}

// tiedHead is token_embd read packed when it is quantized.
func (s ggufSource) tiedHead(*arch.Spec) (quant.Linear, error) {
	l, err := s.m.Linear(arch.HeadModule)
	if err != nil {
		return nil, err
	}
	if _, ok := ggufFloatDType(l.(*gguf.Linear).Type()); ok {
		return nil, nil // the embedding table as uploaded
	}
	return l, nil
}

func (s ggufSource) track() usage { return s.m.TrackUsage() }

func (s ggufSource) ropeInvFreq() []float64 { return s.m.RopeInvFreq() }

// kvScales: a GGUF file declares no quantized KV cache.
func (s ggufSource) kvScales(_ *arch.Spec, mode string) ([][2][]float32, error) {
	switch mode {
	case quant.KVQuantAuto, quant.KVQuantOff:
		return nil, nil
	case quant.KVQuantOn:
		return nil, fmt.Errorf("cuda: --kv-cache-quant on: %s declares no quantized KV cache", s.m.Path)
	}
	return nil, fmt.Errorf("cuda: --kv-cache-quant %q: want on or off", mode)
}

// ggufFloatDType maps the float ggml types to kernel dtypes.
func ggufFloatDType(t gguf.Type) (device.DType, bool) {
	switch t {
	case gguf.F32:
		return device.F32, true
	case gguf.F16:
		return device.F16, true
	case gguf.BF16:
		return device.BF16, true
	}
	return 0, false
}

// gptOssExperts reads gpt-oss's experts from a GGUF file: llama.cpp's
// converter splits each expert's gate_up_proj [2·I, C] (gate and up rows
// interleaved, GptOssExperts) into ffn_gate_exps and ffn_up_exps
// (gguf/arch_gptoss.go), which gguf.Model.GptOssExperts interleaves again
// on the host. Moving rows between two packed tensors has no dq_ggml
// path, so each expert's gate_up is decoded on the host (exact: ggml
// decodes to fp32) and uploaded as a dense F32 weight, as qwen35's
// column-reordered weights are (prepareGGUF); the GEMM dtype rounds it as
// dq_ggml's fp32 values would be. down_proj [C, I] is one stored expert
// slice, uploaded as stored (prepareGGUF: dq_ggml or dense). The biases,
// sinks and router bias are read by name (gguf.Model.Float64).
func (s ggufSource) gptOssExperts(gateUp, down string, experts, hidden, inter int) ([]quant.Linear, []quant.Linear, error) {
	gu, dn, err := s.m.GptOssExperts(gateUp, down, experts, hidden, inter)
	if err != nil {
		return nil, nil, err
	}
	for e, l := range gu {
		out, in := l.Shape()
		w := make([]float64, out*in)
		if err := l.Dequantize(w); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.m.Path, err)
		}
		gu[e] = &quant.Dense{Base: quant.Base{Name: l.Module(), Out: out, In: in, Fmt: l.Format()}, DType: "F32", Raw: f64ToF32Bytes(w)}
	}
	return gu, dn, nil
}
