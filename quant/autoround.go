package quant

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// MethodAutoRound is Intel AutoRound's own export (quant_method
// "auto-round", older "intel/auto-round"); docs/formats/autoround.md.
const MethodAutoRound = "auto-round"

// AutoRoundConfig is an auto-round config. Its weights are stored in one of
// three layouts, chosen by packing_format (older exports: backend):
// auto_round:auto_gptq (GPTQ, zero points stored minus one),
// auto_round:auto_awq (AWQ GEMM) and the native auto_round /
// auto_round:gptqmodel (GPTQ's layout with the zero points as they are).
type AutoRoundConfig struct {
	PackingFormat string `json:"packing_format"`
	Layout        string `json:"layout"` // "gptq", "gptq-native" or "awq"
	Bits          int    `json:"bits"`
	GroupSize     int    `json:"group_size"`
	Sym           bool   `json:"sym"`
}

func parseAutoRound(s *Scheme, top map[string]json.RawMessage) error {
	c := &AutoRoundConfig{}
	var err error
	if c.PackingFormat, err = str(top, "packing_format", ""); err != nil {
		return err
	}
	if c.PackingFormat == "" {
		if c.PackingFormat, err = str(top, "backend", "auto_round:auto_gptq"); err != nil {
			return err
		}
	}
	pf := strings.ToLower(c.PackingFormat)
	switch {
	case strings.Contains(pf, "awq"):
		c.Layout = "awq"
	case strings.Contains(pf, "gptqmodel"):
		c.Layout = "gptq-native"
	case strings.Contains(pf, "gptq"):
		c.Layout = "gptq"
	case pf == "auto_round" || nativeKernel(pf):
		c.Layout = "gptq-native"
	default:
		return fmt.Errorf("auto-round packing_format %q is not evaluated by qppl yet (auto_round and its kernel-named variants such as auto_round:exllamav2, auto_round:auto_gptq, auto_round:gptqmodel, auto_round:auto_awq); nothing was computed", c.PackingFormat)
	}
	dt, err := str(top, "data_type", "int")
	if err != nil {
		return err
	}
	if dt != "int" {
		return fmt.Errorf("auto-round data_type %q is not evaluated by qppl yet (int only); nothing was computed", dt)
	}
	if ab, err := integer(top, "act_bits", 16); err != nil {
		return err
	} else if ab < 16 {
		return fmt.Errorf("auto-round act_bits %d (quantized activations) is not evaluated by qppl yet; nothing was computed", ab)
	}
	if c.Bits, err = integer(top, "bits", 4); err != nil {
		return err
	}
	if c.GroupSize, err = integer(top, "group_size", 128); err != nil {
		return err
	}
	if c.Sym, err = boolean(top, "sym", true); err != nil {
		return err
	}
	if err := checkExtraConfig(top, c); err != nil {
		return err
	}
	s.AutoRound = c
	if c.Layout == "awq" {
		if c.Bits != 4 {
			return fmt.Errorf("auto-round auto_awq packing with bits %d: want 4", c.Bits)
		}
		if c.GroupSize <= 0 {
			return fmt.Errorf("auto-round group_size %d: want a positive size for auto_awq", c.GroupSize)
		}
		s.AWQ = &AWQConfig{Bits: 4, GroupSize: c.GroupSize, ZeroPoint: true}
		return nil
	}
	switch c.Bits {
	case 2, 4, 8:
	default:
		return fmt.Errorf("auto-round bits %d not supported (2, 4, 8)", c.Bits)
	}
	if c.GroupSize == 0 || c.GroupSize < -1 {
		return fmt.Errorf("auto-round group_size %d: want a positive size or -1", c.GroupSize)
	}
	s.GPTQ = &GPTQConfig{Bits: c.Bits, GroupSize: c.GroupSize, Sym: c.Sym, V2: c.Layout == "gptq-native"}
	return nil
}

// nativeKernel reports the older native packings named after an inference
// kernel (auto-round v0.3-v0.4 wrote auto_round:exllamav2 or
// auto_round:triton for asymmetric models, packed by
// auto_round_extension/cuda/qlinear_triton.py with the zero points as they
// are).
func nativeKernel(pf string) bool {
	k, ok := strings.CutPrefix(pf, "auto_round:")
	if !ok {
		return false
	}
	switch k {
	case "exllamav2", "triton", "tritonv2", "torch", "marlin", "qbits", "ipex":
		return true
	}
	return false
}

// checkExtraConfig accepts per-layer overrides that keep a layer in 16 bits
// (stored dense, opened by its tensors) or repeat the global settings, and
// refuses the rest.
func checkExtraConfig(top map[string]json.RawMessage, c *AutoRoundConfig) error {
	v := top["extra_config"]
	if isEmptyObject(v) {
		return nil
	}
	var ex map[string]map[string]json.RawMessage
	if err := json.Unmarshal(v, &ex); err != nil {
		return fmt.Errorf("extra_config: want an object of objects, got %s", clip(v))
	}
	names := make([]string, 0, len(ex))
	for k := range ex {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		e := ex[name]
		bits, err := integer(e, "bits", c.Bits)
		if err != nil {
			return fmt.Errorf("extra_config.%s: %v", name, err)
		}
		if bits >= 16 {
			continue
		}
		gs, err := integer(e, "group_size", c.GroupSize)
		if err != nil {
			return fmt.Errorf("extra_config.%s: %v", name, err)
		}
		sym, err := boolean(e, "sym", c.Sym)
		if err != nil {
			return fmt.Errorf("extra_config.%s: %v", name, err)
		}
		if bits != c.Bits || gs != c.GroupSize || sym != c.Sym {
			return fmt.Errorf("extra_config.%s: per-layer settings (bits %d, group_size %d, sym %v) other than the global ones are not evaluated by qppl yet; nothing was computed", name, bits, gs, sym)
		}
	}
	return nil
}

func autoRoundFamily() family {
	return family{
		name:    "auto-round",
		method:  MethodAutoRound,
		aliases: []string{"intel/auto-round"},
		parse: func(s *Scheme, top map[string]json.RawMessage) error {
			return parseAutoRound(s, top)
		},
		markers: []string{"qweight"},
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			c := s.AutoRound
			if c.Layout == "awq" {
				a, err := openAWQ(t, s.AWQ)
				if err != nil {
					return nil, err
				}
				a.Fmt = "autoround-" + a.Fmt
				return a, nil
			}
			q, err := openGPTQ(t, s.GPTQ)
			if err != nil {
				return nil, err
			}
			if c.Layout == "gptq-native" {
				q.Fmt = fmt.Sprintf("autoround-int%d-g%d-native", c.Bits, c.GroupSize)
			} else {
				q.Fmt = "autoround-" + q.Fmt
			}
			if !c.Sym {
				q.Fmt += "-asym"
			}
			return q, nil
		},
	}
}
