// Package ggufgen writes GGUF test fixtures in Go, for the tests that
// must also run where llama.cpp's library is absent: a GGUF file (qppl's
// F32 conversion of a fixture) rewritten with its weights replaced by
// ggml blocks of chosen types (Requantize), and any GGUF file rewritten
// with every tensor decoded to F32 by package gguf/ggml (Dequantize).
//
// Requantize does not quantize: for each block it draws random bytes
// until the block decodes (with ggml's decoder) to finite values whose
// largest magnitude lies in [bound/16, bound], bound being three times the
// root mean square of the tensor it replaces. That keeps the fixture's scale
// while exercising every field of every block layout (scales, signs,
// grid indices, high bits) without knowing it; the tests compare
// backends on these weights, not the weights with the originals.
package ggufgen

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/gguf/ggml"
	"github.com/qppl/qppl/internal/atomicfile"
)

// maxTries bounds the draws for one block.
const maxTries = 1 << 20

// TypeOf chooses the type of a tensor (its GGUF name and ne); returning
// the tensor's own type keeps it.
type TypeOf func(name string, ne []int64, own ggml.Type) ggml.Type

// Requantize rewrites in to out with each tensor's data replaced by random
// blocks of typeOf's type (see the package comment), drawn from seed.
func Requantize(in, out string, seed uint64, typeOf TypeOf) error {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	return rewrite(in, out, func(ti gguf.TensorInfo, raw []byte) (ggml.Type, []byte, error) {
		typ := typeOf(ti.Name, ti.Dims, ti.Type)
		if typ == ti.Type {
			return typ, raw, nil
		}
		n := ti.Numel()
		orig := make([]float32, n)
		if err := ggml.Dequantize(ti.Type, raw, orig); err != nil {
			return 0, nil, err
		}
		ss := 0.0
		for _, v := range orig {
			ss += float64(v) * float64(v)
		}
		bound := float32(3 * math.Sqrt(ss/float64(n)))
		if !(bound > 0) {
			return 0, nil, fmt.Errorf("%s: tensor %q is zero", in, ti.Name)
		}
		data, err := randomBlocks(rng, typ, n, bound)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: tensor %q: %w", in, ti.Name, err)
		}
		return typ, data, nil
	})
}

// randomBlocks draws n values' worth of blocks of typ (see the package
// comment).
func randomBlocks(rng *rand.Rand, typ ggml.Type, n int64, bound float32) ([]byte, error) {
	size, err := ggml.RowBytes(typ, n)
	if err != nil {
		return nil, err
	}
	ts, bs := typ.TypeSize(), typ.BlockSize()
	data := make([]byte, size)
	vals := make([]float32, bs)
	for b := 0; b < len(data); b += ts {
		blk := data[b : b+ts]
		ok := false
		for try := 0; try < maxTries && !ok; try++ {
			for i := range blk {
				blk[i] = byte(rng.Uint32())
			}
			if err := ggml.Dequantize(typ, blk, vals); err != nil {
				return nil, err
			}
			m := float32(0)
			for _, v := range vals {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					m = float32(math.Inf(1))
					break
				}
				m = max(m, float32(math.Abs(float64(v))))
			}
			ok = m <= bound && m >= bound/16
		}
		if !ok {
			return nil, fmt.Errorf("no %s block within [%g, %g] in %d draws", typ, bound/16, bound, maxTries)
		}
	}
	return data, nil
}

// Dequantize rewrites in to out with every tensor decoded to F32 by
// package gguf/ggml (the exact float32 values every qppl backend computes
// with), metadata unchanged.
func Dequantize(in, out string) error {
	return rewrite(in, out, func(ti gguf.TensorInfo, raw []byte) (ggml.Type, []byte, error) {
		if ti.Type == ggml.F32 {
			return ti.Type, raw, nil
		}
		v := make([]float32, ti.Numel())
		if err := ggml.Dequantize(ti.Type, raw, v); err != nil {
			return 0, nil, err
		}
		return ggml.F32, F32Bytes(v), nil
	})
}

// rewrite copies a single-file GGUF, passing each tensor through edit.
func rewrite(in, out string, edit func(ti gguf.TensorInfo, raw []byte) (ggml.Type, []byte, error)) error {
	return rewriteAll(in, out, nil, edit)
}

// rewriteAll copies a single-file GGUF, passing each tensor through edit
// (nil: as is), then the metadata and tensors through all (nil: as is).
func rewriteAll(in, out string, all func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor), edit func(ti gguf.TensorInfo, raw []byte) (ggml.Type, []byte, error)) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	src, err := gguf.Open(f, st.Size(), in)
	if err != nil {
		return err
	}
	var ts []gguf.WriteTensor
	for _, ti := range src.Tensors {
		raw, err := src.ReadRaw(ti.Name)
		if err != nil {
			return err
		}
		typ, data := ti.Type, raw
		if edit != nil {
			if typ, data, err = edit(ti, raw); err != nil {
				return err
			}
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: typ, Data: data})
	}
	kvs := append([]gguf.KV(nil), src.KVs...)
	if all != nil {
		kvs, ts = all(kvs, ts)
	}
	return atomicfile.Write(out, 0o644, func(w io.Writer) error { return gguf.Write(w, kvs, ts) })
}

// Edit rewrites in to out with its metadata and tensors passed through
// edit.
func Edit(in, out string, edit func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)) error {
	return rewriteAll(in, out, edit, nil)
}

// F32Bytes encodes float32 values as F32 tensor data.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

// FuseGateUpExps rewrites every layer's ffn_gate_exps and ffn_up_exps
// (ne [in, out, E]) into one ffn_gate_up_exps (ne [in, 2·out, E]) whose
// expert e slice is its gate rows then its up rows, as llama.cpp's
// build_moe_ffn reads it (gate: the view at offset 0); swap puts up first.
func FuseGateUpExps(ts []gguf.WriteTensor, swap bool) []gguf.WriteTensor {
	byName := map[string]gguf.WriteTensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	var out []gguf.WriteTensor
	for _, x := range ts {
		blk, ok := strings.CutSuffix(x.Name, ".ffn_gate_exps.weight")
		if strings.HasSuffix(x.Name, ".ffn_up_exps.weight") {
			continue
		}
		if !ok {
			out = append(out, x)
			continue
		}
		g, u := x, byName[blk+".ffn_up_exps.weight"]
		if swap {
			g, u = u, g
		}
		E := int(x.Dims[2])
		n := len(x.Data) / E
		var data []byte
		for e := range E {
			data = append(data, g.Data[e*n:(e+1)*n]...)
			data = append(data, u.Data[e*n:(e+1)*n]...)
		}
		out = append(out, gguf.WriteTensor{Name: blk + ".ffn_gate_up_exps.weight", Dims: []int64{x.Dims[0], 2 * x.Dims[1], x.Dims[2]}, Type: x.Type, Data: data})
	}
	return out
}
