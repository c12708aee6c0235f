package cuda

// Per-format dequantization kernels against package quant's exact float64
// decoders of the same Linear values: in fp32 the kernel output must be
// bit-identical to float32(quant's value) (every product the formats define
// is exact in fp32 or rounded exactly once, as quant rounds it), and in
// bf16/fp16 bit-identical to quant's value rounded once more to that dtype.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

func randScales(rng *rand.Rand, n int, dt string) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = quant.RoundDType(dt, math.Ldexp(0.5+rng.Float64(), -rng.IntN(8)))
	}
	return s
}

func randWords(rng *rand.Rand, n int) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = rng.Uint32()
	}
	return w
}

func randBytes(rng *rand.Rand, n int, ok func(byte) bool) []byte {
	b := make([]byte, n)
	for i := range b {
		for {
			b[i] = byte(rng.Uint32())
			if ok == nil || ok(b[i]) {
				break
			}
		}
	}
	return b
}

func gidxFor(rng *rand.Rand, in, gs int) []int32 {
	g := make([]int32, in)
	for c := range g {
		g[c] = int32(c / gs)
	}
	rng.Shuffle(in, func(i, j int) { g[i], g[j] = g[j], g[i] })
	return g
}

func linearCases(rng *rand.Rand) []quant.Linear {
	var ls []quant.Linear
	base := func(name string, out, in int) quant.Base { return quant.Base{Name: name, Out: out, In: in, Fmt: name} }
	// compressed-tensors pack-quantized
	for _, c := range []struct {
		bits, out, in, gs int
		strategy          string
		sym, legacy, gi   bool
		sdt               string
	}{
		{4, 5, 64, 32, "group", true, false, false, "BF16"},
		{4, 8, 96, 32, "group", false, false, true, "F16"},
		{8, 3, 40, 0, "channel", true, false, false, "F32"},
		{3, 4, 70, 0, "channel", false, false, false, "BF16"},
		{3, 4, 70, 0, "channel", true, true, false, "BF16"},
		{5, 3, 33, 0, "tensor", true, false, false, "BF16"},
		{2, 6, 64, 16, "group", false, false, false, "BF16"},
	} {
		gs, groups := c.in, 1
		if c.strategy == "group" {
			gs, groups = c.gs, (c.in+c.gs-1)/c.gs
		}
		wpr := (c.in*c.bits + 31) / 32
		if c.legacy {
			per := 32 / c.bits
			wpr = (c.in + per - 1) / per
		}
		p := &quant.PackedInt{Base: base(fmt.Sprintf("ct-int%d-%s-sym%v-legacy%v-gidx%v", c.bits, c.strategy, c.sym, c.legacy, c.gi), c.out, c.in),
			IntParams: quant.IntParams{Bits: c.bits, Symmetric: c.sym, Strategy: c.strategy, GroupSize: gs, Groups: groups,
				Scale: randScales(rng, c.out*groups, c.sdt), ScaleDType: c.sdt},
			Legacy: c.legacy, WordsPerRow: wpr, Packed: randWords(rng, c.out*wpr)}
		if c.legacy { // high bits of each word are zero in the legacy layout
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
	// int-quantized I8 codes, channel scales, with and without zero points
	for _, asym := range []bool{false, true} {
		out, in := 7, 50
		u := &quant.UnpackedInt{Base: base(fmt.Sprintf("int8-asym%v", asym), out, in),
			IntParams: quant.IntParams{Bits: 8, Symmetric: !asym, Strategy: "channel", GroupSize: in, Groups: 1,
				Scale: randScales(rng, out, "BF16"), ScaleDType: "BF16"}}
		u.Codes = make([]int8, out*in)
		for i := range u.Codes {
			u.Codes[i] = int8(rng.Uint32())
		}
		if asym {
			u.Zero = make([]int32, out)
			for i := range u.Zero {
				u.Zero[i] = int32(rng.IntN(256) - 128)
			}
		}
		ls = append(ls, u)
	}
	notNaN := func(b byte) bool { return b&0x7f != 0x7f }
	// FP8: tensor, channel, block
	for _, c := range []struct {
		out, in, bh, bw int
		name            string
	}{{6, 40, 6, 40, "fp8-tensor"}, {6, 40, 1, 40, "fp8-channel"}, {10, 40, 4, 16, "fp8-block"}} {
		sr, scn := (c.out+c.bh-1)/c.bh, (c.in+c.bw-1)/c.bw
		ls = append(ls, &quant.FP8{Base: base(c.name, c.out, c.in), Strategy: c.name, Codes: randBytes(rng, c.out*c.in, notNaN),
			Scale: randScales(rng, sr*scn, "BF16"), ScaleDType: "BF16", ScaleRows: sr, ScaleCols: scn, BlockRows: c.bh, BlockCols: c.bw})
	}
	// quant_method fp8: F32 weight_scale_inv per block (partial last blocks),
	// the product rounded to f32
	ls = append(ls, &quant.FP8{Base: base("fp8-method-block", 10, 48), Strategy: "block", Codes: randBytes(rng, 10*48, notNaN),
		Scale: randScales(rng, 3*3, "F32"), ScaleDType: "F32", ScaleRows: 3, ScaleCols: 3, BlockRows: 4, BlockCols: 16})
	for _, odt := range []string{"BF16", "F32"} {
		ls = append(ls, &quant.NVFP4{Base: base("nvfp4-"+odt, 5, 64), Packed: randBytes(rng, 5*32, nil),
			Scales: randBytes(rng, 5*4, notNaN), GlobalScale: float32(896 + rng.Float64()*100), OutDType: odt})
	}
	// ModelOpt NVFP4: weight_scale_2 multiplies the block scales
	for _, odt := range []string{"BF16", "F16"} {
		ls = append(ls, &quant.NVFP4{Base: base("modelopt-nvfp4-"+odt, 5, 64), Packed: randBytes(rng, 5*32, nil),
			Scales: randBytes(rng, 5*4, notNaN), GlobalScale: float32(0.001 + rng.Float64()*0.01), OutDType: odt, Scale2: true})
	}
	ls = append(ls, &quant.MXFP4{Base: base("mxfp4", 4, 64), Packed: randBytes(rng, 4*32, nil),
		Scales: randBytes(rng, 4*2, func(b byte) bool { return b > 100 && b < 140 })})
	for _, c := range []struct {
		bits int
		v2   bool
	}{{4, false}, {4, true}, {8, false}, {2, true}} {
		out, in, gs := 16, 64, 32
		groups, per := in/gs, 32/c.bits
		ls = append(ls, &quant.GPTQ{Base: base(fmt.Sprintf("gptq-%d-v2%v", c.bits, c.v2), out, in), Bits: c.bits, GroupSize: gs, Groups: groups,
			V2: c.v2, QWeight: randWords(rng, in/per*out), QZeros: randWords(rng, groups*out/per),
			Scales: randScales(rng, groups*out, "F16"), ScaleDType: "F16", GIdx: gidxFor(rng, in, gs)})
	}
	ls = append(ls, &quant.AWQ{Base: base("awq", 16, 64), GroupSize: 32, Groups: 2, QWeight: randWords(rng, 64*2),
		QZeros: randWords(rng, 2*2), Scales: randScales(rng, 2*16, "F16"), ScaleDType: "F16"})
	// bitsandbytes 4-bit (blocks crossing rows, odd element count) and LLM.int8
	nf4, fp4 := quant.BNB4Code("nf4"), quant.BNB4Code("fp4")
	randF32 := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Ldexp(0.5+rng.Float64(), -rng.IntN(6)))
		}
		return v
	}
	for _, c := range []struct {
		code      [16]float32
		od, cd    string
		nested    bool
		out, in   int
		blocksize int
	}{{nf4, "BF16", "BF16", false, 5, 40, 64}, {fp4, "F16", "F32", true, 7, 37, 32}, {nf4, "F32", "F32", true, 9, 64, 64}, {fp4, "BF16", "F16", false, 3, 50, 128}} {
		n := c.out * c.in
		blocks := (n + c.blocksize - 1) / c.blocksize
		q := &quant.BNB4{Base: base(fmt.Sprintf("bnb4-%s-%s-nested%v", c.od, c.cd, c.nested), c.out, c.in), Code: c.code, BlockSize: c.blocksize,
			Packed: randBytes(rng, (n+1)/2, nil), OutDType: c.od, ComputeDType: c.cd}
		if c.nested {
			q.Nested, q.NestedBlockSize, q.Offset = true, 4, float32(rng.Float64())
			q.QAbsmax = randBytes(rng, blocks, nil)
			q.NestedAbsmax = randF32((blocks + 3) / 4)
			q.NestedCode = randF32(256)
		} else {
			q.Absmax = randF32(blocks)
		}
		ls = append(ls, q)
	}
	b8 := &quant.BNB8{Base: base("bnb8", 6, 40), Codes: make([]int8, 240), SCB: make([]float64, 6)}
	for i := range b8.Codes {
		b8.Codes[i] = int8(rng.Uint32())
	}
	for i := range b8.SCB {
		b8.SCB[i] = float64(float32(rng.Float64() * 3))
	}
	ls = append(ls, b8)
	for _, dt := range []string{"BF16", "F16", "F32"} {
		raw := make([]byte, 0)
		for i := 0; i < 4*24; i++ {
			raw = quant.EncodeFloat(raw, dt, quant.RoundDType(dt, rng.NormFloat64()))
		}
		ls = append(ls, &quant.Dense{Base: base("dense-"+dt, 4, 24), DType: dt, Raw: raw})
	}
	return ls
}

func TestDequantizeKernelsMatchQuant(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	d := emuDevices(t, 1, 1<<28)[0]
	for _, l := range linearCases(rng) {
		checkDequantKernel(t, d, l, 0)
	}
}

// checkDequantKernel runs l's dequantization kernel into a scratch at byte
// offset off (0: aligned; 2: the kernels' scalar store path) for every GEMM
// dtype and compares each element with quant's decoder.
func checkDequantKernel(t *testing.T, d device.Device, l quant.Linear, off int) {
	t.Helper()
	out, in := l.Shape()
	want := make([]float64, out*in)
	if err := l.Dequantize(want); err != nil {
		t.Fatalf("%s: quant: %v", l.Module(), err)
	}
	for _, odt := range []device.DType{device.F32, device.BF16, device.F16} {
		h, err := prepareLinear(l, odt)
		if err != nil {
			t.Fatalf("%s: %v", l.Module(), err)
		}
		dl, err := upload(d, h)
		if err != nil {
			t.Fatal(err)
		}
		// off elements into the scratch: not 16-byte aligned (the kernels'
		// scalar stores), yet aligned to the output type, as every buffer
		// of the backend is (a 2-byte offset of an fp32 output faults on
		// a GPU: misaligned address).
		scratch, err := d.Alloc(int64((out*in + off) * odt.Size()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := dl.weight(d, scratch+device.Ptr(off*odt.Size()), odt)
		if err != nil {
			t.Fatalf("%s: %v", l.Module(), err)
		}
		buf := make([]byte, out*in*odt.Size())
		if err := d.CopyOut(buf, p); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			var got, exp float64
			switch odt {
			case device.F32:
				got = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])))
				exp = quant.RoundF32(w)
			case device.BF16:
				got = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[2*i:])) << 16))
				exp = quant.RoundBF16(w)
			case device.F16:
				v := make([]float64, 1)
				v[0] = decodeF16(binary.LittleEndian.Uint16(buf[2*i:]))
				got = v[0]
				exp = quant.RoundF16(w)
			}
			if got != exp && !(math.IsNaN(got) && math.IsNaN(exp)) {
				t.Errorf("%s %v: element [%d,%d] = %v, quant gives %v (exact %v)", l.Module(), odt, i/in, i%in, got, exp, w)
				break
			}
		}
		for _, q := range dl.ptrs {
			if q != p {
				d.Free(q)
			}
		}
		d.Free(scratch)
	}
}

func decodeF16(h uint16) float64 {
	s, e, m := h>>15, int(h>>10)&31, float64(h&0x3ff)
	var v float64
	switch e {
	case 0:
		v = m * 0x1p-24
	case 31:
		v = math.Inf(1)
		if m != 0 {
			v = math.NaN()
		}
	default:
		v = (1 + m/1024) * math.Ldexp(1, e-15)
	}
	if s != 0 {
		v = -v
	}
	return v
}
