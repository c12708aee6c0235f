package quant

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MethodFP8 is quant_method "fp8": transformers' fine-grained FP8
// (FineGrainedFP8Config: Qwen3-*-FP8, DeepSeek-V3, MiniMax) and the older
// AutoFP8 layout (docs/formats/fp8.md).
const MethodFP8 = "fp8"

// FP8Config is a quant_method "fp8" config.
type FP8Config struct {
	// ActivationScheme is "dynamic" or "static" (activation_scheme).
	ActivationScheme string `json:"activation_scheme"`
	// BlockSize is weight_block_size [rows, cols]: weight_scale_inv holds
	// one F32 multiplier per block and inputs are quantized dynamically in
	// groups of BlockSize[1]. Nil for AutoFP8 checkpoints (per-tensor F32
	// weight_scale, optional static input_scale).
	BlockSize []int `json:"weight_block_size,omitempty"`
	// NotConvert is modules_to_not_convert / ignored_layers (informative:
	// modules are opened by the tensors they have).
	NotConvert []string `json:"modules_to_not_convert,omitempty"`
}

func parseFP8Method(top map[string]json.RawMessage) (*FP8Config, error) {
	c := &FP8Config{}
	var err error
	if c.ActivationScheme, err = str(top, "activation_scheme", "dynamic"); err != nil {
		return nil, err
	}
	switch c.ActivationScheme {
	case "dynamic", "static":
	default:
		return nil, fmt.Errorf("activation_scheme %q: want dynamic or static", c.ActivationScheme)
	}
	// fmt names the element format; "e4m3" is the only one these
	// checkpoints use (transformers' FP8Linear is float8_e4m3fn).
	f, err := str(top, "fmt", "e4m3")
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(f) {
	case "e4m3", "float8_e4m3fn", "e4m3fn":
	default:
		return nil, fmt.Errorf("fmt %q is not supported (e4m3)", f)
	}
	// scale_fmt ue8m0 (DeepSeek-V3.1) rounds the F32 scales to powers of
	// two when quantizing; they decode the same.
	if sf, err := str(top, "scale_fmt", ""); err != nil {
		return nil, err
	} else if sf != "" && sf != "ue8m0" {
		return nil, fmt.Errorf("scale_fmt %q is not supported (ue8m0 or absent)", sf)
	}
	if v := top["weight_block_size"]; !isNull(v) {
		var bs []int
		if json.Unmarshal(v, &bs) != nil || len(bs) != 2 || bs[0] <= 0 || bs[1] <= 0 {
			return nil, fmt.Errorf("weight_block_size: want [rows, cols] of positive sizes, got %s", clip(v))
		}
		c.BlockSize = bs
		if c.ActivationScheme != "dynamic" {
			// transformers' FP8Linear quantizes its input dynamically
			// whatever the scheme says, vLLM refuses the combination.
			return nil, fmt.Errorf("activation_scheme %q with weight_block_size: block FP8 only has dynamic activations", c.ActivationScheme)
		}
	}
	for _, k := range []string{"modules_to_not_convert", "ignored_layers"} {
		if v := top[k]; !isNull(v) {
			var l []string
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, fmt.Errorf("%s: want a list of strings, got %s", k, clip(v))
			}
			c.NotConvert = append(c.NotConvert, l...)
		}
	}
	return c, nil
}

// openFP8Method opens an FP8 E4M3 weight of a quant_method "fp8"
// checkpoint: W = f32(e4m3(q) · s) with s the block's weight_scale_inv
// (block layout) or the per-tensor weight_scale (AutoFP8), multipliers
// stored as F32 (or BF16/F16), as transformers' Fp8Dequantize computes it. The input
// quantizer is the dynamic per-token-group FP8 of the block layout, or
// AutoFP8's static (input_scale) or dynamic per-tensor one.
func openFP8Method(t tensors, c *FP8Config) (*FP8, error) {
	w := &Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "tensor"}
	scale := "weight_scale"
	if c.BlockSize != nil {
		w.Strategy, w.BlockStructure = "block", c.BlockSize
		scale = "weight_scale_inv"
	} else if t.has("weight_scale_inv") {
		return nil, fmt.Errorf("module %s: has weight_scale_inv but quantization_config has no weight_block_size", t.module)
	}
	f, err := openFP8Scaled(t, w, scale, "F32", "BF16", "F16")
	if err != nil {
		return nil, err
	}
	// Fp8Dequantize multiplies in float32 whatever the scales' dtype
	// (Qwen3.5-*-FP8 store BF16 weight_scale_inv): the product is rounded
	// to F32, in which every stored scale is exact.
	f.ScaleDType = "F32"
	f.Name, f.Bytes = t.module, storedBytes(t.src, t.module)
	in := &Args{NumBits: 8, Type: "float", Symmetric: true, Dynamic: c.ActivationScheme == "dynamic", Strategy: "tensor"}
	if c.BlockSize != nil {
		in.Strategy, in.GroupSize = "group", c.BlockSize[1]
	}
	if f.Act, err = openAct(t, in, f.In); err != nil {
		return nil, err
	}
	f.Fmt += "+" + f.Act.describe()
	return f, nil
}

func fp8MethodFamily() family {
	return family{
		name:   "fp8",
		method: MethodFP8,
		parse: func(s *Scheme, top map[string]json.RawMessage) (err error) {
			if s.FP8, err = parseFP8Method(top); err != nil {
				return err
			}
			// AutoFP8 writes kv_cache_scheme "static" with per-tensor k/v scales.
			if s.KV, err = parseAutoFP8KV(top["kv_cache_scheme"], s.source, "kv_cache_scheme"); s.KV != nil {
				s.KV.Key = "quantization_config.kv_cache_scheme"
			}
			return err
		},
		markers: []string{"weight_scale_inv", "weight_scale"},
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			f, err := openFP8Method(t, s.FP8)
			if err != nil {
				return nil, err
			}
			return f, nil
		},
	}
}
