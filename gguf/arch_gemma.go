package gguf

import (
	"fmt"
	"math"

	"github.com/qppl/qppl/arch"
)

// What Gemma 2 and Gemma 3 share in GGUF form (llama.cpp
// convert_hf_to_gguf.py Gemma2Model / Gemma3Model, src/models/gemma2.cpp
// and gemma3.cpp load_arch_hparams, load_arch_tensors, the graph):
//
//   - RMSNorm weights are stored as 1 + w (Gemma2Model.modify_tensors:
//     "if name.endswith("norm.weight"): data_torch = data_torch + 1";
//     Gemma3Model.norm_shift 1.0), the addition done by torch in float32
//     (bf16 tensors are widened to float32 first): the file holds
//     v = fl32(1 + w) and llama.cpp multiplies by it (LLM_NORM_RMS). The
//     reader gives the backends w = v − 1 (exact in float64), so their
//     1 + w is v: the float32 rounding of the gain, which is exactly
//     what transformers' Gemma2RMSNorm computes ((1.0 + weight.float())
//     in float32) and differs from qppl's float64 1 + w when 1 + w is not
//     a float32 — bf16 weights of magnitude ≥ 2^-16 give a float32 1 + w,
//     float32 weights generally do not. qppl's converter writes the
//     rounding remainder as qppl.residual.<tensor> (residual.go), which
//     removes the difference for its own conversions;
//   - the embedding scale sqrt(hidden) is not stored (the graph multiplies,
//     ggml_scale(inpL, sqrtf(n_embd)));
//   - query_pre_attn_scalar is not stored: llama.cpp's f_attention_scale is
//     1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B model, which
//     it recognises by its layer count (gemma2: 46, gemma3: 62) — the
//     values of the released checkpoints. The reader sets
//     query_pre_attn_scalar accordingly; the converter refuses a model
//     whose query_pre_attn_scalar is not that value;
//   - sliding windows: <arch>.attention.sliding_window (the window) and
//     <arch>.attention.sliding_window_pattern (llama_model_base::
//     load_swa_pattern: a per-layer array, else a period p read by
//     llama_hparams::set_swa_pattern — layer i slides iff p == 0 or
//     i % p < p − 1; default p = 2 for gemma2, 6 for gemma3), masked as
//     transformers masks (is_masked_swa LLAMA_SWA_TYPE_STANDARD: a key
//     p0 is hidden from query p1 when p1 − p0 ≥ n_swa).
//
// The GGUF tensor names (gguf-py constants.py MODEL_TENSOR ATTN_POST_NORM
// "blk.{bid}.post_attention_norm", FFN_NORM "blk.{bid}.ffn_norm" (here
// pre_feedforward_layernorm), FFN_POST_NORM "blk.{bid}.post_ffw_norm") are
// gemmaLayer's.

// gemmaLayer is the tensor table of a Gemma 2/3 decoder layer.
func gemmaLayer(s *arch.Spec, i int) []TensorName {
	l := s.Layer(i)
	blk := fmt.Sprintf("blk.%d.", i)
	var out []TensorName
	add := func(hf, g string, norm bool) {
		if hf == "" {
			return
		}
		tn := TensorName{HF: hf, GGUF: blk + g, Expert: -1}
		if norm {
			tn.FromGGUF, tn.ToGGUF = normFromGGUF, normToGGUF
		}
		out = append(out, tn)
	}
	add(l.AttnNorm, "attn_norm.weight", true)
	add(l.Q+".weight", "attn_q.weight", false)
	add(l.K+".weight", "attn_k.weight", false)
	add(l.V+".weight", "attn_v.weight", false)
	add(l.O+".weight", "attn_output.weight", false)
	add(l.QNorm, "attn_q_norm.weight", true)
	add(l.KNorm, "attn_k_norm.weight", true)
	add(l.PostAttnNorm, "post_attention_norm.weight", true)
	add(l.MLPNorm, "ffn_norm.weight", true)
	add(l.Gate+".weight", "ffn_gate.weight", false)
	add(l.Up+".weight", "ffn_up.weight", false)
	add(l.Down+".weight", "ffn_down.weight", false)
	add(l.PostMLPNorm, "post_ffw_norm.weight", true)
	return out
}

// gemmaGlobals are the layer-independent tensors with the final norm
// stored as 1 + w.
func gemmaGlobals(s *arch.Spec) []TensorName {
	g := globalNames(s)
	for i := range g {
		if g[i].HF == arch.FinalNormName {
			g[i].FromGGUF, g[i].ToGGUF = normFromGGUF, normToGGUF
		}
	}
	return g
}

// normFromGGUF turns llama.cpp's stored gain v = fl32(1 + w) into w = v − 1
// (exact in float64 for every float32 v ≥ 2^-29 or ≤ 0, i.e. every gain
// but vanishing ones, where v − 1 rounds once).
func normFromGGUF(v []float64) {
	for i := range v {
		v[i]--
	}
}

// normToGGUF is the converter's 1 + w, added in float32 as torch does.
func normToGGUF(v []float64) {
	for i := range v {
		v[i] = float64(float32(1) + float32(v[i]))
	}
}

// gemmaAttnScalar is the query_pre_attn_scalar llama.cpp's gemma2/gemma3
// graphs apply (f_attention_scale = scalar^-0.5): n_embd / n_head (integer
// division) for the 27B model, recognised by its layer count, else
// head_dim.
func gemmaAttnScalar(layers27B int, layers, hidden, heads, headDim int) int {
	if layers == layers27B {
		return hidden / heads
	}
	return headDim
}

// readSWAPattern reads <arch>.attention.sliding_window_pattern as
// llama_model_base::load_swa_pattern does: a per-layer array of bools (or
// integers, non-zero = sliding) of length block_count, or a period p
// (set_swa_pattern: layer i slides iff p == 0 or i % p < p − 1); def is the
// architecture's period when the key is absent.
func (m *Model) readSWAPattern(a string, layers int, def int64) ([]bool, error) {
	key := a + ".attention.sliding_window_pattern"
	out := make([]bool, layers)
	v, ok := m.meta(key)
	if arr, isArr := v.Array(); ok && isArr {
		if arr.Len != layers {
			return nil, m.metaErr(key, v, fmt.Sprintf("want one entry per layer (%d)", layers))
		}
		for i := range out {
			e := arr.At(i)
			if b, ok := e.Bool(); ok {
				out[i] = b
				continue
			}
			n, ok := e.Int()
			if !ok || n < 0 || n > 1 {
				return nil, m.metaErr(key, v, fmt.Sprintf("entry %d is %v: want a bool per layer", i, e))
			}
			out[i] = n == 1
		}
		return out, nil
	}
	p, err := m.metaInt(key, def)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = p == 0 || int64(i)%p < p-1
	}
	return out, nil
}

// swaPatternKV is the converter's sliding_window_pattern for the sliding
// layers of s: nil when llama.cpp's default period def gives them, the
// period when one does, else the per-layer array.
func swaPatternKV(a string, s *arch.Spec, def int) []KV {
	sl := make([]bool, s.Layers)
	for i := range sl {
		sl[i] = s.Window(i) > 0
	}
	period := func(p int) bool {
		for i, x := range sl {
			if x != (p == 0 || i%p < p-1) {
				return false
			}
		}
		return true
	}
	key := a + ".attention.sliding_window_pattern"
	if period(def) {
		return nil
	}
	for p := 0; p <= s.Layers+1; p++ {
		if period(p) {
			return []KV{{key, Uint32Value(uint32(p))}}
		}
	}
	raw := make([]byte, len(sl))
	for i, x := range sl {
		if x {
			raw[i] = 1
		}
	}
	v, _ := ScalarArray(TypeBool, raw)
	return []KV{{key, v}}
}

// requirePositive reads a float key that must be present, positive and
// finite.
func (m *Model) requirePositive(key string) (float64, error) {
	f, err := m.metaFloat(key, math.NaN())
	if err != nil {
		return 0, err
	}
	if !(f > 0) {
		return 0, fmt.Errorf("%w: %s: metadata %q = %v: want a positive value", ErrFormat, m.Files[0].Path, key, f)
	}
	return f, nil
}

// gemmaWindow reads the sliding window and per-layer pattern into cfg
// (sliding_window, layer_types): defWindow is llama.cpp's window when the
// key is absent (0: no sliding attention), defPeriod its pattern period.
func (m *Model) gemmaWindow(a string, cfg map[string]any, defWindow, defPeriod int64) error {
	layers := int(cfg["num_hidden_layers"].(int64))
	w, err := m.metaInt(a+".attention.sliding_window", defWindow)
	if err != nil {
		return err
	}
	pattern, err := m.readSWAPattern(a, layers, defPeriod)
	if err != nil {
		return err
	}
	types := make([]string, layers)
	for i := range types {
		types[i] = "full_attention"
		if pattern[i] && w > 0 {
			types[i] = "sliding_attention"
		}
	}
	if w == 0 {
		cfg["sliding_window"] = nil
	} else {
		cfg["sliding_window"] = w
	}
	cfg["layer_types"] = types
	return nil
}

// gemmaConvertChecks refuses what llama.cpp's gemma2/gemma3 graphs compute
// differently from transformers: another query_pre_attn_scalar than the
// one it derives, attention biases, another activation.
func gemmaConvertChecks(a string, s *arch.Spec, layers27B int) error {
	c := s.Config
	want := gemmaAttnScalar(layers27B, s.Layers, s.Hidden, s.Heads, s.HeadDim)
	if c.QueryPreAttnScalar != float64(want) {
		return fmt.Errorf("%w: convert: config.json query_pre_attn_scalar %v: llama.cpp's %s graph scales queries by 1/sqrt(%d) (head_dim, or hidden/heads for a %d-layer model) and GGUF has no key for it", ErrUnsupported, c.QueryPreAttnScalar, a, want, layers27B)
	}
	if s.QKVBias || s.OBias {
		return fmt.Errorf("%w: convert: config.json attention_bias: llama.cpp's %s graph has no attention biases", ErrUnsupported, a)
	}
	if c.HiddenAct != "gelu_pytorch_tanh" {
		return fmt.Errorf("%w: convert: config.json hidden_activation %q: llama.cpp's %s graph uses the tanh GELU", ErrUnsupported, c.HiddenAct, a)
	}
	return nil
}

// gemma2Arch declares general.architecture "gemma2" (convert_hf_to_gguf.py
// Gemma2Model; llama.cpp src/models/gemma2.cpp): the shared gemma mapping
// above, plus
//
//   - both soft caps stored (gemma2.attn_logit_softcapping,
//     gemma2.final_logit_softcapping; llama.cpp always applies both, with
//     defaults 50 and 30 when absent: the reader requires them, as the
//     converter always writes them);
//   - one RoPE base for every layer (rope.freq_base, default 10000;
//     rope.freq_base_swa, when present, must equal it: Gemma2 has one
//     rope_theta);
//   - the head is always the embedding (load_arch_tensors: output is
//     token_embd, TENSOR_DUPLICATED; the converter drops lm_head.weight):
//     output.weight is refused, and so is converting an untied model;
//   - sliding window default 4096, pattern default period 2.
func gemma2Arch() Arch {
	return Arch{
		Name:       "gemma2",
		ModelTypes: []string{"gemma2"},
		Layer:      gemmaLayer,
		Globals:    gemmaGlobals,
		Config: func(m *Model, cfg map[string]any) error {
			path := m.Files[0].Path
			cfg["model_type"] = "gemma2"
			if _, ok := m.tensors["output.weight"]; ok {
				return fmt.Errorf("%w: %s: tensor \"output.weight\": llama.cpp's gemma2 graph always uses token_embd.weight as the head", ErrUnsupported, path)
			}
			for _, k := range []string{"attn_logit_softcapping", "final_logit_softcapping"} {
				c, err := m.requirePositive("gemma2." + k)
				if err != nil {
					return err
				}
				cfg[k] = c
			}
			if _, ok := m.meta("gemma2.rope.freq_base_swa"); ok {
				f, err := m.metaFloat("gemma2.rope.freq_base_swa", 0)
				if err != nil {
					return err
				}
				if f != cfg["rope_theta"].(float64) {
					return fmt.Errorf("%w: %s: metadata \"gemma2.rope.freq_base_swa\" = %v differs from rope.freq_base %v: Gemma 2 has one RoPE base", ErrUnsupported, path, f, cfg["rope_theta"])
				}
			}
			if err := m.gemmaWindow("gemma2", cfg, 4096, 2); err != nil {
				return err
			}
			gemmaCommon(cfg, 46)
			return nil
		},
		Convert: func(s *arch.Spec) ([]KV, error) {
			if err := gemmaConvertChecks("gemma2", s, 46); err != nil {
				return nil, err
			}
			if !s.TiedHead {
				return nil, fmt.Errorf("%w: convert: config.json tie_word_embeddings false: llama.cpp's gemma2 graph always uses the embedding as the head (its converter drops lm_head.weight)", ErrUnsupported)
			}
			c := s.Config
			if c.AttnLogitSoftcap <= 0 || c.FinalLogitSoftcap <= 0 {
				return nil, fmt.Errorf("%w: convert: config.json attn_logit_softcapping / final_logit_softcapping null: llama.cpp's gemma2 graph always soft-caps", ErrUnsupported)
			}
			kvs := []KV{
				{"gemma2.attn_logit_softcapping", Float32Value(float32(c.AttnLogitSoftcap))},
				{"gemma2.final_logit_softcapping", Float32Value(float32(c.FinalLogitSoftcap))},
			}
			return append(kvs, gemmaWindowKVs("gemma2", s, 2)...), nil
		},
	}
}

// gemmaCommon sets the config keys the gemma GGUF files imply.
func gemmaCommon(cfg map[string]any, layers27B int) {
	cfg["hidden_activation"] = "gelu_pytorch_tanh"
	cfg["hidden_act"] = "gelu_pytorch_tanh"
	cfg["attention_bias"] = false
	layers, hidden := int(cfg["num_hidden_layers"].(int64)), int(cfg["hidden_size"].(int64))
	heads, hd := int(cfg["num_attention_heads"].(int64)), int(cfg["head_dim"].(int64))
	cfg["query_pre_attn_scalar"] = gemmaAttnScalar(layers27B, layers, hidden, heads, hd)
}

// gemmaWindowKVs writes the window and, when llama.cpp's default period
// does not give the sliding layers, the pattern.
func gemmaWindowKVs(a string, s *arch.Spec, defPeriod int) []KV {
	w := 0
	for i := 0; i < s.Layers; i++ {
		w = max(w, s.Window(i))
	}
	var kvs []KV
	if w > 0 {
		kvs = append(kvs, KV{a + ".attention.sliding_window", Uint32Value(uint32(w))})
	}
	return append(kvs, swaPatternKV(a, s, defPeriod)...)
}

// gemma3Arch declares general.architecture "gemma3", the text decoder of
// Gemma 3 (model_type gemma3_text; convert_hf_to_gguf.py Gemma3Model,
// llama.cpp src/models/gemma3.cpp): the shared gemma mapping above with
// q_norm/k_norm (attn_q_norm, attn_k_norm, also stored 1 + w), plus
//
//   - no attention soft cap (the converter asserts attn_logit_softcapping
//     is None; a file carrying the key is refused), the final cap only
//     when gemma3.final_logit_softcapping is present;
//   - RoPE: rope.freq_base on the global layers, with the linear
//     rope.scaling of the file; rope.freq_base_swa (default 10000,
//     llama_hparams' rope_freq_base_train_swa) unscaled on the sliding
//     layers (transformers' rotary_emb_local: rope_local_base_freq, default
//     RoPE);
//   - no sliding attention when gemma3.attention.sliding_window is absent
//     (the converter omits it for sliding_window_pattern 1), pattern
//     default period 6;
//   - an untied head as output.weight (TENSOR_NOT_REQUIRED).
func gemma3Arch() Arch {
	return Arch{
		Name:       "gemma3",
		ModelTypes: []string{"gemma3_text"},
		Layer:      gemmaLayer,
		Globals:    gemmaGlobals,
		Config: func(m *Model, cfg map[string]any) error {
			path := m.Files[0].Path
			cfg["model_type"] = "gemma3_text"
			if _, ok := m.meta("gemma3.attn_logit_softcapping"); ok {
				return fmt.Errorf("%w: %s: metadata \"gemma3.attn_logit_softcapping\": llama.cpp's gemma3 graph does not soft-cap attention scores", ErrUnsupported, path)
			}
			cfg["attn_logit_softcapping"] = nil
			cfg["final_logit_softcapping"] = nil
			if _, ok := m.meta("gemma3.final_logit_softcapping"); ok {
				c, err := m.requirePositive("gemma3.final_logit_softcapping")
				if err != nil {
					return err
				}
				cfg["final_logit_softcapping"] = c
			}
			local, err := m.metaFloat("gemma3.rope.freq_base_swa", 10000)
			if err != nil {
				return err
			}
			cfg["rope_local_base_freq"] = local
			if err := m.gemmaWindow("gemma3", cfg, 0, 6); err != nil {
				return err
			}
			gemmaCommon(cfg, 62)
			return nil
		},
		Convert: func(s *arch.Spec) ([]KV, error) {
			if err := gemmaConvertChecks("gemma3", s, 62); err != nil {
				return nil, err
			}
			c := s.Config
			if c.AttnLogitSoftcap > 0 {
				return nil, fmt.Errorf("%w: convert: config.json attn_logit_softcapping %v: llama.cpp's gemma3 graph does not soft-cap attention scores", ErrUnsupported, c.AttnLogitSoftcap)
			}
			var kvs []KV
			if c.FinalLogitSoftcap > 0 {
				kvs = append(kvs, KV{"gemma3.final_logit_softcapping", Float32Value(float32(c.FinalLogitSoftcap))})
			}
			kvs = append(kvs, KV{"gemma3.rope.freq_base_swa", Float32Value(float32(c.RopeLocalTheta))})
			return append(kvs, gemmaWindowKVs("gemma3", s, 6)...), nil
		},
	}
}
