package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/internal/torchtopk"
)

// mixture computes a mixture-of-experts MLP (Qwen3MoeSparseMoeBlock) of
// the normed rows ds.h into ds.proj. Reference: reference.mixture.
//
// The router logits come from an fp32 GEMM on the device (the fp32 normed
// rows times the router weight decoded to fp32, whatever the GEMM dtype:
// routing is discontinuous, and a bf16 rounding of its inputs flips near
// ties that the reference resolves the other way; a router whose input the
// checkpoint quantizes runs as its Linear) and go to the host
// ([T][experts] fp32), which computes the softmax in float64, picks the
// top k (ties as torch.topk on the CPU, internal/torchtopk, as the
// reference and the oracle do) and renormalises when norm_topk_prob. Each chosen expert then
// runs on the device over exactly its rows: they are gathered on the host
// into moeIn, the expert's gate/up GEMMs, silu_mul and down GEMM run as for
// a dense MLP, and its output rows come back to be added, weighted, in
// expert order into an fp32 accumulator that is uploaded to ds.proj.
//
// The gather and the weighted scatter go through the host (2·T·C·4 bytes
// per chosen expert): correct on every device, and a known cost on a GPU
// until device-side gather/scatter kernels replace them.
func (b *Backend) mixture(ds *devState, lw *layerDev, T int, probeRouter func(logits device.Ptr) error) error {
	if err := b.routeExperts(ds, lw, T, ds.h, ds.h, ds.proj, nil, probeRouter); err != nil {
		return err
	}
	if b.spec.MoE.SharedIntermediate > 0 {
		return b.sharedExpert(ds, lw, T)
	}
	return nil
}

// routeExperts is mixture's routing and experts with the router's input
// routerIn, the experts' input expertIn and the output out ([T][C] each):
// the same rows for qwen3_moe and mixtral; for gemma4 the router reads its
// own norm of the residual and the experts pre_feedforward_layernorm_2's,
// and each routing weight (renormalised) is then multiplied by
// scale[expert] (router.per_expert_scale; nil: none).
func (b *Backend) routeExperts(ds *devState, lw *layerDev, T int, routerIn, expertIn, out device.Ptr, scale []float64, probeRouter func(logits device.Ptr) error) error {
	s := b.spec
	d := ds.d
	C, E, k, W := s.Hidden, s.MoE.Experts, s.MoE.TopK, s.MoE.Intermediate
	ds.xaCastOf = 0
	if lw.router32 != 0 {
		// fp32 routing: the normed rows and the router weight unrounded.
		if err := d.Gemm(device.Gemm{M: T, N: E, K: C, A: routerIn, B: lw.router32, C: ds.gate, AType: device.F32, BType: device.F32}); err != nil {
			return fmt.Errorf("router: %w", err)
		}
	} else if err := b.linear(ds, lw.lin[arch.ProjRouter], routerIn, T, ds.gate, 0); err != nil {
		return err
	}
	if err := probeRouter(ds.gate); err != nil {
		return err
	}
	buf := make([]byte, T*max(E, C)*4)
	if err := d.CopyOut(buf[:T*E*4], ds.gate); err != nil {
		return err
	}
	routes := make([][]route, E)
	p := make([]float64, E)
	for t := 0; t < T; t++ {
		mx := math.Inf(-1)
		for e := range p {
			p[e] = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(t*E+e):])))
			mx = max(mx, p[e])
		}
		var sum float64
		for e, v := range p {
			p[e] = math.Exp(v - mx)
			sum += p[e]
		}
		for e := range p {
			p[e] /= sum
		}
		chosen := torchtopk.Indices(p, k) // ties as torch.topk on the CPU
		var top float64
		for _, e := range chosen {
			top += p[e]
		}
		for _, e := range chosen {
			w := p[e]
			if s.MoE.NormTopK {
				w /= top
			}
			if scale != nil {
				w *= scale[e]
			}
			routes[e] = append(routes[e], route{t, float32(w)})
		}
	}
	return b.runExperts(ds, routes, T, expertIn, out, buf, func(e, n int) error {
		x := &lw.experts[e]
		if err := b.linear(ds, x[arch.ProjGate], ds.moeIn, n, ds.gate, 0); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		}
		if err := b.linear(ds, x[arch.ProjUp], ds.moeIn, n, ds.up, 0); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		}
		if err := b.gateMul(d, ds.gate, ds.gate, ds.up, n*W); err != nil {
			return err
		}
		if err := b.linear(ds, x[arch.ProjDown], ds.gate, n, ds.moeOut, 0); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		}
		return nil
	})
}

// route is one row of the window sent to an expert, with its routing
// weight.
type route struct {
	row int
	w   float32
}

// runExperts runs every expert that some row chose: it gathers that
// expert's rows of in ([T][C] fp32) into ds.moeIn, calls expert(e, n),
// which leaves the expert's [n][C] output in ds.moeOut, and writes
// Σ w·output per row into out. buf is host scratch of at least
// T·C·4 bytes. Every mixture (routeExperts, gptOssMixture) scores its
// experts through it.
func (b *Backend) runExperts(ds *devState, routes [][]route, T int, in, out device.Ptr, buf []byte, expert func(e, n int) error) error {
	d := ds.d
	C := b.spec.Hidden
	h := make([]byte, T*C*4)
	if err := d.CopyOut(h, in); err != nil {
		return err
	}
	acc := make([]float32, T*C)
	for e, rs := range routes {
		if len(rs) == 0 {
			continue
		}
		n := len(rs)
		x := buf[:n*C*4]
		for i, r := range rs {
			copy(x[i*C*4:(i+1)*C*4], h[r.row*C*4:(r.row+1)*C*4])
		}
		if err := d.CopyIn(ds.moeIn, x); err != nil {
			return err
		}
		ds.xaCastOf = 0
		if err := expert(e, n); err != nil {
			return err
		}
		y := buf[:n*C*4]
		if err := d.CopyOut(y, ds.moeOut); err != nil {
			return err
		}
		for i, r := range rs {
			dst := acc[r.row*C : (r.row+1)*C]
			for c := range dst {
				dst[c] += r.w * math.Float32frombits(binary.LittleEndian.Uint32(y[4*(i*C+c):]))
			}
		}
	}
	ds.xaCastOf = 0
	return d.CopyIn(out, f32Bytes(acc))
}

// sharedExpert adds qwen3_5_moe's shared expert to ds.proj:
// sigmoid(shared_expert_gate(h))·down(silu(gate(h))·up(h)) for every row.
// Reference: reference.sharedExpert.
func (b *Backend) sharedExpert(ds *devState, lw *layerDev, T int) error {
	d := ds.d
	W := b.spec.MoE.SharedIntermediate
	if err := b.linear(ds, lw.lin[arch.ProjSharedGate], ds.h, T, ds.gate, 0); err != nil {
		return fmt.Errorf("shared expert: %w", err)
	}
	if err := b.linear(ds, lw.lin[arch.ProjSharedUp], ds.h, T, ds.up, 0); err != nil {
		return fmt.Errorf("shared expert: %w", err)
	}
	if err := device.LaunchSiluMul(d, ds.gate, ds.gate, ds.up, T*W); err != nil {
		return err
	}
	if err := b.linear(ds, lw.lin[arch.ProjSharedDown], ds.gate, T, ds.moeOut, 0); err != nil {
		return fmt.Errorf("shared expert: %w", err)
	}
	ds.xaCastOf = 0
	if err := b.linear(ds, lw.lin[arch.ProjSharedExpertGate], ds.h, T, ds.moeIn, 0); err != nil { // [T][1] logits
		return fmt.Errorf("shared expert gate: %w", err)
	}
	return launchSigmoidAddRows(d, ds.proj, ds.moeOut, ds.moeIn, T, b.spec.Hidden)
}
