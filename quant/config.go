package quant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// Quantization methods (quant_method) a Scheme can have.
const (
	MethodDense = "dense"
	MethodCT    = "compressed-tensors"
	MethodGPTQ  = "gptq"
	MethodAWQ   = "awq"
)

// compressed-tensors formats (formats.md section 1).
const (
	FormatDense          = "dense"
	FormatIntQuantized   = "int-quantized"
	FormatFloatQuantized = "float-quantized"
	FormatNaiveQuantized = "naive-quantized"
	FormatPackQuantized  = "pack-quantized"
	FormatMixed          = "mixed-precision"
	FormatNVFP4          = "nvfp4-pack-quantized"
	FormatMXFP4          = "mxfp4-pack-quantized"
)

// Args is compressed-tensors' QuantizationArgs, normalized: the strategy is
// inferred when null, actorder aliases are resolved, block_structure is
// parsed. observer and observer_kwargs are ignored.
type Args struct {
	NumBits        int    `json:"num_bits"`
	Type           string `json:"type"` // "int" or "float"
	Symmetric      bool   `json:"symmetric"`
	GroupSize      int    `json:"group_size"` // 0 when absent, -1 = channel
	Strategy       string `json:"strategy"`   // tensor|channel|group|block|token|tensor_group
	BlockStructure []int  `json:"block_structure,omitempty"`
	Dynamic        bool   `json:"dynamic"`
	DynamicLocal   bool   `json:"dynamic_local,omitempty"` // dynamic: "local"
	ActOrder       string `json:"actorder,omitempty"`      // "", "group", "weight"
	ScaleDType     string `json:"scale_dtype,omitempty"`
	ZPDType        string `json:"zp_dtype,omitempty"`
}

// Group is one entry of config_groups with its effective format.
type Group struct {
	Name    string   `json:"name"`
	Targets []string `json:"targets"`
	Weights *Args    `json:"weights,omitempty"`
	Input   *Args    `json:"input_activations,omitempty"`
	Format  string   `json:"format"` // group format ?? top-level format
	// targets split by kind, for matching
	exact   map[string]bool
	regexes []*pyRegex
	classes []string
}

type Scheme struct {
	Method string `json:"method"`
	// compressed-tensors
	Format string   `json:"format,omitempty"` // top-level format
	Groups []*Group `json:"groups,omitempty"`
	Ignore []string `json:"ignore,omitempty"`
	Status string   `json:"quantization_status,omitempty"`
	// GPTQ / AWQ
	GPTQ *GPTQConfig `json:"gptq,omitempty"`
	AWQ  *AWQConfig  `json:"awq,omitempty"`
	FP8  *FP8Config  `json:"fp8,omitempty"` // quant_method fp8
	// ModelOpt is a quant_method modelopt / hf_quant_config.json config.
	ModelOpt *ModelOptConfig `json:"modelopt,omitempty"`
	// KV is the checkpoint's quantized KV cache (kv_cache_scheme,
	// kv_cache_quant_algo), nil when the cache is not quantized.
	KV *KVCache `json:"kv_cache,omitempty"`
	// BNB is a quant_method bitsandbytes config (bnb.go).
	BNB *BNBConfig `json:"bitsandbytes,omitempty"`
	// AutoRound is a quant_method auto-round config (autoround.go); its
	// GPTQ or AWQ settings are in GPTQ / AWQ.
	AutoRound *AutoRoundConfig `json:"auto_round,omitempty"`
	// ModelDType is the dtype decoders round NVFP4 outputs to (from
	// torch_dtype; BF16 when absent).
	ModelDType string `json:"model_dtype"`

	ignoreExact   map[string]bool
	ignoreRegexes []*pyRegex
	ignoreClasses []string
	source        string // name for error messages
}

// Parse reads cfg.QuantizationConfig or, when config.json has none, the
// quantization settings file beside it (cfg.QuantizationFiles, in the order
// of checkpoint.QuantizationSideFiles); neither gives the dense scheme.
func Parse(cfg *checkpoint.Config) (*Scheme, error) {
	if cfg == nil {
		return ParseJSON(nil, "", "config.json")
	}
	if cfg.QuantizationConfig == nil && len(cfg.QuantizationFiles) > 0 {
		return parseSideFile(cfg)
	}
	return ParseJSON(cfg.QuantizationConfig, cfg.TorchDtype, "config.json")
}

// parseSideFile parses the first quantization settings file present, with
// the family its quant_method names or, without one, the family that
// claims the file (docs/formats/side-configs.md).
func parseSideFile(cfg *checkpoint.Config) (*Scheme, error) {
	for _, name := range checkpoint.QuantizationSideFiles() {
		raw, ok := cfg.QuantizationFiles[name]
		if !ok {
			continue
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, fmt.Errorf("%s: not a JSON object: %v", name, err)
		}
		method, err := str(top, "quant_method", "")
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		var f family
		found := false
		if method != "" {
			if f, found = methodFamily(strings.ToLower(method)); !found {
				return nil, fmt.Errorf("%s: unsupported quant_method %q (supported here: %s)", name, method, strings.Join(sideMethods(name), ", "))
			}
		} else {
			for _, fam := range families() {
				if slices.Contains(fam.sideFiles, name) && (fam.claims == nil || fam.claims(top)) {
					f, found = fam, true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("%s: no quant_method, and its keys fit no format that writes this file (%s)", name, strings.Join(sideMethods(name), ", "))
			}
		}
		s := &Scheme{Method: f.method, ModelDType: modelDType(cfg.TorchDtype), source: name}
		if err := f.parse(s, top); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		return s, nil
	}
	return ParseJSON(nil, cfg.TorchDtype, "config.json")
}

// sideMethods lists the quant_method of the families that write file.
func sideMethods(file string) []string {
	var m []string
	for _, f := range families() {
		if slices.Contains(f.sideFiles, file) {
			m = append(m, f.method)
		}
	}
	return m
}

// ParseJSON parses a raw quantization_config object (nil or "null" gives the
// dense scheme). torchDType is config.json's torch_dtype; name is used in
// error messages (e.g. the config.json path).
func ParseJSON(raw []byte, torchDType, name string) (*Scheme, error) {
	if name == "" {
		name = "config.json"
	}
	s := &Scheme{Method: MethodDense, ModelDType: modelDType(torchDType), source: name}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	fail := func(f string, a ...any) error {
		return fmt.Errorf("%s: quantization_config: %s", name, fmt.Sprintf(f, a...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fail("not a JSON object: %v", err)
	}
	method, err := str(top, "quant_method", "")
	if err != nil {
		return nil, fail("%v", err)
	}
	m := strings.ToLower(method)
	switch {
	case m == MethodCT || m == "sparseml":
		s.Method = MethodCT
		if err := s.parseCT(top); err != nil {
			return nil, fail("%v", err)
		}
	case m == "":
		return nil, fail("quant_method missing")
	default:
		f, ok := methodFamily(m)
		if !ok {
			return nil, fail("unsupported quant_method %q (supported: %s)", method, strings.Join(supportedMethods(), ", "))
		}
		s.Method = f.method
		if err := f.parse(s, top); err != nil {
			return nil, fail("%v", err)
		}
	}
	return s, nil
}

func modelDType(t string) string {
	switch t {
	case "float16", "torch.float16", "half":
		return "F16"
	case "float32", "torch.float32", "float":
		return "F32"
	}
	return "BF16"
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// isEmptyObject reports null, {} or an object whose values are all null.
func isEmptyObject(v json.RawMessage) bool {
	if isNull(v) {
		return true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return false
	}
	for _, x := range m {
		if !isNull(x) {
			return false
		}
	}
	return true
}

func str(m map[string]json.RawMessage, key, def string) (string, error) {
	v, ok := m[key]
	if !ok || isNull(v) {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s: want a string, got %s", key, clip(v))
	}
	return s, nil
}

func integer(m map[string]json.RawMessage, key string, def int) (int, error) {
	v, ok := m[key]
	if !ok || isNull(v) {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != float64(int(f)) || f > 1<<30 || f < -(1<<30) {
		return 0, fmt.Errorf("%s: want an integer, got %s", key, clip(v))
	}
	return int(f), nil
}

func boolean(m map[string]json.RawMessage, key string, def bool) (bool, error) {
	v, ok := m[key]
	if !ok || isNull(v) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, fmt.Errorf("%s: want true or false, got %s", key, clip(v))
	}
	return b, nil
}

func clip(v json.RawMessage) string {
	s := string(v)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func (s *Scheme) parseCT(top map[string]json.RawMessage) error {
	if v, ok := top["compression_config"]; ok && !isNull(v) {
		// Some writers nest the whole config under compression_config.
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(v, &inner); err == nil {
			for k, x := range inner {
				if _, dup := top[k]; !dup {
					top[k] = x
				}
			}
		}
	}
	if v := top["transform_config"]; !isEmptyObject(v) {
		return fmt.Errorf("non-empty transform_config (online Hadamard rotations, SpinQuant/QuIP-style) is not evaluated by qppl yet; nothing was computed")
	}
	if v := top["sparsity_config"]; !isEmptyObject(v) {
		var sp map[string]json.RawMessage
		_ = json.Unmarshal(v, &sp)
		f, _ := str(sp, "format", "")
		if f != "dense" {
			return fmt.Errorf("sparsity_config: sparse formats are not supported (format %q, e.g. 2:4 sparsity): qppl does not evaluate them yet; nothing was computed", f)
		}
	}
	var err error
	if s.KV, err = parseKVScheme(top["kv_cache_scheme"], s.source, "kv_cache_scheme"); err != nil {
		return err
	} else if s.KV != nil {
		s.KV.Key = "quantization_config.kv_cache_scheme"
	}
	if s.Format, err = str(top, "format", "fakequant"); err != nil {
		return err
	}
	if err := checkFormat(s.Format, true); err != nil {
		return err
	}
	if s.Status, err = str(top, "quantization_status", ""); err != nil {
		return err
	}
	if s.Format == "fakequant" && s.Status != "compressed" {
		s.Format = FormatDense // fake-quant weights stored dense
	}
	var ignore []string
	if v, ok := top["ignore"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &ignore); err != nil {
			return fmt.Errorf("ignore: want a list of strings, got %s", clip(v))
		}
	}
	s.Ignore = ignore
	if s.ignoreExact, s.ignoreRegexes, s.ignoreClasses, err = splitTargets(ignore); err != nil {
		return fmt.Errorf("ignore: %w", err)
	}
	var groups map[string]json.RawMessage
	if v, ok := top["config_groups"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &groups); err != nil {
			return fmt.Errorf("config_groups: want an object, got %s", clip(v))
		}
	}
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names) // writers use sort_keys=True: file order == sorted order
	for _, n := range names {
		g, err := parseGroup(n, groups[n], s.Format)
		if err != nil {
			return fmt.Errorf("config_groups.%s: %w", n, err)
		}
		s.Groups = append(s.Groups, g)
	}
	return nil
}

func checkFormat(f string, top bool) error {
	switch f {
	case "fakequant":
		if top {
			return nil
		}
	case FormatMixed:
		if top {
			return nil
		}
		return fmt.Errorf("a group's format may not be %q", f)
	case "sparse-bitmask", "sparse-24-bitmask", "marlin-24":
		return fmt.Errorf("sparse format %q is not supported", f)
	case "mxfp8-quantized":
		return fmt.Errorf("format %q is not supported", f)
	default:
		if ctFormatKnown(f) {
			return nil
		}
	}
	return fmt.Errorf("unknown format %q", f)
}

// supportedMethods lists the quant_method values ParseJSON accepts.
func supportedMethods() []string {
	m := []string{MethodCT}
	for _, f := range families() {
		if f.method != "" {
			m = append(m, f.method)
		}
	}
	return m
}

func splitTargets(list []string) (exact map[string]bool, res []*pyRegex, classes []string, err error) {
	exact = map[string]bool{}
	for _, t := range list {
		switch {
		case strings.HasPrefix(t, "re:"):
			// Python re.match: anchored at the start only (pyregex.go).
			re, e := compilePyRegex(t[3:])
			if e != nil {
				return nil, nil, nil, fmt.Errorf("regex %q: %v", t, e)
			}
			res = append(res, re)
		case t != "" && !strings.Contains(t, ".") && t[0] >= 'A' && t[0] <= 'Z':
			classes = append(classes, t)
		default:
			exact[t] = true
		}
	}
	return exact, res, classes, nil
}

// presets are compressed-tensors' PRESET_SCHEMES used as config_groups keys.
func preset(name string) (w, in *Args, ok bool) {
	intW := func(bits, gs int, sym bool) *Args {
		a := &Args{NumBits: bits, Type: "int", Symmetric: sym, GroupSize: gs, Strategy: "group"}
		if gs == -1 {
			a.Strategy = "channel"
		}
		return a
	}
	switch strings.ToUpper(name) {
	case "W8A16":
		return intW(8, -1, true), nil, true
	case "W4A16":
		return intW(4, 128, true), nil, true
	case "W4A16_ASYM":
		return intW(4, 128, false), nil, true
	case "W8A8", "INT8":
		return intW(8, -1, true), &Args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "token", Dynamic: true}, true
	case "W4A8":
		return intW(4, 128, true), &Args{NumBits: 8, Type: "int", Symmetric: true, Strategy: "token", Dynamic: true}, true
	case "FP8":
		return &Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "tensor"},
			&Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "tensor"}, true
	case "FP8_DYNAMIC":
		return &Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "channel", GroupSize: -1},
			&Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "token", Dynamic: true}, true
	case "FP8_BLOCK":
		return &Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "block", BlockStructure: []int{128, 128}},
			&Args{NumBits: 8, Type: "float", Symmetric: true, Strategy: "group", GroupSize: 128, Dynamic: true}, true
	case "NVFP4A16":
		return &Args{NumBits: 4, Type: "float", Symmetric: true, Strategy: "tensor_group", GroupSize: 16, ScaleDType: "torch.float8_e4m3fn"}, nil, true
	case "NVFP4":
		return &Args{NumBits: 4, Type: "float", Symmetric: true, Strategy: "tensor_group", GroupSize: 16, ScaleDType: "torch.float8_e4m3fn"},
			&Args{NumBits: 4, Type: "float", Symmetric: true, Strategy: "tensor_group", GroupSize: 16, Dynamic: true, DynamicLocal: true, ScaleDType: "torch.float8_e4m3fn"}, true
	case "MXFP4A16":
		return &Args{NumBits: 4, Type: "float", Symmetric: true, Strategy: "group", GroupSize: 32, ScaleDType: "torch.uint8"}, nil, true
	case "MXFP4":
		return &Args{NumBits: 4, Type: "float", Symmetric: true, Strategy: "group", GroupSize: 32, ScaleDType: "torch.uint8"},
			&Args{NumBits: 4, Type: "float", Symmetric: true, Strategy: "group", GroupSize: 32, Dynamic: true, ScaleDType: "torch.uint8"}, true
	}
	return nil, nil, false
}

func parseGroup(name string, raw json.RawMessage, topFormat string) (*Group, error) {
	g := &Group{Name: name}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		// preset name → target list
		if err := json.Unmarshal(raw, &g.Targets); err != nil {
			return nil, fmt.Errorf("preset target list: %v", err)
		}
		w, in, ok := preset(name)
		if !ok {
			return nil, fmt.Errorf("unknown preset scheme %q", name)
		}
		g.Weights, g.Input = w, in
	} else {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("want an object or a preset target list, got %s", clip(raw))
		}
		if v, ok := m["targets"]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &g.Targets); err != nil {
				return nil, fmt.Errorf("targets: want a list of strings, got %s", clip(v))
			}
		}
		var err error
		if g.Weights, err = parseArgs(m["weights"], false); err != nil {
			return nil, fmt.Errorf("weights: %w", err)
		}
		if g.Input, err = parseArgs(m["input_activations"], true); err != nil {
			return nil, fmt.Errorf("input_activations: %w", err)
		}
		if a, err := parseArgs(m["output_activations"], true); err != nil || a != nil {
			return nil, fmt.Errorf("output_activations are not supported")
		}
		f, err := str(m, "format", "")
		if err != nil {
			return nil, err
		}
		if f != "" {
			if err := checkFormat(f, false); err != nil {
				return nil, err
			}
			g.Format = f
		}
	}
	if g.Format == "" {
		g.Format = topFormat
	}
	if g.Format == FormatMixed {
		return nil, fmt.Errorf("top-level format is mixed-precision but the group has no format")
	}
	if g.Format == "fakequant" {
		g.Format = FormatDense
	}
	var err error
	if g.exact, g.regexes, g.classes, err = splitTargets(g.Targets); err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	if g.Weights != nil {
		if err := checkWeightArgs(g.Weights, g.Format); err != nil {
			return nil, fmt.Errorf("weights: %w", err)
		}
	}
	if g.Input != nil {
		if err := checkInputArgs(g.Input); err != nil {
			return nil, fmt.Errorf("input_activations: %w", err)
		}
	}
	return g, nil
}

func parseArgs(raw json.RawMessage, act bool) (*Args, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("want an object, got %s", clip(raw))
	}
	a := &Args{}
	var err error
	if a.NumBits, err = integer(m, "num_bits", 8); err != nil {
		return nil, err
	}
	if a.Type, err = str(m, "type", "int"); err != nil {
		return nil, err
	}
	if a.Symmetric, err = boolean(m, "symmetric", true); err != nil {
		return nil, err
	}
	hasGS := m["group_size"] != nil && !isNull(m["group_size"])
	if a.GroupSize, err = integer(m, "group_size", 0); err != nil {
		return nil, err
	}
	if a.Strategy, err = str(m, "strategy", ""); err != nil {
		return nil, err
	}
	if v := m["block_structure"]; !isNull(v) {
		var bs []int
		if json.Unmarshal(v, &bs) != nil {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, fmt.Errorf("block_structure: want [rows, cols] or \"RxC\", got %s", clip(v))
			}
			parts := strings.Split(s, "x")
			if len(parts) != 2 {
				return nil, fmt.Errorf("block_structure: want \"RxC\", got %q", s)
			}
			for _, p := range parts {
				n, e := strconv.Atoi(p)
				if e != nil {
					return nil, fmt.Errorf("block_structure: want \"RxC\", got %q", s)
				}
				bs = append(bs, n)
			}
		}
		if len(bs) != 2 || bs[0] <= 0 || bs[1] <= 0 {
			return nil, fmt.Errorf("block_structure: want two positive sizes, got %s", clip(v))
		}
		a.BlockStructure = bs
	}
	if v := m["dynamic"]; !isNull(v) {
		var b bool
		var s string
		switch {
		case json.Unmarshal(v, &b) == nil:
			a.Dynamic = b
		case json.Unmarshal(v, &s) == nil && s == "local":
			a.Dynamic, a.DynamicLocal = true, true
		default:
			return nil, fmt.Errorf("dynamic: want true, false or \"local\", got %s", clip(v))
		}
	}
	if v := m["actorder"]; !isNull(v) {
		var b bool
		var s string
		switch {
		case json.Unmarshal(v, &b) == nil:
			if b {
				a.ActOrder = "group"
			}
		case json.Unmarshal(v, &s) == nil:
			switch s {
			case "group", "dynamic":
				a.ActOrder = "group"
			case "weight", "static":
				a.ActOrder = "weight"
			default:
				return nil, fmt.Errorf("actorder: unknown value %q", s)
			}
		default:
			return nil, fmt.Errorf("actorder: want a string or bool, got %s", clip(v))
		}
	}
	if a.ScaleDType, err = str(m, "scale_dtype", ""); err != nil {
		return nil, err
	}
	if a.ZPDType, err = str(m, "zp_dtype", ""); err != nil {
		return nil, err
	}
	if a.Strategy == "" {
		switch {
		case a.BlockStructure != nil:
			a.Strategy = "block"
		case !hasGS:
			if act && a.Dynamic {
				a.Strategy = "token"
			} else {
				a.Strategy = "tensor"
			}
		case a.GroupSize > 0:
			a.Strategy = "group"
		case a.GroupSize == -1:
			a.Strategy = "channel"
		default:
			return nil, fmt.Errorf("group_size %d: want a positive size or -1", a.GroupSize)
		}
	}
	switch a.Strategy {
	case "tensor", "channel", "token", "block":
	case "group", "tensor_group":
		if a.GroupSize <= 0 {
			return nil, fmt.Errorf("strategy %s needs a positive group_size, got %d", a.Strategy, a.GroupSize)
		}
	case "attn_head":
		return nil, fmt.Errorf("strategy attn_head is not supported")
	default:
		return nil, fmt.Errorf("unknown strategy %q", a.Strategy)
	}
	if a.Strategy == "block" && a.BlockStructure == nil {
		return nil, fmt.Errorf("strategy block needs block_structure")
	}
	switch a.Type {
	case "int":
		if a.NumBits < 1 || a.NumBits > 8 {
			return nil, fmt.Errorf("int num_bits %d: want 1..8", a.NumBits)
		}
	case "float":
		if a.NumBits != 4 && a.NumBits != 8 {
			return nil, fmt.Errorf("float num_bits %d: want 4 or 8", a.NumBits)
		}
		if !a.Symmetric {
			return nil, fmt.Errorf("asymmetric float quantization is not supported")
		}
	default:
		return nil, fmt.Errorf("unknown type %q", a.Type)
	}
	if a.DynamicLocal && a.Strategy != "tensor_group" {
		return nil, fmt.Errorf("dynamic \"local\" is only allowed with strategy tensor_group")
	}
	if a.ActOrder == "group" && a.Strategy != "group" && a.Strategy != "tensor_group" {
		return nil, fmt.Errorf("actorder group needs strategy group")
	}
	return a, nil
}

// checkInputArgs applies formats.md §8.8 item 6 (MX inputs: mxfp4.go).
func checkInputArgs(a *Args) error {
	if isMX(a) {
		return checkMXInputArgs(a)
	}
	if a.Type == "float" && a.NumBits == 4 && (a.Strategy != "tensor_group" || a.GroupSize != 16) {
		return fmt.Errorf("fp4 activations need strategy tensor_group with group_size 16")
	}
	if !a.Dynamic && (a.Strategy == "group" || a.Strategy == "tensor_group" || a.Strategy == "channel" || a.Strategy == "token") {
		return fmt.Errorf("static %s activation scales are not supported", a.Strategy)
	}
	if a.Strategy == "block" || a.Strategy == "channel" {
		return fmt.Errorf("activation strategy %s is not supported", a.Strategy)
	}
	if a.Type == "float" && a.NumBits == 4 && !a.DynamicLocal {
		return fmt.Errorf("fp4 activations need dynamic \"local\"")
	}
	return nil
}

// groupFor returns the config group that targets module (a Linear), or nil
// when none does or the module is ignored. Priority: exact name, regex,
// class name; ties go to the first group in sorted name order.
func (s *Scheme) groupFor(module string) *Group {
	if s.ignoreExact[module] || anyMatch(s.ignoreRegexes, module) || matchesClass(s.ignoreClasses) {
		return nil
	}
	for _, g := range s.Groups {
		if g.exact[module] {
			return g
		}
	}
	for _, g := range s.Groups {
		if anyMatch(g.regexes, module) {
			return g
		}
	}
	for _, g := range s.Groups {
		if matchesClass(g.classes) {
			return g
		}
	}
	return nil
}

func anyMatch(res []*pyRegex, s string) bool {
	for _, re := range res {
		if re.match(s) {
			return true
		}
	}
	return false
}

// matchesClass reports whether a class-name target matches a Linear module
// (the loader only asks about Linears: "Linear" and names ending in it).
func matchesClass(classes []string) bool {
	for _, c := range classes {
		if strings.HasSuffix(c, "Linear") {
			return true
		}
	}
	return false
}
