package cuda

import (
	"math"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
)

// Typed launch wrappers of kernels/deltanet.cu (Qwen3.5: Gated DeltaNet,
// gated attention, partial rotary, shared expert gate).

// launchConv1dSilu: out[T][Cd] = silu(causal depthwise conv1d of x[T][Cd]
// with w[Cd][K]) (conv1d_silu).
func launchConv1dSilu(d device.Device, out, x, w device.Ptr, T, Cd, K int) error {
	g, b := device.GridStride(T * Cd)
	return d.Launch("conv1d_silu", g, b, 0, out, x, w, int32(T), int32(Cd), int32(K))
}

// launchL2normQK l2-normalises the 2·nk query/key heads of width dk at the
// start of each row of x[T][Cd], the queries also scaled by qscale (l2norm_qk).
func launchL2normQK(d device.Device, x device.Ptr, T, Cd, nk, dk int, qscale float32) error {
	g, b := device.GridStride(T * 2 * nk)
	return d.Launch("l2norm_qk", g, b, 0, x, int32(T), int32(Cd), int32(nk), int32(dk), qscale)
}

// launchDeltaRule runs the recurrent gated delta rule into out[T][nv·dv]
// with state scratch of nv·dv·dk floats (delta_rule: one thread per value
// channel).
func launchDeltaRule(d device.Device, out, state, qkv, b, a, alog, dtb device.Ptr, T, Cd, nk, nv, dk, dv int) error {
	grid, block := device.GridStride(nv * dv)
	return d.Launch("delta_rule", grid, block, 0, out, state, qkv, b, a, alog, dtb, int32(T), int32(Cd), int32(nk), int32(nv), int32(dk), int32(dv))
}

// launchGatedRMSNorm: x[r] ← w·x[r]/rms(x[r])·silu(z[r]) for rows rows of
// width n (gated_rmsnorm).
func launchGatedRMSNorm(d device.Device, x, z, w device.Ptr, rows, n int, eps float32) error {
	g, b := device.GridStride(rows)
	return d.Launch("gated_rmsnorm", g, b, 0, x, z, w, int32(rows), int32(n), eps)
}

// launchSplitQGate splits qg[T][H][2·D] into q and gate [T][H·D] (split_q_gate).
func launchSplitQGate(d device.Device, q, gate, qg device.Ptr, T, H, D int) error {
	g, b := device.GridStride(T * H * D)
	return d.Launch("split_q_gate", g, b, 0, q, gate, qg, int32(T), int32(H), int32(D))
}

// launchSigmoidMul: x[i] *= sigmoid(g[i]) over n elements (sigmoid_mul).
func launchSigmoidMul(dev device.Device, x, g device.Ptr, n int) error {
	grid, b := device.GridStride(n)
	return dev.Launch("sigmoid_mul", grid, b, 0, x, g, int32(n))
}

// launchRopePartial rotates the first 2·R dimensions of each head of
// x[T][H][D] with tables [T][D/2] (rope_partial).
func launchRopePartial(d device.Device, x, cs, sn device.Ptr, T, H, D, R int) error {
	g, b := device.GridStride(T * H * R)
	return d.Launch("rope_partial", g, b, 0, x, cs, sn, int32(T), int32(H), int32(D), int32(R))
}

// launchSigmoidAddRows: x[r][c] += sigmoid(s[r])·y[r][c] (sigmoid_add_rows).
func launchSigmoidAddRows(d device.Device, x, y, s device.Ptr, rows, cols int) error {
	g, b := device.GridStride(rows * cols)
	return d.Launch("sigmoid_add_rows", g, b, 0, x, y, s, int32(rows), int32(cols))
}

// deltaNet computes a Gated DeltaNet layer of ds.h into ds.proj (the
// out_proj output): in_proj_qkv → causal conv1d + silu → l2-normed q/k →
// the recurrent gated delta rule → gated RMSNorm with silu(in_proj_z) →
// out_proj. Reference: reference.deltaNet (arch/qwen3_5.go for the source).
func (b *Backend) deltaNet(ds *devState, lw *layerDev, T int) error {
	s := b.spec
	la := s.LinearAttn
	d := ds.d
	cd, nv := s.ConvDim(), la.ValueHeads
	for _, p := range []struct {
		proj arch.Proj
		out  device.Ptr
	}{{arch.ProjInQKV, ds.mixed}, {arch.ProjInZ, ds.z}, {arch.ProjInB, ds.lb}, {arch.ProjInA, ds.la}} {
		if err := b.linear(ds, lw.lin[p.proj], ds.h, T, p.out, 0); err != nil {
			return err
		}
	}
	if err := launchConv1dSilu(d, ds.conv, ds.mixed, lw.conv, T, cd, la.ConvKernel); err != nil {
		return err
	}
	if err := launchL2normQK(d, ds.conv, T, cd, la.KeyHeads, la.KeyDim, float32(1/math.Sqrt(float64(la.KeyDim)))); err != nil {
		return err
	}
	if err := launchDeltaRule(d, ds.core, ds.dst, ds.conv, ds.lb, ds.la, lw.aLog, lw.dtBias, T, cd, la.KeyHeads, nv, la.KeyDim, la.ValueDim); err != nil {
		return err
	}
	if err := launchGatedRMSNorm(d, ds.core, ds.z, lw.gnorm, T*nv, la.ValueDim, float32(s.Eps)); err != nil {
		return err
	}
	ds.xaCastOf = 0
	if err := b.linear(ds, lw.lin[arch.ProjOut], ds.core, T, ds.proj, 0); err != nil {
		return err
	}
	return nil
}
