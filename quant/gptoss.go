package quant

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// MethodMXFP4 is the quant_method of the MXFP4 checkpoints of gpt-oss
// (transformers' Mxfp4Config, quantizers/quantizer_mxfp4.py): the experts'
// fused weights are stored as *_blocks and *_scales (OpenGptOssExperts);
// every nn.Linear stays dense (the published config lists them in
// modules_to_not_convert; Mxfp4HfQuantizer only replaces GptOssExperts).
const MethodMXFP4 = "mxfp4"

// mxfp4MethodFamily is quant_method "mxfp4": no Linear of its own (a
// module's "weight" opens as Dense), the experts through OpenGptOssExperts.
func mxfp4MethodFamily() family {
	return family{
		name:   "mxfp4 (gpt-oss experts)",
		method: MethodMXFP4,
		parse: func(s *Scheme, top map[string]json.RawMessage) error {
			if raw, ok := top["modules_to_not_convert"]; ok && string(raw) != "null" {
				var names []string
				if err := json.Unmarshal(raw, &names); err != nil {
					return fmt.Errorf("modules_to_not_convert: want a list of strings: %v", err)
				}
			}
			return nil
		},
		open: func(_ *Scheme, t tensors, _ *Group) (Linear, error) {
			return openDense(t)
		},
	}
}

// OpenGptOssExperts opens the fused experts of one gpt-oss layer as one
// Linear per expert, in nn.Linear orientation ([out, in]: y = x·Wᵀ):
// gateUp[e] is [2·inter, hidden] (rows interleave gate and up: even rows
// gate, odd rows up, GptOssExperts' gate_up[..., ::2] and [..., 1::2]) and
// down[e] is [hidden, inter]. gateUpName and downName are the tensors'
// names without suffix (model.layers.{i}.mlp.experts.gate_up_proj).
//
// A dense checkpoint stores gate_up_proj [E, hidden, 2·inter] and
// down_proj [E, inter, hidden] for x @ W (GptOssExperts.forward): expert
// e's Linear is the transpose of its slice. An MXFP4 checkpoint (quant_method
// mxfp4) stores gate_up_proj_blocks [E, 2·inter, hidden/32, 16] and
// gate_up_proj_scales [E, 2·inter, hidden/32] (down: [E, hidden, inter/32,
// 16] and [E, hidden, inter/32]), all U8: transformers'
// integrations/mxfp4.py convert_moe_packed_tensors decodes each byte of
// blocks as two FP4_VALUES (E2M1: low nibble first, at the even column),
// multiplies the 32 values of a row and group by 2^(scale - 127) (ldexp),
// giving [E, rows, G·32], then transposes the last two axes into the
// dense layout: so row r of expert e's blocks is row r of its nn.Linear
// weight, the layout of the MXFP4 Linear of this package (whose decoder
// is used: E2M1 codes, E8M0 scales). transformers decodes into bfloat16,
// which holds every product exactly except those of 2^128 and above
// (infinite in bf16): such weights, and the E8M0 NaN scale 0xFF, are
// refused. Only the expert a caller decodes is materialised.
func (s *Scheme) OpenGptOssExperts(src Source, gateUpName, downName string, experts, hidden, inter int) (gateUp, down []Linear, err error) {
	if experts <= 0 || hidden <= 0 || inter <= 0 {
		return nil, nil, fmt.Errorf("gpt-oss experts: sizes %d experts, hidden %d, width %d must be positive", experts, hidden, inter)
	}
	open := func(name string, rows, cols int) ([]Linear, error) {
		t := tensors{src: src, module: name}
		if _, ok := src.Tensor(name + "_blocks"); ok {
			if s.Method != MethodMXFP4 {
				return nil, fmt.Errorf("%s: tensor %s_blocks (MXFP4 experts) but quant_method is %s, want %s", t.file(), name, s.Method, MethodMXFP4)
			}
			return openGptOssMX(t, name, experts, rows, cols)
		}
		ti, ok := src.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("gpt-oss experts: missing tensor %s (or %s_blocks and %s_scales)", name, name, name)
		}
		switch ti.DType {
		case "F32", "F16", "BF16", "F64":
		default:
			return nil, t.errf(ti, "dtype %s, want F32, F16, BF16 or F64 (or MXFP4 _blocks/_scales)", ti.DType)
		}
		// stored [E, in, out] for x @ W
		if len(ti.Shape) != 3 || ti.Shape[0] != experts || ti.Shape[1] != cols || ti.Shape[2] != rows {
			return nil, t.errf(ti, "shape %v, want [%d %d %d] from config.json", ti.Shape, experts, cols, rows)
		}
		raw, err := t.raw(ti)
		if err != nil {
			return nil, err
		}
		// Each expert's slice [cols][rows], transposed once into the
		// nn.Linear layout [rows][cols] of a Dense weight (the bytes as
		// stored, moved).
		sz := dtypeSize(string(ti.DType))
		per := rows * cols * sz
		tr := make([]byte, len(raw))
		for e := 0; e < experts; e++ {
			src, dst := raw[e*per:(e+1)*per], tr[e*per:(e+1)*per]
			for c := 0; c < cols; c++ {
				for r := 0; r < rows; r++ {
					copy(dst[(r*cols+c)*sz:(r*cols+c+1)*sz], src[(c*rows+r)*sz:(c*rows+r+1)*sz])
				}
			}
		}
		out := make([]Linear, experts)
		for e := range out {
			x := &Dense{DType: string(ti.DType), Raw: tr[e*per : (e+1)*per]}
			x.Base = Base{Name: fmt.Sprintf("%s[%d]", name, e), Out: rows, In: cols, Fmt: strings.ToLower(string(ti.DType)),
				Bytes: int64(per), FileName: ti.File}
			out[e] = x
		}
		return out, nil
	}
	if gateUp, err = open(gateUpName, 2*inter, hidden); err != nil {
		return nil, nil, err
	}
	if down, err = open(downName, hidden, inter); err != nil {
		return nil, nil, err
	}
	return gateUp, down, nil
}

// openGptOssMX opens name_blocks [E, rows, cols/32, 16] and name_scales
// [E, rows, cols/32] (U8) as one MXFP4 Linear per expert.
func openGptOssMX(t tensors, name string, experts, rows, cols int) ([]Linear, error) {
	if cols%32 != 0 {
		return nil, fmt.Errorf("%s: %s: input width %d is not a multiple of 32", t.file(), name, cols)
	}
	g := cols / 32
	get := func(suffix string) (checkpoint.TensorInfo, error) {
		ti, ok := t.src.Tensor(name + suffix)
		if !ok {
			return ti, fmt.Errorf("%s: missing tensor %s%s", t.file(), name, suffix)
		}
		if ti.DType != "U8" {
			return ti, t.errf(ti, "dtype %s, want U8", ti.DType)
		}
		return ti, nil
	}
	bti, err := get("_blocks")
	if err != nil {
		return nil, err
	}
	if err := t.shape(bti, experts, rows, g, 16); err != nil {
		return nil, err
	}
	sti, err := get("_scales")
	if err != nil {
		return nil, err
	}
	if err := t.shape(sti, experts, rows, g); err != nil {
		return nil, err
	}
	blocks, err := t.raw(bti)
	if err != nil {
		return nil, err
	}
	scales, err := e8m0Scales(t, sti)
	if err != nil {
		return nil, err
	}
	for i, b := range scales {
		if b < 252 { // |code| ≤ 6 < 2^3: every product is below 2^128
			continue
		}
		for k, c := range blocks[16*i : 16*i+16] {
			for _, code := range []byte{c & 0xF, c >> 4} {
				if v := math.Ldexp(DecodeE2M1(code), int(b)-127); math.Abs(v) >= 0x1p128 {
					return nil, t.errf(bti, "group %d byte %d decodes to %v·2^%d, infinite in transformers' bfloat16 decode (convert_moe_packed_tensors)", i, k, DecodeE2M1(code), int(b)-127)
				}
			}
		}
	}
	pb, ps := rows*g*16, rows*g
	out := make([]Linear, experts)
	for e := range out {
		m := &MXFP4{Packed: blocks[e*pb : (e+1)*pb], Scales: scales[e*ps : (e+1)*ps]}
		m.Base = Base{Name: fmt.Sprintf("%s[%d]", name, e), Out: rows, In: cols, Fmt: "mxfp4",
			Bytes: int64(pb + ps), FileName: bti.File}
		out[e] = m
	}
	return out, nil
}

// gptOssExpertInfo returns the bits-per-weight entries of gpt-oss's fused
// experts, which are not Linear modules: every decoder-layer tensor
// mlp.experts.{gate_up,down}_proj (3-D, dense) or its _blocks and _scales
// (MXFP4: 4.25 bits per weight), beside its _bias (the layout only gpt-oss
// has). Out is experts·rows, In the input width; Bytes excludes the bias.
func gptOssExpertInfo(src Source) []ModuleInfo {
	var out []ModuleInfo
	for _, name := range src.Names() {
		layer := layerOf(name)
		if layer < 0 {
			continue
		}
		for _, p := range []string{".mlp.experts.gate_up_proj", ".mlp.experts.down_proj"} {
			mod, ok := strings.CutSuffix(name, p+"_bias")
			if !ok {
				continue
			}
			mod += p
			mi := ModuleInfo{Module: mod, Layer: layer}
			if ti, ok := src.Tensor(mod); ok && len(ti.Shape) == 3 {
				mi.Format, mi.Out, mi.In, mi.Bytes = strings.ToLower(string(ti.DType)), ti.Shape[0]*ti.Shape[2], ti.Shape[1], ti.Size
			} else if bi, ok := src.Tensor(mod + "_blocks"); ok && len(bi.Shape) == 4 {
				si, _ := src.Tensor(mod + "_scales")
				mi.Format, mi.Out, mi.In, mi.Bytes = "mxfp4", bi.Shape[0]*bi.Shape[1], bi.Shape[2]*32, bi.Size+si.Size
			} else {
				continue
			}
			if mi.Out*mi.In > 0 {
				mi.BPW = float64(mi.Bytes) * 8 / float64(mi.Out*mi.In)
			}
			out = append(out, mi)
		}
	}
	return out
}

// isGptOssExperts reports gpt-oss's fused expert layout ([E, in, out] for
// x @ W, interleaved gate/up, with a _bias beside each tensor), which
// OpenGptOssExperts reads, not the per-expert slicing of fused.go.
func isGptOssExperts(src Source, tensor string) bool {
	_, ok := src.Tensor(tensor + "_bias")
	return ok
}
