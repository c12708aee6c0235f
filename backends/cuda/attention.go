package cuda

import (
	"fmt"
	"math"

	"github.com/qppl/qppl/backends/cuda/device"
)

// Tensor-core attention: per chunk of query rows and heads,
//
//	S = scale · Q·Kᵀ            strided batched GEMM (tensor cores in bf16/fp16)
//	W = causal softmax(S)       kernel attn_softmax, fp32, W split into dtype parts
//	O = Σ_parts W_part · V      strided batched GEMMs, written into att[t][h][d]
//
// after attn_prep has laid q, k, v out head-major in the GEMM dtype (the
// KV heads expanded to the query heads). Semantics are those of the
// `attention` kernel (q/k/v rounded to the dtype, fp32 scores, softmax and
// accumulation); see kernels/attention.cu. A device without batched GEMMs
// runs the `attention` kernel instead.

// attnScoreCap bounds the score and weight buffers of one chunk
// (Backend.attnCap overrides it in tests, to exercise the chunking).
const attnScoreCap = 512 << 20

func (b *Backend) scoreCap() int64 {
	if b.attnCap > 0 {
		return b.attnCap
	}
	return attnScoreCap
}

// attnParts is the number of dtype parts the softmax weights are split into
// for the PV GEMMs (bf16 8+8+8 bits, fp16 11+11 bits, fp32 one).
func attnParts(dt device.DType) int {
	switch dt {
	case device.BF16:
		return 3
	case device.F16:
		return 2
	}
	return 1
}

// attnGeometry returns the query rows R and heads hb of one chunk for a
// window of T tokens: the whole T×T square for as many heads as fit in
// capBytes, else one head and as many query rows as fit.
func attnGeometry(T, H int, dt device.DType, capBytes int64) (R, hb int) {
	if T <= 0 {
		return 0, 0
	}
	per := int64(4 + attnParts(dt)*dt.Size()) // score + weight parts per element
	sq := int64(T) * int64(T) * per
	if sq <= capBytes {
		return T, int(min(int64(H), capBytes/sq))
	}
	return int(max(1, min(int64(T), capBytes/(int64(T)*per)))), 1
}

// attnBuffers returns the byte sizes of the attention operands (qa, ka, va:
// H·T·D each in the dtype) and of the score and weight buffers of a chunk.
func attnBuffers(T, H, D int, dt device.DType, capBytes int64) (operand, scores, weights int64) {
	R, hb := attnGeometry(T, H, dt, capBytes)
	operand = int64(H) * int64(T) * int64(D) * int64(dt.Size())
	scores = int64(hb) * int64(R) * int64(T) * 4
	weights = int64(attnParts(dt)) * int64(hb) * int64(R) * int64(T) * int64(dt.Size())
	return operand, scores, weights
}

// attend computes ds.att[T][H][D] from ds.q, ds.k, ds.v (fp32, after RoPE),
// with a sliding window of `window` keys (0: full causal attention) and
// gpt-oss's per-head attention sinks [H] fp32 (0: none).
func (b *Backend) attend(ds *devState, T, window int, sinks device.Ptr) error {
	return b.attendKV(ds, T, window, b.spec.KVHeads, b.spec.HeadDim, ds.k, ds.v, sinks)
}

// attendKV is attend with the layer's key/value heads KVH and head size D
// and its keys and values at k, v [T][KVH][D] (gemma4: per-layer sizes,
// another layer's keys and values when KV-shared).
func (b *Backend) attendKV(ds *devState, T, window, KVH, D int, k, v, sinks device.Ptr) error {
	s := b.spec
	H := s.Heads
	d := ds.d
	// 1/sqrt(head_dim), or gemma's query_pre_attn_scalar**-0.5 (arch.For
	// sets AttnScale; a Spec built by hand without it means the default).
	scale := float32(1 / math.Sqrt(float64(D)))
	if s.AttnScale != 0 {
		scale = float32(s.AttnScale)
	}
	bg, ok := d.(device.BatchedGemmer)
	if !ok {
		if s.AttnSoftcap > 0 {
			return fmt.Errorf("attention soft-capping needs a device with batched GEMMs (%s has none)", d.Name())
		}
		if sinks != 0 {
			return fmt.Errorf("attention sinks need a device with batched GEMMs (%s has none)", d.Name())
		}
		return device.LaunchAttention(d, ds.att, ds.q, k, v, T, H, KVH, D, scale, b.gemmDT, window)
	}
	dt := b.gemmDT
	es := int64(dt.Size())
	if err := device.LaunchAttnPrep(d, ds.qa, ds.ka, ds.va, ds.q, k, v, T, H, KVH, D, dt); err != nil {
		return err
	}
	R, hb := attnGeometry(T, H, dt, b.scoreCap())
	parts := attnParts(dt)
	td := int64(T) * int64(D)
	for r0 := 0; r0 < T; r0 += R {
		r1 := min(r0+R, T)
		rb, n := r1-r0, r1 // query rows of the chunk; keys 0..r1-1
		for h0 := 0; h0 < H; h0 += hb {
			nb := min(hb, H-h0)
			err := bg.BatchedGemm(device.BatchedGemm{M: rb, N: n, K: D,
				A: ds.qa + device.Ptr((int64(h0)*td+int64(r0)*int64(D))*es), LDA: D, StrideA: td,
				B: ds.ka + device.Ptr(int64(h0)*td*es), LDB: D, StrideB: td, TransB: true,
				C: ds.scores, LDC: n, StrideC: int64(rb) * int64(n),
				AType: dt, BType: dt, Batch: nb, Alpha: scale})
			if err != nil {
				return fmt.Errorf("attention QKᵀ: %w", err)
			}
			rows := nb * rb                // one warp per row
			if c := s.AttnSoftcap; c > 0 { // gemma2: scores = tanh(scores/cap)·cap, before the mask
				if err := device.LaunchSoftcap(d, ds.scores, rows*n, float32(c)); err != nil {
					return err
				}
			}
			sk := sinks
			if sk != 0 {
				sk += device.Ptr(4 * h0) // the chunk's heads
			}
			if err := device.LaunchAttnSoftmax(d, ds.weights, parts, ds.scores, rows, n, rb, r0, dt, window, sk); err != nil {
				return err
			}
			part := int64(rows) * int64(n) * es
			for i := 0; i < parts; i++ {
				err := bg.BatchedGemm(device.BatchedGemm{M: rb, N: D, K: n,
					A: ds.weights + device.Ptr(int64(i)*part), LDA: n, StrideA: int64(rb) * int64(n),
					B: ds.va + device.Ptr(int64(h0)*td*es), LDB: D, StrideB: td,
					C: ds.att + device.Ptr((int64(r0)*int64(H)+int64(h0))*int64(D)*4), LDC: H * D, StrideC: int64(D),
					AType: dt, BType: dt, Batch: nb, Alpha: 1, Accumulate: i > 0})
				if err != nil {
					return fmt.Errorf("attention PV: %w", err)
				}
			}
		}
	}
	return nil
}
