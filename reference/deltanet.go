package reference

import (
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/detmath"
)

// deltaWorkspace holds a Gated DeltaNet layer's activations for T tokens.
type deltaWorkspace struct {
	mixed []float64 // [T][ConvDim] in_proj_qkv output
	conv  []float64 // [T][ConvDim] after the causal conv1d and silu: q | k | v
	z     []float64 // [T][nv·dv] in_proj_z output
	b, a  []float64 // [T][nv] in_proj_b, in_proj_a outputs
	out   []float64 // [T][nv·dv] core output, then gated-normed
	state []float64 // [dk][dv] one value head's recurrent state
}

func (w *deltaWorkspace) ensure(s *arch.Spec, T int) {
	la := s.LinearAttn
	v := la.ValueHeads * la.ValueDim
	w.mixed = grow(w.mixed, T*s.ConvDim())
	w.conv = grow(w.conv, T*s.ConvDim())
	w.z = grow(w.z, T*v)
	w.b = grow(w.b, T*la.ValueHeads)
	w.a = grow(w.a, T*la.ValueHeads)
	w.out = grow(w.out, T*v)
	w.state = grow(w.state, la.KeyDim*la.ValueDim)
}

// deltaNet computes a Gated DeltaNet layer (transformers
// Qwen3_5GatedDeltaNet.forward, see arch/qwen3_5.go) of the normed rows
// ws.h into ws.proj, in float64 and in the plain recurrent form of the
// delta rule (torch_recurrent_gated_delta_rule), token by token:
//
//	qkv = silu(causal depthwise conv1d(in_proj_qkv(h)))   kernel K, left zero padding
//	q, k ← l2norm(q), l2norm(k) (x/sqrt(Σx²+1e-6)); q ← q/sqrt(dk)
//	β = sigmoid(in_proj_b(h)); g = −exp(A_log)·softplus(in_proj_a(h) + dt_bias)
//	per value head j (query/key head j/(nv/nk)), S [dk][dv] = 0:
//	  S ← exp(g_t)·S;  S ← S + k_t ⊗ β_t(v_t − Sᵀk_t);  o_t = Sᵀq_t
//	o ← w ⊙ o/sqrt(mean(o²)+eps) ⊙ silu(z)   per value head (Qwen3_5RMSNormGated)
//	ws.proj = out_proj(o)
func (m *model) deltaNet(ws *workspace, l *layerWeights, T int) error {
	d := m.dims
	la := m.spec.LinearAttn
	nk, nv, dk, dv, K := la.KeyHeads, la.ValueHeads, la.KeyDim, la.ValueDim, la.ConvKernel
	cd := m.spec.ConvDim()
	w := ws.dn
	if err := m.linear(ws, l.lin[arch.ProjInQKV], nil, ws.h, T, d.C, w.mixed, cd); err != nil {
		return err
	}
	if err := m.linear(ws, l.lin[arch.ProjInZ], nil, ws.h, T, d.C, w.z, nv*dv); err != nil {
		return err
	}
	if err := m.linear(ws, l.lin[arch.ProjInB], nil, ws.h, T, d.C, w.b, nv); err != nil {
		return err
	}
	if err := m.linear(ws, l.lin[arch.ProjInA], nil, ws.h, T, d.C, w.a, nv); err != nil {
		return err
	}
	// Causal depthwise conv1d (F.conv1d, padding K−1, output cut to T):
	// out[t][c] = Σ_j conv[c][j]·x[t−(K−1)+j][c], then silu.
	dw := l.delta
	for t := 0; t < T; t++ {
		for c := 0; c < cd; c++ {
			var s float64
			for j := 0; j < K; j++ {
				if src := t - (K - 1) + j; src >= 0 {
					s += float64(dw.conv[c*K+j] * w.mixed[src*cd+c]) // products rounded: never fused (same bits on every GOARCH)
				}
			}
			w.conv[t*cd+c] = s / (1 + detmath.Exp(-s))
		}
	}
	// l2norm of every query and key head, then q/sqrt(dk).
	qs := 1 / math.Sqrt(float64(dk))
	for t := 0; t < T; t++ {
		for h := 0; h < 2*nk; h++ {
			x := w.conv[t*cd+h*dk : t*cd+(h+1)*dk]
			var ss float64
			for _, v := range x {
				ss += float64(v * v)
			}
			inv := 1 / math.Sqrt(ss+1e-6)
			if h < nk {
				inv *= qs
			}
			for i := range x {
				x[i] *= inv
			}
		}
	}
	S := w.state
	group := nv / nk
	for j := 0; j < nv; j++ {
		kh := j / group
		clear(S)
		A := dw.a[j]
		for t := 0; t < T; t++ {
			row := w.conv[t*cd:]
			q := row[kh*dk : (kh+1)*dk]
			k := row[nk*dk+kh*dk : nk*dk+(kh+1)*dk]
			v := row[2*nk*dk+j*dv : 2*nk*dk+(j+1)*dv]
			beta := 1 / (1 + detmath.Exp(-w.b[t*nv+j]))
			decay := detmath.Exp(-A * softplus(w.a[t*nv+j]+dw.dtBias[j]))
			for i := range S {
				S[i] *= decay
			}
			o := w.out[t*nv*dv+j*dv : t*nv*dv+(j+1)*dv]
			for c := 0; c < dv; c++ { // o temporarily holds β(v − Sᵀk)
				var mem float64
				for i := 0; i < dk; i++ {
					mem += float64(S[i*dv+c] * k[i])
				}
				o[c] = (v[c] - mem) * beta
			}
			for i := 0; i < dk; i++ {
				for c := 0; c < dv; c++ {
					S[i*dv+c] += float64(k[i] * o[c])
				}
			}
			for c := 0; c < dv; c++ {
				var s float64
				for i := 0; i < dk; i++ {
					s += float64(S[i*dv+c] * q[i])
				}
				o[c] = s
			}
		}
	}
	// Gated RMSNorm per value head: weight·norm(o)·silu(z).
	for r := 0; r < T*nv; r++ {
		o := w.out[r*dv : (r+1)*dv]
		z := w.z[r*dv : (r+1)*dv]
		var ss float64
		for _, v := range o {
			ss += float64(v * v)
		}
		inv := 1 / math.Sqrt(ss/float64(dv)+d.eps)
		for c, v := range o {
			o[c] = dw.norm[c] * (v * inv) * (z[c] / (1 + detmath.Exp(-z[c])))
		}
	}
	return m.linear(ws, l.lin[arch.ProjOut], nil, w.out, T, nv*dv, ws.proj, d.C)
}

// softplus is torch's F.softplus (beta 1, threshold 20): x when x > 20,
// else log(1 + exp(x)) (detmath's, the same bits on every GOARCH).
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return detmath.Log(1 + detmath.Exp(x))
}
