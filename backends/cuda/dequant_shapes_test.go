package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qppl/qppl/quant"
)

// shapeCases returns a Linear of every format at shapes chosen against the
// kernels' geometry (kernels/dq.cuh): rows that are not a multiple of the
// 8-row block, columns past whole 256-column (row-major) or 128-input
// (GPTQ/AWQ) tiles and not a multiple of the 16 inputs a GPTQ/AWQ thread
// writes, columns that are not a multiple of 8 (the scalar path), group
// sizes 32/64/128 and ones that split a thread's 8 or 16 values, partial
// last groups and blocks, and activation-order g_idx.
func shapeCases(rng *rand.Rand) []quant.Linear {
	var ls []quant.Linear
	base := func(name string, out, in int) quant.Base {
		return quant.Base{Name: fmt.Sprintf("%s-%dx%d", name, out, in), Out: out, In: in, Fmt: name}
	}
	// compressed-tensors pack-quantized
	for _, c := range []struct {
		bits, out, in, gs int // gs 0: channel
		sym, legacy, gi   bool
	}{
		{4, 13, 520, 32, true, false, false},
		{4, 9, 264, 64, false, false, false},
		{4, 17, 384, 128, true, false, true},  // actorder
		{4, 11, 200, 128, false, false, true}, // actorder, partial last group
		{4, 5, 70, 32, true, false, false},    // K % 8 != 0: scalar stores
		{4, 6, 72, 12, false, false, false},   // a group boundary inside a thread's 8 values
		{8, 9, 272, 0, true, false, false},    // two words per thread
		{8, 3, 100, 64, false, false, true},   // K % 8 != 0, actorder
		{3, 10, 296, 32, false, false, false}, // values straddle words (two words per thread)
		{5, 7, 264, 64, true, false, false},   // 40 bits per thread
		{2, 12, 544, 64, false, false, false}, // two threads per word
		{3, 9, 270, 0, true, true, false},     // legacy: 10 values per word
		{4, 9, 264, 64, false, true, false},   // legacy 4-bit (the dense layout)
		{6, 4, 300, 128, false, false, true},  // 6-bit, actorder
		{7, 5, 264, 32, false, false, false},  // 7-bit: three words for some threads
	} {
		strategy, gs, groups := "channel", c.in, 1
		if c.gs > 0 {
			strategy, gs, groups = "group", c.gs, (c.in+c.gs-1)/c.gs
		}
		sdt := []string{"BF16", "F16", "F32"}[rng.IntN(3)]
		wpr := (c.in*c.bits + 31) / 32
		if c.legacy {
			per := 32 / c.bits
			wpr = (c.in + per - 1) / per
		}
		p := &quant.PackedInt{Base: base(fmt.Sprintf("ct-int%d-g%d-sym%v-legacy%v-gidx%v", c.bits, c.gs, c.sym, c.legacy, c.gi), c.out, c.in),
			IntParams: quant.IntParams{Bits: c.bits, Symmetric: c.sym, Strategy: strategy, GroupSize: gs, Groups: groups,
				Scale: randScales(rng, c.out*groups, sdt), ScaleDType: sdt},
			Legacy: c.legacy, WordsPerRow: wpr, Packed: randWords(rng, c.out*wpr)}
		if c.legacy {
			per := 32 / c.bits
			for i := range p.Packed {
				p.Packed[i] &= 1<<(per*c.bits) - 1
			}
		}
		if !c.sym {
			p.Zero = make([]int32, c.out*groups)
			for i := range p.Zero {
				p.Zero[i] = int32(rng.IntN(1<<c.bits)) - 1<<(c.bits-1)
			}
		}
		if c.gi {
			p.GIdx = gidxFor(rng, c.in, gs)
		}
		ls = append(ls, p)
	}
	// int-quantized I8: channel and group scales, with and without zero points
	for _, c := range []struct {
		out, in, gs int
		asym        bool
	}{{13, 520, 0, false}, {9, 264, 32, true}, {5, 70, 0, true}, {6, 200, 12, true}, {7, 136, 128, false}} {
		gs, groups := c.in, 1
		if c.gs > 0 {
			gs, groups = c.gs, (c.in+c.gs-1)/c.gs
		}
		u := &quant.UnpackedInt{Base: base(fmt.Sprintf("int8-g%d-asym%v", c.gs, c.asym), c.out, c.in),
			IntParams: quant.IntParams{Bits: 8, Symmetric: !c.asym, Strategy: "group", GroupSize: gs, Groups: groups,
				Scale: randScales(rng, c.out*groups, "BF16"), ScaleDType: "BF16"}}
		u.Codes = make([]int8, c.out*c.in)
		for i := range u.Codes {
			u.Codes[i] = int8(rng.Uint32())
		}
		if c.asym {
			u.Zero = make([]int32, c.out*groups)
			for i := range u.Zero {
				u.Zero[i] = int32(rng.IntN(256) - 128)
			}
		}
		ls = append(ls, u)
	}
	notNaN := func(b byte) bool { return b&0x7f != 0x7f }
	// FP8: tensor, channel, blocks (partial last blocks; a block width that
	// splits a thread's 8 columns)
	for _, c := range []struct {
		out, in, bh, bw int
		name, sdt       string
	}{
		{13, 520, 13, 520, "fp8-tensor", "BF16"}, {9, 70, 1, 70, "fp8-channel", "BF16"},
		{37, 300, 16, 128, "fp8-block", "F32"}, {20, 264, 8, 12, "fp8-block12", "BF16"},
	} {
		sr, scn := (c.out+c.bh-1)/c.bh, (c.in+c.bw-1)/c.bw
		ls = append(ls, &quant.FP8{Base: base(c.name, c.out, c.in), Strategy: c.name, Codes: randBytes(rng, c.out*c.in, notNaN),
			Scale: randScales(rng, sr*scn, c.sdt), ScaleDType: c.sdt, ScaleRows: sr, ScaleCols: scn, BlockRows: c.bh, BlockCols: c.bw})
	}
	for _, c := range []struct{ out, in int }{{13, 528}, {9, 80}} {
		ls = append(ls, &quant.NVFP4{Base: base("nvfp4", c.out, c.in), Packed: randBytes(rng, c.out*c.in/2, nil),
			Scales: randBytes(rng, c.out*c.in/16, notNaN), GlobalScale: float32(896 + rng.Float64()*100), OutDType: "BF16"})
		ls = append(ls, &quant.NVFP4{Base: base("modelopt-nvfp4", c.out, c.in), Packed: randBytes(rng, c.out*c.in/2, nil),
			Scales: randBytes(rng, c.out*c.in/16, notNaN), GlobalScale: float32(0.001 + rng.Float64()*0.01), OutDType: "F16", Scale2: true})
	}
	for _, c := range []struct{ out, in int }{{13, 544}, {9, 96}} {
		ls = append(ls, &quant.MXFP4{Base: base("mxfp4", c.out, c.in), Packed: randBytes(rng, c.out*c.in/2, nil),
			Scales: randBytes(rng, c.out*c.in/32, func(b byte) bool { return b > 100 && b < 140 })})
	}
	// GPTQ: out a multiple of 32/bits (qzeros packing), in of 32/bits and of
	// the group size (or at most one group); output rows past a 32-row warp,
	// inputs past 128-input tiles and not a multiple of 16
	for _, c := range []struct {
		bits, out, in, gs int
		v2, actorder      bool
	}{
		{4, 40, 96, 32, false, false}, {4, 40, 72, 72, true, false}, {4, 48, 384, 128, false, true},
		{4, 8, 264, 8, false, true}, {8, 36, 260, 260, false, false}, {8, 12, 192, 64, true, true},
		{2, 48, 192, 64, true, true}, {2, 16, 208, 16, false, false},
	} {
		groups, per := (c.in+c.gs-1)/c.gs, 32/c.bits
		g := &quant.GPTQ{Base: base(fmt.Sprintf("gptq-%d-g%d-v2%v-act%v", c.bits, c.gs, c.v2, c.actorder), c.out, c.in), Bits: c.bits,
			GroupSize: c.gs, Groups: groups, V2: c.v2, QWeight: randWords(rng, c.in/per*c.out), QZeros: randWords(rng, groups*c.out/per),
			Scales: randScales(rng, groups*c.out, "F16"), ScaleDType: "F16", GIdx: make([]int32, c.in)}
		for i := range g.GIdx {
			g.GIdx[i] = int32(i / c.gs)
		}
		if c.actorder {
			g.GIdx = gidxFor(rng, c.in, c.gs)
		}
		ls = append(ls, g)
	}
	// AWQ: out a multiple of 8, in of the group size; 5 and 33 words across
	// (partial 32-word tiles), one or several groups starting inside a
	// thread's 16 inputs
	for _, c := range []struct{ out, in, gs int }{{40, 96, 32}, {264, 384, 128}, {72, 192, 64}, {16, 72, 24}, {8, 40, 8}, {8, 40, 4}} {
		groups := c.in / c.gs
		ls = append(ls, &quant.AWQ{Base: base(fmt.Sprintf("awq-g%d", c.gs), c.out, c.in), GroupSize: c.gs, Groups: groups,
			QWeight: randWords(rng, c.in*c.out/8), QZeros: randWords(rng, groups*c.out/8),
			Scales: randScales(rng, groups*c.out, "F16"), ScaleDType: "F16"})
	}
	// bitsandbytes 4-bit (blocks over the flattened weight, crossing rows
	// when K % 8 != 0; nested absmax) and LLM.int8
	for _, c := range []struct {
		out, in, bs int
		nested      bool
	}{{13, 520, 64, false}, {5, 70, 32, true}, {9, 264, 128, true}, {3, 37, 64, false}} {
		n := c.out * c.in
		blocks := (n + c.bs - 1) / c.bs
		q := &quant.BNB4{Base: base(fmt.Sprintf("bnb4-b%d-nested%v", c.bs, c.nested), c.out, c.in), Code: quant.BNB4Code("nf4"),
			BlockSize: c.bs, Packed: randBytes(rng, (n+1)/2, nil), OutDType: "BF16", ComputeDType: "BF16"}
		scales := randScales(rng, blocks, "F32")
		if c.nested {
			q.Nested, q.NestedBlockSize, q.Offset = true, 8, 0.0625
			q.QAbsmax = randBytes(rng, blocks, nil)
			for _, s := range randScales(rng, (blocks+7)/8, "F32") {
				q.NestedAbsmax = append(q.NestedAbsmax, float32(s))
			}
			for _, s := range randScales(rng, 256, "F32") {
				q.NestedCode = append(q.NestedCode, float32(s))
			}
		} else {
			for _, s := range scales {
				q.Absmax = append(q.Absmax, float32(s))
			}
		}
		ls = append(ls, q)
	}
	for _, c := range []struct{ out, in int }{{13, 520}, {5, 70}} {
		b8 := &quant.BNB8{Base: base("bnb8", c.out, c.in), Codes: make([]int8, c.out*c.in), SCB: randScales(rng, c.out, "F32")}
		for i := range b8.Codes {
			b8.Codes[i] = int8(rng.Uint32())
		}
		ls = append(ls, b8)
	}
	for _, dt := range []string{"BF16", "F16", "F32"} {
		for _, c := range []struct{ out, in int }{{13, 520}, {3, 70}, {9, 264}} {
			raw := make([]byte, 0)
			for i := 0; i < c.out*c.in; i++ {
				raw = quant.EncodeFloat(raw, dt, quant.RoundDType(dt, rng.NormFloat64()))
			}
			ls = append(ls, &quant.Dense{Base: base("dense-"+dt, c.out, c.in), DType: dt, Raw: raw})
		}
	}
	return ls
}

// TestDequantizeKernelsShapes: every format at shapes that exercise the
// edges of the 2-D launch geometry is bit-identical to quant's decoder, in
// each GEMM dtype, written to an aligned scratch (16-byte stores) and to
// one 2 bytes off (the scalar path a misaligned buffer takes).
func TestDequantizeKernelsShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 8))
	d := emuDevices(t, 1, 1<<28)[0]
	for _, l := range shapeCases(rng) {
		for _, off := range []int{0, 2} {
			checkDequantKernel(t, d, l, off)
		}
	}
}
