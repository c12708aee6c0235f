package quant

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MethodModelOpt is NVIDIA TensorRT Model Optimizer's export: quant_method
// "modelopt" in config.json, or hf_quant_config.json beside it
// (docs/formats/modelopt.md).
const MethodModelOpt = "modelopt"

// ModelOptConfig is a ModelOpt quantization config.
type ModelOptConfig struct {
	Algo           string   `json:"quant_algo"` // NVFP4 or FP8
	GroupSize      int      `json:"group_size,omitempty"`
	ExcludeModules []string `json:"exclude_modules,omitempty"` // informative: modules are opened by their tensors
	// KV is kv_cache_quant_algo FP8 (moved to Scheme.KV by the family's parse).
	KV *KVCache `json:"-"`
}

func parseModelOpt(top map[string]json.RawMessage) (*ModelOptConfig, error) {
	// hf_quant_config.json nests the settings under "quantization"
	// (beside "producer"); config.json's quantization_config has them at
	// the top.
	if v, ok := top["quantization"]; ok && !isNull(v) {
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(v, &inner); err != nil {
			return nil, fmt.Errorf("quantization: want an object, got %s", clip(v))
		}
		top = inner
	}
	c := &ModelOptConfig{}
	var err error
	if c.Algo, err = str(top, "quant_algo", ""); err != nil {
		return nil, err
	}
	switch strings.ToUpper(c.Algo) {
	case "NVFP4":
		c.Algo = "NVFP4"
		if c.GroupSize, err = integer(top, "group_size", 16); err != nil {
			return nil, err
		}
		if c.GroupSize != 16 {
			return nil, fmt.Errorf("quant_algo NVFP4 with group_size %d: want 16", c.GroupSize)
		}
	case "FP8":
		c.Algo = "FP8"
	case "":
		return nil, fmt.Errorf("quant_algo missing")
	default:
		return nil, fmt.Errorf("quant_algo %q is not evaluated by qppl yet (NVFP4, FP8); nothing was computed", c.Algo)
	}
	if c.KV, err = parseKVAlgo(top, "", "kv_cache_quant_algo"); err != nil {
		return nil, err
	}
	if v := top["exclude_modules"]; !isNull(v) {
		if err := json.Unmarshal(v, &c.ExcludeModules); err != nil {
			return nil, fmt.Errorf("exclude_modules: want a list of strings, got %s", clip(v))
		}
	}
	return c, nil
}

// openModelOpt opens a ModelOpt Linear as ModelOpt's own dequantize
// computes it (modelopt/torch/quantization/qtensor):
//
//	NVFP4 (nvfp4_tensor.py): weight U8 [out, in/2] (E2M1, low nibble
//	first), weight_scale F8_E4M3 [out, in/16], weight_scale_2 F32 (a
//	multiplier): W = rd_A(f32(e2m1 · f32(e4m3(s) · weight_scale_2))); inputs
//	NVFP4 with the global scale f32(1/input_scale), as vLLM serves them.
//	FP8 (fp8_tensor.py): weight F8_E4M3, weight_scale F32 (per tensor):
//	W = rd_A(e4m3(q) · rd_A(s)) (both cast to the model dtype A first);
//	inputs FP8 with the static per-tensor input_scale.
func openModelOpt(s *Scheme, t tensors, c *ModelOptConfig) (Linear, error) {
	if c.Algo == "NVFP4" {
		n, err := openNVFP4Tensors(t, s.ModelDType, "weight", "weight_scale_2")
		if err != nil {
			return nil, err
		}
		n.Scale2 = true
		n.Fmt = "modelopt-nvfp4"
		n.Name, n.Bytes = t.module, storedBytes(t.src, t.module)
		ti, err := t.get("input_scale", "F32")
		if err != nil {
			return nil, err
		}
		if numel(ti.Shape) != 1 {
			return nil, t.errf(ti, "shape %v, want [] or [1]", ti.Shape)
		}
		v, err := t.scales(ti)
		if err != nil {
			return nil, err
		}
		n.Act = &ActQuant{Kind: ActFP4, Bits: 4, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, Symmetric: true,
			GlobalScale: RoundF32(1 / v[0])}
		n.Fmt += "+" + n.Act.describe()
		return n, nil
	}
	w := &Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "tensor"}
	f, err := openFP8Scaled(t, w, "weight_scale", "F32")
	if err != nil {
		return nil, err
	}
	// FP8QTensor.dequantize: q.to(A) * scale.to(A)
	f.ScaleDType = s.ModelDType
	for i := range f.Scale {
		f.Scale[i] = RoundDType(s.ModelDType, f.Scale[i])
		if f.Scale[i] == 0 {
			ti, _ := t.get("weight_scale")
			return nil, t.errf(ti, "scale %v rounds to 0 in %s", f.Scale[i], s.ModelDType)
		}
	}
	f.Fmt = "modelopt-fp8"
	f.Name, f.Bytes = t.module, storedBytes(t.src, t.module)
	in := &Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "tensor"}
	if f.Act, err = openAct(t, in, f.In); err != nil {
		return nil, err
	}
	f.Fmt += "+" + f.Act.describe()
	return f, nil
}

// hasModelOptKeys reports hf_quant_config.json's layout: a "quantization"
// object (and ModelOpt as the producer when one is named).
func hasModelOptKeys(top map[string]json.RawMessage) bool {
	if _, ok := top["quantization"]; !ok {
		return false
	}
	var p struct {
		Name string `json:"name"`
	}
	if v, ok := top["producer"]; ok && json.Unmarshal(v, &p) == nil && p.Name != "" {
		return strings.EqualFold(p.Name, "modelopt")
	}
	return true
}

func modelOptFamily() family {
	return family{
		name:   "modelopt",
		method: MethodModelOpt,
		parse: func(s *Scheme, top map[string]json.RawMessage) (err error) {
			if s.ModelOpt, err = parseModelOpt(top); err != nil {
				return err
			}
			if kv := s.ModelOpt.KV; kv != nil {
				// hf_quant_config.json nests it under "quantization".
				kv.File, kv.Key = s.source, "quantization.kv_cache_quant_algo"
				if s.source == "config.json" || strings.HasSuffix(s.source, "/config.json") {
					kv.Key = "quantization_config.kv_cache_quant_algo"
				}
				s.KV = kv
			}
			return nil
		},
		markers:   []string{"weight_scale_2", "weight_scale"},
		sideFiles: []string{"hf_quant_config.json"},
		claims:    hasModelOptKeys,
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			return openModelOpt(s, t, s.ModelOpt)
		},
	}
}
