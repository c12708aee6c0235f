package quant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// KVCache is a checkpoint's quantized KV cache (docs/formats/kv-cache.md):
// keys (after RoPE, and after the k-norm of architectures that have one)
// and values (as projected) are stored in the serving engine's cache as FP8
// E4M3 with static scales read from the checkpoint, per tensor or per
// key/value head, and read back multiplied by their scale. The query is not
// quantized.
type KVCache struct {
	// PerHead: one scale per key/value head (compressed-tensors strategy
	// "attn_head"); otherwise one per layer.
	PerHead bool `json:"per_head,omitempty"`
	// File and Key name where the checkpoint declares it, e.g.
	// "config.json", "quantization_config.kv_cache_scheme".
	File string `json:"file"`
	Key  string `json:"key"`
}

// Describe is a short description for tables and JSON, e.g.
// "fp8-e4m3 per-tensor static (config.json quantization_config.kv_cache_scheme)".
func (c *KVCache) Describe() string {
	g := "per-tensor"
	if c.PerHead {
		g = "per-head"
	}
	return fmt.Sprintf("fp8-e4m3 %s static (%s %s)", g, c.File, c.Key)
}

// KV cache quantization modes of the backends' options (--kv-cache-quant).
const (
	KVQuantAuto = ""    // on when the checkpoint declares a KV cache scheme
	KVQuantOn   = "on"  // the checkpoint must declare one
	KVQuantOff  = "off" // weights alone: the scales are read (and checked) but not applied
)

// KVQuantEnabled resolves a --kv-cache-quant mode against the scheme: it
// reports whether the KV cache is fake-quantized, and refuses "on" for a
// checkpoint without a KV cache scheme and unknown modes.
func (s *Scheme) KVQuantEnabled(mode string) (bool, error) {
	switch mode {
	case KVQuantAuto:
		return s.KV != nil, nil
	case KVQuantOn:
		if s.KV == nil {
			return false, fmt.Errorf("--kv-cache-quant on: %s declares no quantized KV cache (no kv_cache_scheme / kv_cache_quant_algo)", s.source)
		}
		return true, nil
	case KVQuantOff:
		return false, nil
	}
	return false, fmt.Errorf("--kv-cache-quant %q: want on or off", mode)
}

// parseKVScheme parses compressed-tensors' kv_cache_scheme, a
// QuantizationArgs object (nil when null). Only what vLLM serves
// (CompressedTensorsKVCacheMethod.validate_kv_cache_scheme) and qppl
// emulates is accepted: num_bits 8, type float, symmetric, static,
// strategy tensor or attn_head.
func parseKVScheme(raw json.RawMessage, file, key string) (*KVCache, error) {
	if isNull(raw) {
		return nil, nil
	}
	refuse := func(what string) error {
		return fmt.Errorf("%s: a %s KV cache is not evaluated by qppl (FP8 E4M3, static, per tensor or attn_head only); nothing was computed", key, what)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: want an object, got %s", key, clip(raw))
	}
	c := &KVCache{File: file, Key: key}
	// attn_head is a KV-cache-only strategy: parse the rest as a
	// per-tensor activation and remember it.
	if st, _ := str(m, "strategy", ""); st == "attn_head" {
		c.PerHead = true
		m["strategy"] = json.RawMessage(`"tensor"`)
	}
	fixed, _ := json.Marshal(m)
	a, err := parseArgs(fixed, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	switch {
	case a.Type != "float" || a.NumBits != 8:
		return nil, refuse(fmt.Sprintf("%s %d-bit", a.Type, a.NumBits))
	case a.Dynamic:
		return nil, refuse("dynamic")
	case a.Strategy != "tensor":
		return nil, refuse("strategy " + a.Strategy)
	case a.GroupSize != 0:
		return nil, refuse(fmt.Sprintf("group_size %d", a.GroupSize))
	}
	if v := m["output_activations"]; !isNull(v) {
		return nil, refuse("output_activations")
	}
	return c, nil
}

// parseKVAlgo parses ModelOpt's kv_cache_quant_algo: "FP8" (per-tensor
// k_scale/v_scale) is emulated, null/"none" is no KV quantization, others
// (NVFP4, INT8) are refused.
func parseKVAlgo(top map[string]json.RawMessage, file, key string) (*KVCache, error) {
	kv, err := str(top, "kv_cache_quant_algo", "")
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(kv) {
	case "", "NONE":
		return nil, nil
	case "FP8":
		return &KVCache{File: file, Key: key}, nil
	}
	return nil, fmt.Errorf("%s %q: this KV cache format is not evaluated by qppl (FP8 only); nothing was computed", key, kv)
}

// parseAutoFP8KV parses quant_method fp8's kv_cache_scheme: AutoFP8 writes
// "static" with per-tensor k/v scales.
func parseAutoFP8KV(raw json.RawMessage, file, key string) (*KVCache, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(bytes.TrimSpace(raw), &s) == nil && strings.EqualFold(s, "static") {
		return &KVCache{File: file, Key: key}, nil
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return parseKVScheme(raw, file, key)
	}
	return nil, fmt.Errorf("%s %s: this KV cache scheme is not evaluated by qppl (\"static\" FP8 only); nothing was computed", key, clip(raw))
}

// KVScales are one attention layer's cache scales: K and V hold one value
// (per tensor) or one per key/value head, as stored (F32, BF16 or F16
// values are exact in float64). KName and VName are the tensors read.
type KVScales struct {
	K, V         []float64
	KName, VName string
}

// kvScaleNames lists, for an attention module prefix (e.g.
// "model.layers.0.self_attn"), the tensor names writers use for its cache
// scales, in vLLM's remapping order (maybe_remap_kv_scale_name,
// CompressedTensorsConfig.get_cache_scale): compressed-tensors /
// llm-compressor (self_attn.k_scale), ModelOpt and AutoFP8
// (k_proj.k_scale), older compressed-tensors (k_proj.output_scale). The
// deprecated single self_attn.kv_scale is handled by OpenScales.
func kvScaleNames(attn string) [][2]string {
	return [][2]string{
		{attn + ".k_scale", attn + ".v_scale"},
		{attn + ".k_proj.k_scale", attn + ".v_proj.v_scale"},
		{attn + ".k_proj.output_scale", attn + ".v_proj.output_scale"},
	}
}

// OpenScales reads the cache scales of attention module attn (e.g.
// "model.layers.0.self_attn") with kvHeads key/value heads. Exactly one
// naming must be present; a lone kv_scale (deprecated) serves both K and V,
// as vLLM duplicates it. Every value must be finite and > 0.
func (c *KVCache) OpenScales(src Source, attn string, kvHeads int) (*KVScales, error) {
	var found [][2]string
	for _, p := range kvScaleNames(attn) {
		_, hk := src.Tensor(p[0])
		_, hv := src.Tensor(p[1])
		switch {
		case hk && hv:
			found = append(found, p)
		case hk || hv:
			return nil, fmt.Errorf("%s: %s has only one of %s and %s", c.File, attn, p[0], p[1])
		}
	}
	if _, ok := src.Tensor(attn + ".kv_scale"); ok {
		found = append(found, [2]string{attn + ".kv_scale", attn + ".kv_scale"})
	}
	switch len(found) {
	case 0:
		n := kvScaleNames(attn)[0]
		return nil, fmt.Errorf("%s declares a quantized KV cache (%s) but the checkpoint has no cache scales for %s (looked for %s/%s, k_proj.k_scale/v_proj.v_scale, k_proj.output_scale/v_proj.output_scale, kv_scale)",
			c.File, c.Key, attn, n[0], n[1])
	case 1:
	default:
		return nil, fmt.Errorf("%s: %s has KV cache scales under two namings (%s and %s)", c.File, attn, found[0][0], found[1][0])
	}
	want := 1
	if c.PerHead {
		want = kvHeads
	}
	read := func(name string) ([]float64, error) {
		t := tensors{src, attn}
		ti, _ := src.Tensor(name)
		switch string(ti.DType) {
		case "F32", "BF16", "F16":
		default:
			return nil, t.errf(ti, "dtype %s, want F32, BF16 or F16", ti.DType)
		}
		if n := numel(ti.Shape); n != int64(want) {
			g := "one value (per-tensor scheme)"
			if c.PerHead {
				g = fmt.Sprintf("%d values (one per key/value head, strategy attn_head)", kvHeads)
			}
			return nil, t.errf(ti, "shape %v, want %s", ti.Shape, g)
		}
		return t.scales(ti)
	}
	s := &KVScales{KName: found[0][0], VName: found[0][1]}
	var err error
	if s.K, err = read(s.KName); err != nil {
		return nil, err
	}
	if s.V, err = read(s.VName); err != nil {
		return nil, err
	}
	return s, nil
}

// FakeQuantKV rounds x [T][heads][D] (keys or values of one layer) through
// an FP8 E4M3 cache with per-tensor (len(scale) == 1) or per-head scales,
// in float64: x = E4M3_RNE(clamp(x / s, ±448)) · s, one division and one
// multiplication per element (vLLM's reshape_and_cache_flash write and
// its dequantizing read, docs/formats/kv-cache.md).
func FakeQuantKV(x []float64, scale []float64, T, heads, D int) {
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			s := scale[0]
			if len(scale) > 1 {
				s = scale[h]
			}
			row := x[(t*heads+h)*D : (t*heads+h+1)*D]
			for i, v := range row {
				y := v / s
				if math.IsNaN(y) {
					continue // NaN stays NaN (E4M3 has a NaN); the backend fails on it later
				}
				row[i] = RoundE4M3(clamp(y, -E4M3Max, E4M3Max)) * s
			}
		}
	}
}
