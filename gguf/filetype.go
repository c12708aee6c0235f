package gguf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qppl/qppl/gguf/ggml"
)

// FileType is a llama.cpp file type (llama.h's enum llama_ftype) that
// qppl's converter writes: a default tensor type and llama.cpp's rules for
// which tensors get another one (Q4_K_M puts Q6_K on some attn_v and
// ffn_down tensors and on the output head).
type FileType struct {
	Name    string    // llama.cpp's name: "Q4_K_M"
	ID      uint32    // general.file_type
	Default ggml.Type // llama_ftype_get_default_type
}

// FileTypes lists the file types qppl writes: those whose every tensor
// type package ggml quantizes (without an importance matrix, the types
// llama.cpp's llama-quantize produces without one).
func FileTypes() []FileType {
	return []FileType{
		{"F32", 0, ggml.F32}, {"F16", 1, ggml.F16}, {"BF16", 32, ggml.BF16},
		{"Q4_0", 2, ggml.Q4_0}, {"Q4_1", 3, ggml.Q4_1}, {"Q5_0", 8, ggml.Q5_0}, {"Q5_1", 9, ggml.Q5_1}, {"Q8_0", 7, ggml.Q8_0},
		{"Q4_K_S", 14, ggml.Q4_K}, {"Q4_K_M", 15, ggml.Q4_K}, {"Q5_K_S", 16, ggml.Q5_K}, {"Q5_K_M", 17, ggml.Q5_K},
		{"Q6_K", 18, ggml.Q6_K}, {"IQ4_NL", 25, ggml.IQ4_NL}, {"IQ4_XS", 30, ggml.IQ4_XS},
	}
}

// FileTypeByName finds a file type by llama.cpp's name (any case).
func FileTypeByName(name string) (FileType, error) {
	var names []string
	for _, ft := range FileTypes() {
		if strings.EqualFold(ft.Name, name) {
			return ft, nil
		}
		names = append(names, ft.Name)
	}
	return FileType{}, fmt.Errorf("%w: file type %q (qppl writes %s)", ErrUnsupported, name, strings.Join(names, ", "))
}

// mixModel is what llama.cpp's type rules look at besides the tensor.
type mixModel struct {
	arch   string // GGUF architecture
	layers int
	gqa    int  // n_head / n_head_kv
	tied   bool // no output.weight: token_embd is the head
	is70B  bool // llama.cpp's LLM_TYPE_70B (llama, 80 layers, grouped-query attention)
	// experts is hparams.n_expert (0 for a dense model): 8 experts bump
	// attn_v, attn_k and attn_output.
	experts int
}

// isQuantized reports whether t is a block type (ggml_is_quantized).
func isQuantized(t ggml.Type) bool { return t.BlockSize() > 1 }

// useMoreBits is llama.cpp's use_more_bits: the first and last eighth of
// the layers and every third layer between get more bits.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// tensorType is the type llama_model_quantize gives the 2-D weight name
// (GGUF name, input width ne0) in a file of type ft, without an importance
// matrix, output-tensor or token-embedding overrides, or --pure
// (llama.cpp src/llama-quant.cpp: llama_tensor_get_type,
// llama_tensor_get_type_impl and tensor_type_fallback, for the graphs qppl
// converts). Vectors are F32. The MoE router (ffn_gate_inp) stays F32 in
// every file: convert_hf_to_gguf.py's prepare_tensors keeps
// MODEL_TENSOR.FFN_GATE_INP in float32 and tensor_allows_quantization
// never quantizes it. A stacked expert tensor (ffn_*_exps) is typed by
// its category (its name contains ffn_down, ffn_up, ffn_gate) and its
// layer, read from its name (layer_info with n_expert > 1).
func (ft FileType) tensorType(name string, ne0 int64, m mixModel) (ggml.Type, error) {
	t := ft.Default
	if strings.Contains(name, "ffn_gate_inp.weight") {
		return ggml.F32, nil
	}
	if !isQuantized(t) {
		return t, nil
	}
	layer := -1
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			layer, _ = strconv.Atoi(rest[:i])
		}
	}
	switch {
	case name == "output.weight" || m.tied && name == "token_embd.weight":
		// The head: Q8_0 when the default type's blocks do not fit its
		// rows, else Q6_K (Q8_0 files keep Q8_0).
		if ne0%int64(t.BlockSize()) != 0 {
			t = ggml.Q8_0
		} else if t != ggml.Q8_0 {
			t = ggml.Q6_K
		}
	case name == "token_embd.weight":
		// untied: the default type for these file types
	case strings.HasSuffix(name, ".attn_v.weight"), strings.HasSuffix(name, ".attn_qkv.weight"):
		// category_is_attn_v: attn_v, and phi3's fused attn_qkv too
		switch {
		case (ft.Name == "IQ4_NL" || ft.Name == "IQ4_XS") && m.gqa >= 4:
			t = ggml.Q5_K
		case (ft.Name == "Q4_K_M" || ft.Name == "Q5_K_M") && useMoreBits(layer, m.layers):
			t = ggml.Q6_K
		case ft.Name == "Q4_K_S" && layer < 4:
			t = ggml.Q5_K
		}
		if m.is70B && (t == ggml.Q3_K || t == ggml.Q4_K) {
			t = ggml.Q5_K
		}
		if m.experts == 8 {
			t = ggml.Q8_0 // "for the 8-expert model, bumping this to Q8_0"
		}
	case strings.HasSuffix(name, ".attn_k.weight"):
		if m.experts == 8 {
			t = ggml.Q8_0
		}
	case strings.HasSuffix(name, ".attn_output.weight"):
		if m.experts == 8 {
			switch ft.Name {
			case "Q4_K_S", "Q4_K_M", "IQ4_NL", "IQ4_XS":
				t = ggml.Q5_K
			}
		}
	case strings.Contains(name, "ffn_down"):
		switch {
		case ft.Name == "Q4_K_M":
			if useMoreBits(layer, m.layers) {
				t = ggml.Q6_K
			}
		case layer < m.layers/8 && (ft.Name == "IQ4_NL" || ft.Name == "IQ4_XS"):
			t = ggml.Q5_K
		case ft.Name == "Q5_K_M" && useMoreBits(layer, m.layers):
			t = ggml.Q6_K
		case ft.Name == "Q4_K_S" && layer < m.layers/8:
			t = ggml.Q5_K
		}
	}
	// tensor_type_fallback: rows that are not whole super-blocks.
	if ne0%int64(t.BlockSize()) != 0 {
		switch t {
		case ggml.IQ4_XS:
			t = ggml.IQ4_NL
		case ggml.Q4_K:
			t = ggml.Q5_0
		case ggml.Q5_K:
			t = ggml.Q5_1
		case ggml.Q6_K:
			t = ggml.Q8_0
		default:
			return 0, fmt.Errorf("%w: tensor %q: rows of %d values are not whole %s blocks (llama.cpp has no fallback type for it)", ErrUnsupported, name, ne0, t)
		}
		if ne0%int64(t.BlockSize()) != 0 {
			t = ggml.F16
		}
	}
	return t, nil
}
