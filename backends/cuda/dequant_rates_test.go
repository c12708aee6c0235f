package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/quant"
)

// A rateFormat is one format of the dequantization throughput table
// (TestDequantThroughput under make gpu-check, docs/cuda.md's budget):
// its name and a random Linear of it at out × in (in a multiple of 128,
// out of 32).
type rateFormat struct {
	name string
	make func(rng *rand.Rand, out, in int) quant.Linear
}

func rateFormats() []rateFormat {
	base := func(name string, out, in int) quant.Base {
		return quant.Base{Name: fmt.Sprintf("%s-%dx%d", name, out, in), Out: out, In: in, Fmt: name}
	}
	ctpack := func(name string, bits, gs int, sym, actorder bool) rateFormat {
		return rateFormat{name, func(rng *rand.Rand, out, in int) quant.Linear {
			strategy, groups := "channel", 1
			if gs > 0 {
				strategy, groups = "group", in/gs
			} else {
				gs = in
			}
			wpr := in * bits / 32
			p := &quant.PackedInt{Base: base(name, out, in),
				IntParams: quant.IntParams{Bits: bits, Symmetric: sym, Strategy: strategy, GroupSize: gs, Groups: groups,
					Scale: randScales(rng, out*groups, "BF16"), ScaleDType: "BF16"},
				WordsPerRow: wpr, Packed: randWords(rng, out*wpr)}
			if !sym {
				p.Zero = make([]int32, out*groups)
				for i := range p.Zero {
					p.Zero[i] = int32(rng.IntN(1<<bits)) - 1<<(bits-1)
				}
			}
			if actorder {
				p.GIdx = gidxFor(rng, in, gs)
			}
			return p
		}}
	}
	dense := func(dt string) rateFormat {
		return rateFormat{"dense " + dt + " (cast)", func(rng *rand.Rand, out, in int) quant.Linear {
			raw := make([]byte, 0, out*in*4)
			for i := 0; i < out*in; i++ {
				raw = quant.EncodeFloat(raw, dt, quant.RoundDType(dt, float64(int(rng.Uint32()>>20)-2048)/1024))
			}
			return &quant.Dense{Base: base("dense-"+dt, out, in), DType: dt, Raw: raw}
		}}
	}
	notNaN := func(b byte) bool { return b&0x7f != 0x7f }
	fp8 := func(name string, bh, bw int) rateFormat {
		return rateFormat{name, func(rng *rand.Rand, out, in int) quant.Linear {
			h, w := bh, bw
			if h == 0 {
				h, w = 1, in
			}
			sr, sc := (out+h-1)/h, (in+w-1)/w
			return &quant.FP8{Base: base(name, out, in), Strategy: name, Codes: randBytes(rng, out*in, notNaN),
				Scale: randScales(rng, sr*sc, "BF16"), ScaleDType: "BF16", ScaleRows: sr, ScaleCols: sc, BlockRows: h, BlockCols: w}
		}}
	}
	gptq := func(name string, actorder bool) rateFormat {
		return rateFormat{name, func(rng *rand.Rand, out, in int) quant.Linear {
			gs, groups := 128, in/128
			g := &quant.GPTQ{Base: base(name, out, in), Bits: 4, GroupSize: gs, Groups: groups, QWeight: randWords(rng, in/8*out),
				QZeros: randWords(rng, groups*out/8), Scales: randScales(rng, groups*out, "F16"), ScaleDType: "F16", GIdx: make([]int32, in)}
			for i := range g.GIdx {
				g.GIdx[i] = int32(i / gs)
			}
			if actorder {
				g.GIdx = gidxFor(rng, in, gs)
			}
			return g
		}}
	}
	return []rateFormat{
		dense("F32"), dense("F16"),
		ctpack("W4A16 (CT int4 g128 sym)", 4, 128, true, false),
		ctpack("W4A16-ASYM (CT int4 g128)", 4, 128, false, false),
		ctpack("W4A16-ACTORDER (CT int4 g128)", 4, 128, true, true),
		ctpack("W8A16 (CT int8 channel)", 8, 0, true, false),
		{"W8A8 (int8 channel)", func(rng *rand.Rand, out, in int) quant.Linear {
			u := &quant.UnpackedInt{Base: base("int8", out, in), IntParams: quant.IntParams{Bits: 8, Symmetric: true, Strategy: "channel",
				GroupSize: in, Groups: 1, Scale: randScales(rng, out, "BF16"), ScaleDType: "BF16"}, Codes: make([]int8, out*in)}
			for i := range u.Codes {
				u.Codes[i] = int8(rng.Uint32())
			}
			return u
		}},
		fp8("FP8 (channel)", 0, 0), fp8("FP8-BLOCK (128×128)", 128, 128),
		{"NVFP4", func(rng *rand.Rand, out, in int) quant.Linear {
			return &quant.NVFP4{Base: base("nvfp4", out, in), Packed: randBytes(rng, out*in/2, nil),
				Scales: randBytes(rng, out*in/16, notNaN), GlobalScale: 448 * 6 / 0.05, OutDType: "BF16"}
		}},
		{"MXFP4", func(rng *rand.Rand, out, in int) quant.Linear {
			return &quant.MXFP4{Base: base("mxfp4", out, in), Packed: randBytes(rng, out*in/2, nil),
				Scales: randBytes(rng, out*in/32, func(b byte) bool { return b > 110 && b < 130 })}
		}},
		gptq("GPTQ int4 g128", false), gptq("GPTQ int4 g128 actorder", true),
		{"AWQ int4 g128", func(rng *rand.Rand, out, in int) quant.Linear {
			groups := in / 128
			return &quant.AWQ{Base: base("awq", out, in), GroupSize: 128, Groups: groups, QWeight: randWords(rng, in*out/8),
				QZeros: randWords(rng, groups*out/8), Scales: randScales(rng, groups*out, "F16"), ScaleDType: "F16"}
		}},
	}
}

// dequantBytes is the bytes-moved model of one dequantization: every
// uploaded buffer read once (packed words, scales, zero points, g_idx),
// the scratch written once in the GEMM dtype. A kernel at this model's
// bytes over the memory bandwidth is at the roofline (docs/cuda.md).
func dequantBytes(h *hostLinear, gemmDT device.DType) (read, written int64) {
	return h.bytes(), int64(h.out) * int64(h.in) * int64(gemmDT.Size())
}

// TestDequantRateFormats: every format the GPU throughput table times is
// decoded bit-identically to quant at a small shape (so make gpu-check
// times kernels known to be right), and the bytes model counts W4A16 as
// 4 bits + a bf16 scale per 128 weights read and 2 bytes written.
func TestDequantRateFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := emuDevices(t, 1, 1<<28)[0]
	for _, f := range rateFormats() {
		l := f.make(rng, 40, 384)
		checkDequantKernel(t, d, l, 0)
	}
	const out, in = 64, 1024
	h, err := prepareLinear(rateFormats()[2].make(rng, out, in), device.BF16)
	if err != nil {
		t.Fatal(err)
	}
	r, w := dequantBytes(h, device.BF16)
	if r != out*in/2+out*in/128*2 || w != out*in*2 {
		t.Errorf("W4A16 %d×%d: model reads %d and writes %d bytes, want %d and %d", out, in, r, w, out*in/2+out*in/128*2, out*in*2)
	}
}

// BenchmarkEmuDequant runs each throughput format's kernel on the emulator
// at 512 × 4096 into bf16 (a property of the emulator running the kernels
// as host C++, not a GPU estimate).
func BenchmarkEmuDequant(b *testing.B) {
	d := emuDevices(b, 1, 1<<30)[0]
	rng := rand.New(rand.NewPCG(7, 8))
	for _, f := range rateFormats() {
		b.Run(f.name, func(b *testing.B) {
			h, err := prepareLinear(f.make(rng, 512, 4096), device.BF16)
			if err != nil {
				b.Fatal(err)
			}
			dl, err := upload(d, h)
			if err != nil {
				b.Fatal(err)
			}
			scratch, err := d.Alloc(512 * 4096 * 2)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := dl.weight(d, scratch, device.BF16); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(512*4096*b.N)/b.Elapsed().Seconds()/1e6, "Mweights/s")
			for _, p := range dl.ptrs {
				d.Free(p)
			}
			d.Free(scratch)
		})
	}
}
