package gguf

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gguf/ggml"
	"github.com/qppl/qppl/internal/atomicfile"
)

// ConvertOptions configures Convert.
type ConvertOptions struct {
	// Type of the 2-D weights: F32 (exact for F32, BF16 and F16
	// checkpoints) or F16 (rounded to nearest even, as llama.cpp's
	// converter does). Norms and biases are always F32.
	Type Type
	// FileType, when set, is the llama.cpp file type to write instead
	// (FileTypes: "Q8_0", "Q4_K_M", "IQ4_XS", ...): every 2-D weight is
	// quantized by package ggml to the type llama_model_quantize would
	// choose for it, byte for byte as llama.cpp quantizes the F32 file.
	FileType string
	// Name is general.name (default: the model directory's base name).
	Name string
}

// Convert returns the metadata and tensors of a GGUF file holding the
// dense checkpoint m as llama.cpp's convert_hf_to_gguf.py writes it:
// llama.cpp's tensor names and <arch>.* metadata (the architecture whose
// declaration lists the model_type: Architectures; llama and mistral as
// "llama", mixtral as "llama" with experts), the rows of q and k of llama
// files permuted, a mixture of experts' weights stacked per layer into
// ffn_{gate,up,down}_exps, a tied head written without output.weight, and the
// tokenizer (tokenizer.json beside the checkpoint) as tokenizer.ggml.*
// metadata so that libllama loads the file. Every tensor of m must be
// used.
func Convert(m *checkpoint.Model, o ConvertOptions) ([]KV, []WriteTensor, error) {
	ftName := o.FileType
	if ftName == "" {
		if o.Type != F32 && o.Type != F16 {
			return nil, nil, fmt.Errorf("gguf: convert: output type %s (want F32 or F16)", o.Type)
		}
		ftName = o.Type.String()
	}
	ft, err := FileTypeByName(ftName)
	if err != nil {
		return nil, nil, err
	}
	if len(m.Config.QuantizationConfig) > 0 {
		return nil, nil, fmt.Errorf("%w: %s: convert: quantized checkpoints (%s) cannot be converted; convert the dense model", ErrUnsupported, m.Dir, m.Config.QuantizationKey)
	}
	spec, err := arch.For(m.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.Dir, err)
	}
	cfg := spec.Config // resolved: the family's defaults applied
	decl, ok := archForModelType(cfg.ModelType)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s: convert: model_type %q (GGUF architectures: %s)", ErrUnsupported, m.Dir, cfg.ModelType, strings.Join(archNames(), ", "))
	}
	a := decl.Name
	if decl.F32Only != "" && ft.Name != "F32" {
		return nil, nil, fmt.Errorf("%w: %s: convert to %s: %s: write F32 and quantize it with llama-quantize", ErrUnsupported, m.Dir, ft.Name, decl.F32Only)
	}
	archKVs, err := decl.Convert(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.Dir, err)
	}
	table, err := newTensorTable(decl, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: convert: %w", m.Dir, err)
	}
	name := o.Name
	if name == "" {
		name = filepath.Base(m.Dir)
	}
	fileType := ft.ID
	mix := mixModel{arch: a, layers: spec.Layers, gqa: spec.Heads / spec.KVHeads, tied: spec.TiedHead,
		is70B: a == "llama" && spec.Layers == 80 && spec.Heads != spec.KVHeads && (spec.MoE == nil || spec.MoE.Experts != 8)}
	if spec.MoE != nil {
		mix.experts = spec.MoE.Experts
	}
	kvs := []KV{
		{"general.architecture", StringValue(a)},
		{"general.name", StringValue(name)},
		{a + ".block_count", Uint32Value(uint32(spec.Layers))},
		{a + ".context_length", Uint32Value(uint32(cfg.MaxPositionEmbeddings))},
		{a + ".embedding_length", Uint32Value(uint32(spec.Hidden))},
		{a + ".feed_forward_length", Uint32Value(uint32(spec.Intermediate))},
		{a + ".attention.head_count", Uint32Value(uint32(spec.Heads))},
		{a + ".attention.head_count_kv", Uint32Value(uint32(spec.KVHeads))},
		{a + ".rope.freq_base", Float32Value(float32(cfg.RopeTheta))},
		{a + ".attention.layer_norm_rms_epsilon", Float32Value(float32(cfg.RMSNormEps))},
		{a + ".attention.key_length", Uint32Value(uint32(spec.HeadDim))},
		{a + ".attention.value_length", Uint32Value(uint32(spec.HeadDim))},
		{a + ".rope.dimension_count", Uint32Value(uint32(spec.HeadDim))},
		{a + ".vocab_size", Uint32Value(uint32(spec.Vocab))},
	}
	kvs = slices.DeleteFunc(kvs, func(kv KV) bool { return decl.owns(strings.TrimPrefix(kv.Key, a+".")) })
	for i := 0; i < len(kvs); i++ {
		switch {
		case decl.PartialRotary && kvs[i].Key == a+".rope.dimension_count":
			kvs[i].Value = Uint32Value(uint32(spec.RotaryDim))
		case decl.MoEOnly && kvs[i].Key == a+".feed_forward_length":
			kvs = append(kvs[:i], kvs[i+1:]...)
			i--
		}
	}
	kvs = append(kvs, archKVs...)
	kvs = append(kvs, KV{"general.file_type", Uint32Value(fileType)}, KV{"general.quantization_version", Uint32Value(2)})
	var ropeFreqs []byte
	if rs := cfg.RopeScaling; rs != nil && rs.Type != "default" && !decl.owns("rope.scaling.type") {
		switch rs.Type {
		case "linear":
			kvs = append(kvs, KV{a + ".rope.scaling.type", StringValue("linear")}, KV{a + ".rope.scaling.factor", Float32Value(float32(rs.Factor))})
		case "llama3":
			// llama.cpp: a rope_freqs.weight tensor of per-dimension
			// factors; qppl also records the exact parameters (see
			// RopeScalingKey).
			js, err := json.Marshal(map[string]any{"rope_type": "llama3", "factor": rs.Factor, "low_freq_factor": rs.LowFreqFactor,
				"high_freq_factor": rs.HighFreqFactor, "original_max_position_embeddings": rs.OriginalMaxPositionEmbeddings})
			if err != nil {
				return nil, nil, err
			}
			kvs = append(kvs, KV{RopeScalingKey, StringValue(string(js))})
			for _, f := range llama3Factors(spec.HeadDim, cfg.RopeTheta, rs) {
				ropeFreqs = binary.LittleEndian.AppendUint32(ropeFreqs, math.Float32bits(f))
			}
		default:
			return nil, nil, fmt.Errorf("%w: %s: convert: rope_scaling %q", ErrUnsupported, m.Dir, rs.Type)
		}
	}
	tk, err := tokenizerKVs(filepath.Join(m.Dir, "tokenizer.json"), spec.Vocab, cfg)
	if err != nil {
		return nil, nil, err
	}
	kvs = append(kvs, tk...)

	// permuted: the Q/K weights and their head counts.
	permuted := map[string]int{}
	if decl.PermuteQK {
		for i := 0; i < spec.Layers; i++ {
			l := spec.Layer(i)
			if l.Q != "" {
				permuted[l.Q+".weight"] = spec.Heads
			}
			if l.K != "" {
				permuted[l.K+".weight"] = spec.KVHeads
			}
		}
	}
	used := map[string]bool{}
	var ts []WriteTensor
	var residuals []KV // ResidualPrefix keys, written after the others
	// read returns a Hugging Face tensor's values (the architecture's
	// ToGGUF applied).
	fused := fusedExpertSource(m, spec, used)
	var partName string // the fused tensor of the last part read, its values
	var partVals []float64
	var partShape []int
	read := func(tn TensorName) ([]float64, []int, error) {
		if tn.Fused != "" {
			if tn.Fused != partName {
				v, sh, err := m.ReadFloat64(tn.Fused)
				if err != nil {
					return nil, nil, err
				}
				partName, partVals, partShape = tn.Fused, v, sh
				used[tn.Fused] = true
			}
			v, sh := tn.Part(partVals, partShape)
			return v, sh, nil
		}
		vals, shape, err := fused(tn)
		if err != nil {
			return nil, nil, err
		}
		if vals == nil {
			if vals, shape, err = m.ReadFloat64(tn.HF); err != nil {
				return nil, nil, err
			}
		}
		used[tn.HF] = true
		if tn.ToGGUF != nil {
			orig := append([]float64(nil), vals...)
			tn.ToGGUF(vals)
			if !tn.StoredForm {
				kv, ok, err := residualKV(tn, orig, vals)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", m.Dir, err)
				}
				if ok {
					residuals = append(residuals, kv)
				}
			}
		}
		if tn.Rows != nil || tn.Cols != nil {
			// Hugging Face row i goes to stored row Rows[i] (column j to
			// Cols[j]).
			r := shape[0]
			c := len(vals) / r
			out := make([]float64, len(vals))
			for i := 0; i < r; i++ {
				si := i
				if tn.Rows != nil {
					si = tn.Rows[i]
				}
				for j := 0; j < c; j++ {
					sj := j
					if tn.Cols != nil {
						sj = tn.Cols[j]
					}
					out[si*c+sj] = vals[i*c+j]
				}
			}
			vals = out
		}
		if tn.Shape != nil {
			shape = withoutOnes(shape)
		}
		return vals, shape, nil
	}
	// emit writes the values of HF shape (experts stacked first) as the
	// GGUF tensor g (from the Hugging Face tensor hf, for messages).
	emit := func(g, hf string, vals []float64, shape []int, heads int) error {
		dims := make([]int64, len(shape))
		for i, d := range shape {
			dims[len(shape)-1-i] = int64(d)
		}
		cols := shape[len(shape)-1]
		rows := len(vals) / cols
		typ := F32
		if len(shape) >= 2 {
			var err error
			if typ, err = ft.tensorType(g, int64(cols), mix); err != nil {
				return fmt.Errorf("%s: convert to %s: %w", m.Dir, ft.Name, err)
			}
		}
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v)
			if float64(f[i]) != v && !math.IsNaN(v) && typ != F16 {
				return fmt.Errorf("%s: convert: tensor %q element %d = %v is not a float32", m.Dir, hf, i, v)
			}
		}
		if heads > 0 {
			data := make([]byte, 4*len(f))
			for i, v := range f {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
			if err := Permute(data, rows, cols, 4, heads); err != nil {
				return fmt.Errorf("%s: %w", g, err)
			}
			for i := range f {
				f[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}
		var data []byte
		switch typ {
		case F32:
			data = make([]byte, 4*len(f))
			for i, v := range f {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		case F16:
			data = make([]byte, 2*len(f))
			for i, v := range f {
				binary.LittleEndian.PutUint16(data[2*i:], f32ToF16(v))
			}
		default:
			// Quantize the (permuted) float32 rows, as llama.cpp
			// quantizes the F32 file (row by row: the experts of a
			// stacked tensor are whole rows).
			var err error
			if data, err = ggml.Quantize(typ, f, cols); err != nil {
				return fmt.Errorf("%s: convert: tensor %q: %w", m.Dir, g, err)
			}
		}
		ts = append(ts, WriteTensor{Name: g, Dims: dims, Type: typ, Data: data})
		return nil
	}
	if decl.Tensors != nil {
		extra, err := decl.Tensors(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.Dir, err)
		}
		ts = append(ts, extra...)
	}
	if ropeFreqs != nil {
		ts = append(ts, WriteTensor{Name: ropeFreqsName, Dims: []int64{int64(spec.HeadDim / 2)}, Type: F32, Data: ropeFreqs})
	}
	stacked := map[string]bool{} // expert tensors written
	for k, tn := range table.order {
		if tn.Expert < 0 {
			f, shape, err := read(tn)
			if err != nil {
				return nil, nil, err
			}
			if err := emit(tn.GGUF, tn.HF, f, shape, permuted[tn.HF]); err != nil {
				return nil, nil, err
			}
			continue
		}
		if stacked[tn.GGUF] {
			continue
		}
		stacked[tn.GGUF] = true
		// A stacked expert tensor: every entry of the table naming the
		// same GGUF tensor, experts 0, 1, ... in order.
		var all []float64
		var shape []int
		n := 0
		for _, x := range table.order[k:] {
			if x.GGUF != tn.GGUF {
				continue
			}
			if x.Expert != n {
				return nil, nil, fmt.Errorf("gguf: convert: %s: expert %d where %d was expected", tn.GGUF, x.Expert, n)
			}
			f, sh, err := read(x)
			if err != nil {
				return nil, nil, err
			}
			if shape != nil && (sh[0] != shape[1] || sh[1] != shape[2]) {
				return nil, nil, fmt.Errorf("%s: convert: %s has shape %v, expert 0 %v", m.Dir, x.HF, sh, shape[1:])
			}
			shape = []int{0, sh[0], sh[1]}
			all = append(all, f...)
			n++
		}
		shape[0] = n
		if err := emit(tn.GGUF, tn.HF, all, shape, 0); err != nil {
			return nil, nil, err
		}
	}
	var unused []string
	for _, n := range m.Names() {
		if !used[n] && !ignoredName(n, spec.Ignored) {
			unused = append(unused, n)
		}
	}
	if len(unused) > 0 {
		return nil, nil, fmt.Errorf("%w: %s: convert: %d tensors the %s architecture does not use: %s", ErrUnsupported, m.Dir, len(unused), cfg.ModelType, strings.Join(unused, ", "))
	}
	return append(kvs, residuals...), ts, nil
}

// ConvertFile converts the checkpoint directory dir into the GGUF file out
// (written through a temporary file and renamed).
func ConvertFile(dir, out string, o ConvertOptions) error {
	m, err := arch.OpenDir(dir)
	if err != nil {
		return err
	}
	defer m.Close()
	kvs, ts, err := Convert(m, o)
	if err != nil {
		return err
	}
	return atomicfile.Write(out, 0o644, func(w io.Writer) error { return Write(w, kvs, ts) })
}

// tokenizerJSON is the part of tokenizer.json the converter reads.
type tokenizerJSON struct {
	Model struct {
		Type         string          `json:"type"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
		IgnoreMerges bool            `json:"ignore_merges"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
}

// looksSpecial is convert_hf_to_gguf's does_token_look_special: added
// tokens written as control tokens although not marked special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<\uff5c") && strings.HasSuffix(s, "\uff5c>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// addSpecialFlags is gguf-py's SpecialVocab reading of add_bos/add_eos: the
// first/last special token of a TemplateProcessing's single template (in a
// Sequence too) being the BOS/EOS token, overridden by tokenizer_config.json's
// add_bos_token/add_eos_token; nil entries are not set.
func addSpecialFlags(post json.RawMessage, configPath, bos, eos string) (addBOS, addEOS *bool, err error) {
	type tmpl struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	}
	var top tmpl
	if len(post) > 0 && string(post) != "null" {
		if err := json.Unmarshal(post, &top); err != nil {
			return nil, nil, fmt.Errorf("post_processor: %w", err)
		}
	}
	procs := []tmpl{top}
	if top.Type == "Sequence" {
		procs = procs[:0]
		for _, raw := range top.Processors {
			var p tmpl
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, nil, fmt.Errorf("post_processor: %w", err)
			}
			procs = append(procs, p)
		}
	}
	t, f := true, false
	for _, p := range procs {
		if p.Type != "TemplateProcessing" || len(p.Single) < 2 {
			continue
		}
		if st := p.Single[0].SpecialToken; st != nil {
			addBOS = &f
			if st.ID == bos {
				addBOS = &t
			}
		}
		if st := p.Single[len(p.Single)-1].SpecialToken; st != nil {
			addEOS = &f
			if st.ID == eos {
				addEOS = &t
			}
		}
	}
	data, err := os.ReadFile(configPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return addBOS, addEOS, nil
		}
		return nil, nil, err
	}
	var c struct {
		AddBOS json.RawMessage `json:"add_bos_token"`
		AddEOS json.RawMessage `json:"add_eos_token"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", configPath, err)
	}
	for _, x := range []struct {
		raw json.RawMessage
		dst **bool
	}{{c.AddBOS, &addBOS}, {c.AddEOS, &addEOS}} {
		var b bool
		if len(x.raw) > 0 && json.Unmarshal(x.raw, &b) == nil {
			*x.dst = &b
		}
	}
	return addBOS, addEOS, nil
}

// Token types of tokenizer.ggml.token_type (llama.h's llama_token_type).
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
	tokenUnused      = 5
	tokenByte        = 6
)

// tokenizerKVs maps tokenizer.json onto tokenizer.ggml.* metadata as
// convert_hf_to_gguf.py does: a byte-level BPE as "gpt2" with its merges
// and the tokenizer.ggml.pre label of its pipeline (hfPres; "default" for
// others), a BPE with byte fallback (llama/mistral sentencepiece
// conversions) as "llama" (scores 0: such a file is not rebuilt into a
// tokenizer by qppl). Ids the tokenizer lacks up to the vocabulary size
// are "[PAD<id>]" unused tokens; added tokens are control tokens when
// special or looking special, else user-defined; add_bos/add_eos follow
// gguf-py's SpecialVocab (post-processor template, tokenizer_config.json).
func tokenizerKVs(path string, vocab int, cfg *checkpoint.Config) ([]KV, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: convert: the tokenizer is needed for tokenizer.ggml.* metadata: %w", err)
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("%w: %s: convert: tokenizer model %q (want BPE)", ErrUnsupported, path, tj.Model.Type)
	}
	tokens := make([]string, vocab)
	types := make([]int32, vocab)
	set := make([]bool, vocab)
	put := func(id int, s string, typ int32) error {
		if id < 0 || id >= vocab {
			return fmt.Errorf("%w: %s: token %q has id %d outside the model's vocabulary of %d", ErrFormat, path, s, id, vocab)
		}
		tokens[id], types[id], set[id] = s, typ, true
		return nil
	}
	for s, id := range tj.Model.Vocab {
		typ := int32(tokenNormal)
		if tj.Model.ByteFallback && len(s) == 6 && strings.HasPrefix(s, "<0x") && strings.HasSuffix(s, ">") {
			typ = tokenByte
		}
		if err := put(id, s, typ); err != nil {
			return nil, err
		}
	}
	for _, t := range tj.AddedTokens {
		typ := int32(tokenUserDefined)
		if t.Special || looksSpecial(t.Content) {
			typ = tokenControl
		}
		if err := put(t.ID, t.Content, typ); err != nil {
			return nil, err
		}
	}
	for i := range tokens {
		if !set[i] {
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), tokenUnused
		}
	}
	model := "gpt2"
	if tj.Model.ByteFallback {
		model = "llama"
	}
	kvs := []KV{{"tokenizer.ggml.model", StringValue(model)}}
	if model == "gpt2" {
		// the label of the Hugging Face pipeline (what llama.cpp's
		// converter finds by tokenizing a test text), "default" when it
		// is none qppl knows
		kvs = append(kvs, KV{"tokenizer.ggml.pre", StringValue(preLabel(tj.Normalizer, tj.PreTokenizer, tj.Model.IgnoreMerges))})
	}
	kvs = append(kvs, KV{"tokenizer.ggml.tokens", StringArray(tokens)})
	if model == "llama" {
		kvs = append(kvs, KV{"tokenizer.ggml.scores", Float32Array(make([]float32, vocab))})
	}
	kvs = append(kvs, KV{"tokenizer.ggml.token_type", Int32Array(types)})
	if model == "gpt2" {
		merges, err := mergeStrings(tj.Model.Merges)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: model.merges: %v", ErrFormat, path, err)
		}
		kvs = append(kvs, KV{"tokenizer.ggml.merges", StringArray(merges)})
	}
	var bosTok, eosTok string
	if cfg.BOSTokenID >= 0 {
		kvs = append(kvs, KV{"tokenizer.ggml.bos_token_id", Uint32Value(uint32(cfg.BOSTokenID))})
		if cfg.BOSTokenID < vocab {
			bosTok = tokens[cfg.BOSTokenID]
		}
	}
	if cfg.EOSTokenID >= 0 {
		kvs = append(kvs, KV{"tokenizer.ggml.eos_token_id", Uint32Value(uint32(cfg.EOSTokenID))})
		if cfg.EOSTokenID < vocab {
			eosTok = tokens[cfg.EOSTokenID]
		}
	}
	addBOS, addEOS, err := addSpecialFlags(tj.PostProcessor, filepath.Join(filepath.Dir(path), "tokenizer_config.json"), bosTok, eosTok)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	if addBOS != nil {
		kvs = append(kvs, KV{"tokenizer.ggml.add_bos_token", BoolValue(*addBOS)})
	}
	if addEOS != nil {
		kvs = append(kvs, KV{"tokenizer.ggml.add_eos_token", BoolValue(*addEOS)})
	}
	return kvs, nil
}

// mergeStrings reads BPE merges written as "a b" strings or ["a", "b"]
// pairs.
func mergeStrings(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		return ss, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, err
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}

// RopeScalingKey is a metadata key qppl's converter adds beside llama.cpp's
// rope_freqs.weight: the Hugging Face rope_scaling object (JSON) the
// factors were computed from. llama.cpp ignores it; OpenModel uses it, once
// it has checked that it reproduces rope_freqs.weight bit for bit, to
// compute RoPE exactly as transformers does.
const RopeScalingKey = "qppl.rope_scaling"

// ropeFreqsName is llama.cpp's tensor of per-dimension RoPE factors: the
// rotation frequency of dimension pair i is freq_base^(-2i/D) / factor[i].
const ropeFreqsName = "rope_freqs.weight"

// llama3Factors returns llama.cpp's rope_freqs factors for transformers'
// llama3 RoPE scaling (convert_hf_to_gguf.py's LlamaModel), rounded to
// float32: 1 for high frequencies, factor for low ones, and
// 1/((1-smooth)/factor + smooth) between.
func llama3Factors(dim int, theta float64, rs *checkpoint.RopeScaling) []float32 {
	old := float64(rs.OriginalMaxPositionEmbeddings)
	lowWavelen, highWavelen := old/rs.LowFreqFactor, old/rs.HighFreqFactor
	out := make([]float32, dim/2)
	for i := range out {
		freq := 1 / math.Pow(theta, float64(2*i)/float64(dim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(rs.Factor)
		default:
			smooth := (old/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/rs.Factor + smooth))
		}
	}
	return out
}

// ignoredName reports a tensor under one of the architecture's ignored
// prefixes (a vision tower, multi-token prediction), which llama.cpp's
// text conversion does not write either.
func ignoredName(n string, ps []checkpoint.IgnoredPrefix) bool {
	for _, p := range ps {
		if strings.HasPrefix(n, p.Prefix) {
			return true
		}
	}
	return false
}

// fusedExpertSource returns a reader of an expert's 2-D weight from the
// fused 3-D tensors transformers ≥ 5 writes (arch.Spec.FusedExperts:
// experts.gate_up_proj [E, 2·I, hidden], gate rows first, as llama.cpp's
// Qwen2MoeModel.modify_tensors splits it; experts.down_proj [E, hidden,
// I]) when the checkpoint has no per-expert tensor; it returns nil values
// for any other tensor. The fused tensors it reads are marked used.
func fusedExpertSource(m *checkpoint.Model, spec *arch.Spec, used map[string]bool) func(TensorName) ([]float64, []int, error) {
	type part struct {
		fused string
		e     int
		half  int // 0 gate, 1 up, -1 down
	}
	parts := map[string]part{}
	for i := 0; i < spec.Layers; i++ {
		if !spec.Sparse(i) {
			continue
		}
		gu, dn := spec.FusedExperts(i)
		for e := 0; e < spec.MoE.Experts; e++ {
			g, u, d := spec.Expert(i, e)
			parts[g+".weight"], parts[u+".weight"], parts[d+".weight"] = part{gu, e, 0}, part{gu, e, 1}, part{dn, e, -1}
		}
	}
	var lastName string
	var last []float64
	var lastShape []int
	return func(tn TensorName) ([]float64, []int, error) {
		p, ok := parts[tn.HF]
		if tn.Expert < 0 || !ok {
			return nil, nil, nil
		}
		if _, ok := m.Tensor(tn.HF); ok {
			return nil, nil, nil // per-expert tensors: read as they are
		}
		if p.fused != lastName {
			v, shape, err := m.ReadFloat64(p.fused)
			if err != nil {
				return nil, nil, err
			}
			if len(shape) != 3 || shape[0] != spec.MoE.Experts || (p.half >= 0 && shape[1]%2 != 0) {
				return nil, nil, fmt.Errorf("%w: %s: convert: fused expert tensor %q has shape %v", ErrFormat, m.Dir, p.fused, shape)
			}
			lastName, last, lastShape = p.fused, v, shape
			used[p.fused] = true
		}
		rows, cols := lastShape[1], lastShape[2]
		r0, n := 0, rows
		if p.half >= 0 {
			n = rows / 2
			r0 = p.half * n
		}
		off := (p.e*rows + r0) * cols
		return append([]float64(nil), last[off:off+n*cols]...), []int{n, cols}, nil
	}
}
