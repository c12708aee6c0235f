package cuda

import (
	"encoding/binary"
	"fmt"
	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/internal/torchtopk"
	"github.com/qppl/qppl/quant"
	"math"
)

// gptOssSource is a source that can open gpt-oss's fused experts.
type gptOssSource interface {
	gptOssExperts(gateUp, down string, experts, hidden, inter int) (gu, dn []quant.Linear, err error)
}

func (s ckptSource) gptOssExperts(gateUp, down string, experts, hidden, inter int) ([]quant.Linear, []quant.Linear, error) {
	return s.scheme.OpenGptOssExperts(s.m, gateUp, down, experts, hidden, inter)
}

// gptOssMixture computes gpt-oss's MLP (GptOssTopKRouter, GptOssExperts)
// of the normed rows ds.h into ds.proj. Reference: reference.gptOssMixture.
//
// The router logits (fp32 GEMM as in mixture, plus the router bias on the
// device) go to the host, which takes the top k logits (the lower expert
// index first on a tie) and the softmax over them in float64. Each chosen
// expert runs on its gathered rows: the gate_up GEMM plus its bias
// ([rows][2·I], gate and up interleaved), oss_glu, the down GEMM plus its
// bias; its rows come back to be added, weighted, in expert order into an
// fp32 accumulator uploaded to ds.proj (the host gather and scatter of
// mixture).
func (b *Backend) gptOssMixture(ds *devState, lw *layerDev, T int, probeRouter func(logits device.Ptr) error) error {
	s := b.spec
	d := ds.d
	C, E, k, I := s.Hidden, s.MoE.Experts, s.MoE.TopK, s.MoE.Intermediate
	ds.xaCastOf = 0
	if lw.router32 != 0 {
		if err := d.Gemm(device.Gemm{M: T, N: E, K: C, A: ds.h, B: lw.router32, C: ds.gate, AType: device.F32, BType: device.F32}); err != nil {
			return fmt.Errorf("router: %w", err)
		}
		if err := device.LaunchAddBiasRows(d, ds.gate, lw.bias[arch.ProjRouter], T, E); err != nil {
			return err
		}
	} else if err := b.linear(ds, lw.lin[arch.ProjRouter], ds.h, T, ds.gate, lw.bias[arch.ProjRouter]); err != nil {
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
	logit := make([]float64, E)
	p := make([]float64, k)
	for t := 0; t < T; t++ {
		for e := range logit {
			logit[e] = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(t*E+e):])))
		}
		order := torchtopk.Indices(logit, k) // descending, ties as torch.topk
		mx := logit[order[0]]
		var sum float64
		for j, e := range order[:k] {
			p[j] = math.Exp(logit[e] - mx)
			sum += p[j]
		}
		for j, e := range order[:k] {
			routes[e] = append(routes[e], route{t, float32(p[j] / sum)})
		}
	}
	return b.runExperts(ds, routes, T, ds.h, ds.proj, buf, func(e, n int) error {
		x := &lw.experts[e]
		if err := b.linear(ds, x[arch.ProjGateUp], ds.moeIn, n, ds.gate, lw.guBias+device.Ptr(4*e*2*I)); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		}
		if err := device.LaunchOssGlu(d, ds.up, ds.gate, n*I, float32(s.GptOss.Alpha), float32(s.GptOss.Limit)); err != nil {
			return err
		}
		if err := b.linear(ds, x[arch.ProjDown], ds.up, n, ds.moeOut, lw.dnBias+device.Ptr(4*e*C)); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		}
		return nil
	})
}
