package quant

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/qppl/qppl/checkpoint"
)

// ModuleInfo is one Linear in an Inspect report.
type ModuleInfo struct {
	Module string  `json:"module"`
	Layer  int     `json:"layer"` // decoder layer index, -1 for the head
	Format string  `json:"format"`
	Out    int     `json:"out"`
	In     int     `json:"in"`
	Bytes  int64   `json:"bytes"` // stored bytes of its tensors, bias excluded
	BPW    float64 `json:"bpw"`
}

// Report is compare_q's bits-per-weight accounting of a checkpoint
// (methodology.md §1.5): decoder-only bpw over every Linear of the decoder
// layers, head bpw (lm_head, or the tied embedding), and the VRAM estimate
// vram_bits = head_numel·head_bpw + Σ layer bits. Embeddings are excluded
// from the layer figures; biases are not counted.
type Report struct {
	Method       string       `json:"quant_method"`
	Format       string       `json:"format"` // the layers' format, or "mixed: a, b, ..."
	BPWLayer     float64      `json:"bpw_layer"`
	BPWHead      float64      `json:"bpw_head"`
	VRAMBits     float64      `json:"vram_bits"`
	VRAMGB       float64      `json:"vram_gb"` // vram_bits/8/1024³
	LayerBytes   int64        `json:"layer_bytes"`
	LayerWeights int64        `json:"layer_weights"`
	Head         string       `json:"head"` // module used as the head
	HeadTied     bool         `json:"head_tied"`
	HeadFormat   string       `json:"head_format"`
	HeadBytes    int64        `json:"head_bytes"`
	HeadWeights  int64        `json:"head_weights"`
	TensorBytes  int64        `json:"tensor_bytes"` // all tensors' data
	FileBytes    int64        `json:"file_bytes"`   // safetensors files on disk
	Modules      []ModuleInfo `json:"modules"`
	// KVCache describes the checkpoint's quantized KV cache (KVCache.Describe;
	// its scales are run-time state, not weight bits), "" without one.
	KVCache string `json:"kv_cache,omitempty"`
}

// Inspect opens and validates every Linear of m and returns its bpw report.
func Inspect(m *checkpoint.Model) (*Report, error) {
	s, err := Parse(m.Config)
	if err != nil {
		return nil, err
	}
	r, err := s.InspectSource(m, m.Config != nil && m.Config.TieWordEmbeddings)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Dir, err)
	}
	if s.KV != nil {
		r.KVCache = s.KV.Describe()
	}
	return r, nil
}

// layerRE matches a decoder layer module: model.layers.{i}. or, in a
// multimodal checkpoint (qwen3_5, gemma3), model.language_model.layers.{i}.
// or, saved before transformers 4.52 (gemma3), language_model.model.layers.{i}.
var layerRE = regexp.MustCompile(`^(?:model\.(?:language_model\.)?|language_model\.model\.)layers\.(\d+)\.`)

// linearModules returns the Linear modules of src (those with a family's
// marker tensor, weight_packed, or a 2-D weight, and the per-expert modules
// of fused 3-D experts, see fused.go), sorted by layer then name.
func linearModules(src Source) []string {
	set := map[string]bool{}
	markers := linearMarkers()
	for _, name := range src.Names() {
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			continue
		}
		mod, suf := name[:i], name[i+1:]
		switch {
		case suf == "weight":
			if ti, ok := src.Tensor(name); ok && len(ti.Shape) == 2 {
				set[mod] = true
			}
		case slices.Contains(markers, suf):
			set[mod] = true
		}
	}
	for _, m := range fusedExpertModules(src) { // quant/fused.go
		set[m] = true
	}
	mods := make([]string, 0, len(set))
	for m := range set {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(a, b int) bool {
		la, lb := layerOf(mods[a]), layerOf(mods[b])
		if la != lb {
			return la < lb
		}
		return mods[a] < mods[b]
	})
	return mods
}

func layerOf(mod string) int {
	if m := layerRE.FindStringSubmatch(mod); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return -1
}

// InspectSource is Inspect over any tensor source; tied says the head is
// the embedding (tie_word_embeddings) when lm_head is absent.
func (s *Scheme) InspectSource(src Source, tied bool) (*Report, error) {
	r := &Report{Method: s.Method}
	formats := map[string]bool{}
	var fmts []string
	for _, mod := range linearModules(src) {
		layer := layerOf(mod)
		isHead := mod == "lm_head"
		if layer < 0 && !isHead {
			continue // embeddings and anything outside the decoder layers
		}
		l, err := s.Open(src, mod)
		if err != nil {
			return nil, err
		}
		out, in := l.Shape()
		mi := ModuleInfo{Module: mod, Layer: layer, Format: l.Format(), Out: out, In: in, Bytes: l.StoredBytes()}
		if out*in > 0 {
			mi.BPW = float64(mi.Bytes) * 8 / float64(out*in)
		}
		if isHead {
			mi.Layer = -1
			r.Head, r.HeadFormat, r.HeadBytes, r.HeadWeights = mod, mi.Format, mi.Bytes, int64(out)*int64(in)
		} else {
			r.LayerBytes += mi.Bytes
			r.LayerWeights += int64(out) * int64(in)
			if !formats[mi.Format] {
				formats[mi.Format] = true
				fmts = append(fmts, mi.Format)
			}
		}
		r.Modules = append(r.Modules, mi)
	}
	for _, mi := range gptOssExpertInfo(src) { // fused experts are not Linears (gptoss.go)
		r.LayerBytes += mi.Bytes
		r.LayerWeights += int64(mi.Out) * int64(mi.In)
		if !formats[mi.Format] {
			formats[mi.Format] = true
			fmts = append(fmts, mi.Format)
		}
		r.Modules = append(r.Modules, mi)
	}
	if r.Head == "" && tied {
		// the embedding of a causal LM, or of a multimodal checkpoint's
		// text decoder (qwen3_5, gemma3, gemma4; gemma3's older layout)
		for _, emb := range []string{"model.embed_tokens", "model.language_model.embed_tokens", "language_model.model.embed_tokens"} {
			if ti, ok := src.Tensor(emb + ".weight"); ok && len(ti.Shape) == 2 {
				r.Head, r.HeadTied, r.HeadFormat = emb, true, strings.ToLower(string(ti.DType))
				r.HeadBytes, r.HeadWeights = ti.Size, int64(ti.Shape[0])*int64(ti.Shape[1])
				break
			}
		}
	}
	if r.LayerWeights > 0 {
		r.BPWLayer = float64(r.LayerBytes) * 8 / float64(r.LayerWeights)
	}
	if r.HeadWeights > 0 {
		r.BPWHead = float64(r.HeadBytes) * 8 / float64(r.HeadWeights)
	}
	r.VRAMBits = float64(r.HeadWeights)*r.BPWHead + float64(r.LayerBytes)*8
	r.VRAMGB = r.VRAMBits / 8 / (1 << 30)
	switch len(fmts) {
	case 0:
		r.Format = "none"
	case 1:
		r.Format = fmts[0]
	default:
		sort.Strings(fmts)
		r.Format = "mixed: " + strings.Join(fmts, ", ")
	}
	files := map[string]bool{}
	for _, name := range src.Names() {
		ti, _ := src.Tensor(name)
		r.TensorBytes += ti.Size
		if ti.File != "" && !files[ti.File] {
			files[ti.File] = true
			if st, err := os.Stat(ti.File); err == nil {
				r.FileBytes += st.Size()
			}
		}
	}
	return r, nil
}
