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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

// Options configures OpenModel.
type Options struct {
	// Decoder decodes the tensor types; nil is GGMLDecoder (every type
	// package ggml decodes). A model holding a type the decoder refuses is
	// refused by OpenModel, naming the tensor and type.
	Decoder Decoder
	// Inspect opens the model for its headers only (qppl inspect): types
	// without a decoder are not refused at open; reading such a tensor
	// still fails.
	Inspect bool
}

// Model is a GGUF model (one file or all parts of a split file) seen as a
// Hugging Face checkpoint: Config is the config.json its metadata
// describes, and tensors are addressed by their Hugging Face names
// (model.layers.0.self_attn.q_proj.weight), mapped onto the GGUF names
// (blk.0.attn_q.weight).
type Model struct {
	Path   string // the path given to OpenModel
	Files  []*File
	Arch   string // general.architecture
	Config *checkpoint.Config
	Spec   *arch.Spec

	decode  Decoder
	closers []io.Closer
	tensors map[string]TensorInfo // by GGUF name
	owner   map[string]*File
	// decl is general.architecture's declaration (arch_<name>.go), table
	// its tensor names for Spec.
	decl  Arch
	table *tensorTable
	// freqFactors are rope_freqs.weight's factors when they are applied
	// as llama.cpp does (no RopeScalingKey), nil otherwise.
	freqFactors []float64
	inspectOnly bool

	usageMu sync.Mutex
	usage   []*Usage // active TrackUsage recorders
}

// splitName matches llama.cpp's split file names, PREFIX-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// OpenModel opens a .gguf file, or every part of a split model when path
// names one of its parts, validates every header, resolves the
// architecture from general.architecture and the <arch>.* keys, and checks
// that every tensor the architecture needs is present with its shape and
// that no tensor would go unused. Only the first block of one tensor of
// each type is read: a type the decoder does not decode is refused here,
// naming the tensor and type (unless opt.Inspect).
func OpenModel(path string, opt Options) (*Model, error) {
	m := &Model{Path: path, decode: opt.Decoder, inspectOnly: opt.Inspect, tensors: map[string]TensorInfo{}, owner: map[string]*File{}}
	if m.decode == nil {
		m.decode = GGMLDecoder
	}
	if err := m.open(path); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.resolve(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close closes the files. It is safe to call more than once.
func (m *Model) Close() error {
	var first error
	for _, c := range m.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.closers = nil
	return first
}

func (m *Model) openFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %w", checkpoint.ErrNotFound, path, err)
		}
		return nil, err
	}
	m.closers = append(m.closers, fh)
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: not a regular file", ErrFormat, path)
	}
	return Open(fh, st.Size(), path)
}

func (m *Model) open(path string) error {
	paths := []string{path}
	if sm := splitName.FindStringSubmatch(filepath.Base(path)); sm != nil {
		n, _ := strconv.Atoi(sm[3])
		if k, _ := strconv.Atoi(sm[2]); n < 1 || k < 1 || k > n {
			return fmt.Errorf("%w: %s: split file name says part %s of %s", ErrFormat, path, sm[2], sm[3])
		}
		paths = paths[:0]
		for i := 1; i <= n; i++ {
			paths = append(paths, filepath.Join(filepath.Dir(path), fmt.Sprintf("%s-%05d-of-%05d.gguf", sm[1], i, n)))
		}
	}
	for i, p := range paths {
		f, err := m.openFile(p)
		if err != nil {
			return err
		}
		if err := checkSplit(f, i, len(paths)); err != nil {
			return err
		}
		m.Files = append(m.Files, f)
		for _, ti := range f.Tensors {
			if prev, dup := m.owner[ti.Name]; dup {
				return fmt.Errorf("%w: %s: tensor %q is also in %s", ErrFormat, p, ti.Name, prev.Path)
			}
			m.tensors[ti.Name] = ti
			m.owner[ti.Name] = f
		}
	}
	if v, ok := m.Files[0].Get("split.tensors.count"); ok {
		n, ok := v.Int()
		if !ok || n != int64(len(m.tensors)) {
			return fmt.Errorf("%w: %s: metadata \"split.tensors.count\" = %v, the %d parts hold %d tensors", ErrFormat, m.Files[0].Path, v, len(paths), len(m.tensors))
		}
	}
	return nil
}

// checkSplit checks a file's split.no and split.count against its place
// among n parts.
func checkSplit(f *File, i, n int) error {
	count, no := int64(1), int64(0)
	if v, ok := f.Get("split.count"); ok {
		c, ok := v.Int()
		if !ok {
			return fmt.Errorf("%w: %s: metadata \"split.count\" = %v is not an integer", ErrFormat, f.Path, v)
		}
		count = c
	}
	if v, ok := f.Get("split.no"); ok {
		c, ok := v.Int()
		if !ok {
			return fmt.Errorf("%w: %s: metadata \"split.no\" = %v is not an integer", ErrFormat, f.Path, v)
		}
		no = c
	}
	if count != int64(n) || no != int64(i) {
		if n == 1 {
			return fmt.Errorf("%w: %s: metadata says it is part %d of a %d-part split model, but its name is not PREFIX-%05d-of-%05d.gguf", ErrFormat, f.Path, no+1, count, no+1, count)
		}
		return fmt.Errorf("%w: %s: metadata \"split.no\"/\"split.count\" = %d/%d, its name says part %d of %d", ErrFormat, f.Path, no, count, i+1, n)
	}
	return nil
}

// meta returns a metadata value of the first file.
func (m *Model) meta(key string) (Value, bool) { return m.Files[0].Get(key) }

func (m *Model) metaErr(key string, v Value, want string) error {
	return fmt.Errorf("%w: %s: metadata %q = %v (%s): %s", ErrFormat, m.Files[0].Path, key, v, v.Type, want)
}

// metaInt reads a non-negative integer key; def < 0 makes it required.
// llama.cpp stores some per-layer keys as arrays: an array whose elements
// are all equal is read as that value.
func (m *Model) metaInt(key string, def int64) (int64, error) {
	v, ok := m.meta(key)
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("%w: %s: metadata %q is missing", ErrFormat, m.Files[0].Path, key)
		}
		return def, nil
	}
	if a, ok := v.Array(); ok && a.Len > 0 && a.Elem != TypeArray && a.Elem != TypeString {
		first, _ := a.At(0).Int()
		for i := 1; i < a.Len; i++ {
			if x, _ := a.At(i).Int(); x != first {
				return 0, fmt.Errorf("%w: %s: metadata %q: per-layer values differ (%v at layer 0, %v at layer %d)", ErrUnsupported, m.Files[0].Path, key, first, x, i)
			}
		}
		v = a.At(0)
	}
	n, ok := v.Int()
	if !ok || n < 0 || n > math.MaxInt32 {
		return 0, m.metaErr(key, v, "want a non-negative integer")
	}
	return n, nil
}

// metaFloat reads a float key. A float32 is taken as the shortest decimal
// that rounds to it (what the converter was given: 1e-05, not
// 9.99999974737875e-06), so the config equals the Hugging Face one.
func (m *Model) metaFloat(key string, def float64) (float64, error) {
	v, ok := m.meta(key)
	if !ok {
		if math.IsNaN(def) {
			return 0, fmt.Errorf("%w: %s: metadata %q is missing", ErrFormat, m.Files[0].Path, key)
		}
		return def, nil
	}
	f, ok := v.Float()
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, m.metaErr(key, v, "want a finite float")
	}
	if v.Type == TypeFloat32 {
		f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
	}
	return f, nil
}

// resolve builds Config and Spec from the metadata and checks the tensors.
func (m *Model) resolve() error {
	path := m.Files[0].Path
	v, ok := m.meta("general.architecture")
	if !ok {
		return fmt.Errorf("%w: %s: metadata \"general.architecture\" is missing", ErrFormat, path)
	}
	a, ok := v.Str()
	if !ok {
		return m.metaErr("general.architecture", v, "want a string")
	}
	m.Arch = a
	decl, ok := lookupArch(a)
	if !ok {
		return fmt.Errorf("%w: %s: general.architecture %q (supported: %s)", ErrUnsupported, path, a, strings.Join(archNames(), ", "))
	}
	m.decl = decl
	cfg := map[string]any{"hidden_act": "silu", "torch_dtype": "float32"}
	ints := []struct {
		key, hf string
		def     int64
	}{
		{"embedding_length", "hidden_size", -1},
		{"block_count", "num_hidden_layers", -1},
		{"feed_forward_length", "intermediate_size", -1},
		{"attention.head_count", "num_attention_heads", -1},
		{"context_length", "max_position_embeddings", 0},
	}
	if decl.MoEOnly {
		ints[2].def = 0 // no dense width
	}
	for _, k := range ints {
		if decl.owns(k.key) {
			continue
		}
		n, err := m.metaInt(a+"."+k.key, k.def)
		if err != nil {
			return err
		}
		if n == 0 && k.def < 0 {
			return fmt.Errorf("%w: %s: metadata %q is 0", ErrFormat, path, a+"."+k.key)
		}
		if n > 0 {
			cfg[k.hf] = n
		}
	}
	heads := cfg["num_attention_heads"].(int64)
	if !decl.owns("attention.head_count_kv") {
		kv, err := m.metaInt(a+".attention.head_count_kv", heads)
		if err != nil {
			return err
		}
		cfg["num_key_value_heads"] = kv
	}
	hidden := cfg["hidden_size"].(int64)
	if err := m.readHeadDim(decl, a, cfg, hidden, heads); err != nil {
		return err
	}
	eps, err := m.metaFloat(a+".attention.layer_norm_rms_epsilon", math.NaN())
	if err != nil {
		return err
	}
	cfg["rms_norm_eps"] = eps
	theta, err := m.metaFloat(a+".rope.freq_base", 10000)
	if err != nil {
		return err
	}
	cfg["rope_theta"] = theta
	if !decl.OwnRopeFreqs && !decl.owns("rope.scaling.type") {
		if rs, err := m.ropeScaling(a); err != nil {
			return err
		} else if rs != nil {
			cfg["rope_scaling"] = rs
		}
	}
	return m.resolveRest(decl, a, cfg, hidden)
}

// readHeadDim reads key_length, value_length and rope.dimension_count
// (unless the architecture owns them).
func (m *Model) readHeadDim(decl Arch, a string, cfg map[string]any, hidden, heads int64) error {
	path := m.Files[0].Path
	if decl.owns("attention.key_length") {
		return nil
	}
	headDim := hidden / heads
	if decl.KeyLengthRequired || hidden%heads != 0 {
		headDim = 0 // must come from key_length
	}
	kl, err := m.metaInt(a+".attention.key_length", headDim)
	if err != nil {
		return err
	}
	vl, err := m.metaInt(a+".attention.value_length", kl)
	if err != nil {
		return err
	}
	if kl == 0 || vl != kl {
		return fmt.Errorf("%w: %s: attention key_length %d and value_length %d must be equal and positive", ErrUnsupported, path, kl, vl)
	}
	cfg["head_dim"] = kl
	rd, err := m.metaInt(a+".rope.dimension_count", kl)
	if err != nil {
		return err
	}
	switch {
	case rd != kl && decl.PartialRotary:
		if rd == 0 || rd > kl || rd%2 != 0 {
			return fmt.Errorf("%w: %s: metadata %q = %d: want an even rotary width in (0, %d]", ErrFormat, path, a+".rope.dimension_count", rd, kl)
		}
		cfg["partial_rotary_factor"] = float64(rd) / float64(kl) // Spec.RotaryDim gives rd back (checked below)
	case rd != kl:
		return fmt.Errorf("%w: %s: metadata %q = %d: partial rotary embeddings (head size %d) are not supported", ErrUnsupported, path, a+".rope.dimension_count", rd, kl)
	}
	return nil
}

// resolveRest reads the tokens, the embedding, runs the architecture's
// Config and builds Config, Spec and the tensor table.
func (m *Model) resolveRest(decl Arch, a string, cfg map[string]any, hidden int64) error {
	path := m.Files[0].Path
	for _, k := range []struct{ key, hf string }{{"tokenizer.ggml.bos_token_id", "bos_token_id"}, {"tokenizer.ggml.eos_token_id", "eos_token_id"}} {
		if v, ok := m.meta(k.key); ok {
			if n, ok := v.Int(); ok {
				cfg[k.hf] = n
			}
		}
	}
	emb, ok := m.tensors["token_embd.weight"]
	if !ok {
		return fmt.Errorf("%w: %s: tensor \"token_embd.weight\" is missing", ErrFormat, path)
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != hidden {
		return fmt.Errorf("%w: %s: tensor \"token_embd.weight\" has ne %v, want [%d, vocab]", ErrFormat, path, emb.Dims, hidden)
	}
	cfg["vocab_size"] = emb.Dims[1]
	if n, err := m.metaInt(a+".vocab_size", emb.Dims[1]); err != nil {
		return err
	} else if n != emb.Dims[1] {
		return fmt.Errorf("%w: %s: metadata %q = %d, but token_embd.weight has %d rows", ErrFormat, path, a+".vocab_size", n, emb.Dims[1])
	}
	_, hasOutput := m.tensors["output.weight"]
	cfg["tie_word_embeddings"] = !hasOutput
	if err := decl.Config(m, cfg); err != nil {
		return err
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if m.Config, err = arch.ParseConfig(data, path+" (GGUF metadata)"); err != nil {
		return err
	}
	if m.Spec, err = arch.For(m.Config); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if decl.PartialRotary && !decl.owns("rope.dimension_count") {
		rd, err := m.metaInt(a+".rope.dimension_count", cfg["head_dim"].(int64))
		if err != nil {
			return err
		}
		if m.Spec.RotaryDim != int(rd) {
			return fmt.Errorf("%w: %s: metadata %q = %d is not int(head_dim · partial_rotary_factor) = %d", ErrUnsupported, path, a+".rope.dimension_count", rd, m.Spec.RotaryDim)
		}
	}
	if !decl.OwnRopeFreqs {
		if err := m.checkRopeFreqs(); err != nil {
			return err
		}
	}
	if m.table, err = newTensorTable(decl, m.Spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if decl.FusedGateUp {
		m.fuseGateUp()
	}
	if err := m.checkResiduals(); err != nil {
		return err
	}
	return m.checkTensors()
}

// ropeScaling maps <arch>.rope.scaling.* onto config.json's rope_scaling.
func (m *Model) ropeScaling(a string) (map[string]any, error) {
	path := m.Files[0].Path
	if _, ok := m.tensors[ropeFreqsName]; ok {
		return m.ropeFreqs(a)
	}
	typ := "none"
	if v, ok := m.meta(a + ".rope.scaling.type"); ok {
		s, ok := v.Str()
		if !ok {
			return nil, m.metaErr(a+".rope.scaling.type", v, "want a string")
		}
		typ = s
	}
	factor, err := m.metaFloat(a+".rope.scaling.factor", 0)
	if err != nil {
		return nil, err
	}
	if _, ok := m.meta(a + ".rope.scale_linear"); ok { // older converters
		if factor, err = m.metaFloat(a+".rope.scale_linear", 0); err != nil {
			return nil, err
		}
		if typ == "none" {
			typ = "linear"
		}
	}
	switch {
	case typ == "none" || (typ == "linear" && factor == 1):
		return nil, nil
	case typ == "linear" && factor > 0:
		return map[string]any{"rope_type": "linear", "factor": factor}, nil
	case typ == "linear":
		return nil, fmt.Errorf("%w: %s: linear RoPE scaling with factor %v", ErrFormat, path, factor)
	}
	return nil, fmt.Errorf("%w: %s: metadata %q = %q (supported: none, linear)", ErrUnsupported, path, a+".rope.scaling.type", typ)
}

// fuseGateUp points the experts' gate and up weights of every layer whose
// file holds blk.N.ffn_gate_up_exps.weight (and not ffn_gate_exps nor
// ffn_up_exps) at the fused tensor's halves (TensorName.GateUp); a file
// holding both forms keeps the split one and the usage check names the
// fused tensor as unused.
func (m *Model) fuseGateUp() {
	for hf, tn := range m.table.byHF {
		if tn.Expert < 0 {
			continue
		}
		blk, name, ok := strings.Cut(tn.GGUF, ".ffn_")
		if !ok || name != "gate_exps.weight" && name != "up_exps.weight" {
			continue
		}
		fused := blk + ".ffn_gate_up_exps.weight"
		if !m.has(fused) || m.has(blk+".ffn_gate_exps.weight") || m.has(blk+".ffn_up_exps.weight") {
			continue
		}
		tn.GGUF, tn.GateUp = fused, 1
		if name == "up_exps.weight" {
			tn.GateUp = 2
		}
		m.table.byHF[hf] = tn
	}
	for i, tn := range m.table.order {
		m.table.order[i] = m.table.byHF[tn.HF]
	}
}

// checkTensors checks every tensor the architecture reads (shape in the
// Hugging Face sense, ggml ne reversed) and that no other tensor is in the
// file.
func (m *Model) checkTensors() error {
	used := map[string]bool{}
	if _, ok := m.tensors[ropeFreqsName]; ok {
		used[ropeFreqsName] = true // read by ropeFreqs
	}
	for _, ts := range denseWeights(m.decl, m.Spec) {
		tn := m.table.byHF[ts.Name] // newTensorTable checked it is there
		g := tn.GGUF
		ti, ok := m.tensors[g]
		if !ok {
			return fmt.Errorf("%w: %s: tensor %q (%s) is missing", ErrFormat, m.Files[0].Path, g, ts.Name)
		}
		want := ts.Shape
		if tn.Expert >= 0 {
			// expert e is slice e of the stacked [experts, out, in]
			// (fused gate/up: [experts, 2·out, in])
			want = append([]int{m.Spec.MoE.Experts}, ts.Shape...)
			if tn.GateUp != 0 && len(want) == 3 {
				want[1] *= 2
			}
			if tn.Expert >= m.Spec.MoE.Experts {
				return fmt.Errorf("%w: %s: tensor %q: expert %d of %d", ErrFormat, ti.File, g, tn.Expert, m.Spec.MoE.Experts)
			}
		}
		if tn.Shape != nil && sameShape(ti.Dims, withoutOnes(want)) {
			want = withoutOnes(want) // written without its size-1 dimensions
		}
		if !sameShape(ti.Dims, want) {
			what := fmt.Sprintf("the reverse of %s's %v", ts.Name, ts.Shape)
			if tn.Expert >= 0 {
				what = fmt.Sprintf("%d experts of %s's %v", m.Spec.MoE.Experts, ts.Name, ts.Shape)
			}
			if tn.GateUp != 0 {
				what = fmt.Sprintf("%d experts of gate and up rows, each %s's %v", m.Spec.MoE.Experts, ts.Name, ts.Shape)
			}
			return fmt.Errorf("%w: %s: tensor %q has ne %v, want %v (%s)", ErrFormat, ti.File, g, ti.Dims, reversed(want), what)
		}
		if len(ti.Dims) == 1 && ti.Type != F32 && ti.Type != F16 && ti.Type != BF16 {
			return fmt.Errorf("%w: %s: tensor %q: vector of type %s (norms and biases are F32, F16 or BF16)", ErrUnsupported, ti.File, g, ti.Type)
		}
		if tn.FromGGUF != nil && len(ti.Dims) != 1 {
			return fmt.Errorf("%w: %s: tensor %q: a transformed tensor must be a vector", ErrUnsupported, ti.File, g)
		}
		used[g] = true
	}
	if !m.inspectOnly {
		if err := m.probeTypes(); err != nil {
			return err
		}
	}
	var unused []string
	for n := range m.tensors {
		if !used[n] {
			unused = append(unused, n)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return fmt.Errorf("%w: %s: %d tensors the %s architecture does not use (refusing to ignore them): %s", ErrUnsupported, m.Files[0].Path, len(unused), m.Arch, strings.Join(unused, ", "))
	}
	return nil
}

func sameShape(ne []int64, hf []int) bool {
	if len(ne) != len(hf) {
		return false
	}
	for i := range ne {
		if ne[i] != int64(hf[len(hf)-1-i]) {
			return false
		}
	}
	return true
}

// withoutOnes returns s without its size-1 dimensions.
func withoutOnes(s []int) []int {
	var out []int
	for _, d := range s {
		if d != 1 {
			out = append(out, d)
		}
	}
	return out
}

func reversed(s []int) []int {
	out := make([]int, len(s))
	for i := range s {
		out[i] = s[len(s)-1-i]
	}
	return out
}

// ropeFreqs reads rope_freqs.weight (F32 [head_dim/2], every factor
// positive and finite). With qppl's RopeScalingKey, whose llama3
// parameters must reproduce the tensor bit for bit, RoPE follows
// transformers' llama3 rule exactly; without it, frequencies are
// freq_base^(-2i/D) / factor[i] as llama.cpp applies them (computed in
// float64), which differs from transformers' rule by the float32 rounding
// of the stored factors.
func (m *Model) ropeFreqs(a string) (map[string]any, error) {
	ti := m.tensors[ropeFreqsName]
	path := ti.File
	if ti.Type != F32 || len(ti.Dims) != 1 {
		return nil, fmt.Errorf("%w: %s: tensor %q: %s with ne %v, want F32 [head_dim/2]", ErrFormat, path, ropeFreqsName, ti.Type, ti.Dims)
	}
	raw, err := m.owner[ropeFreqsName].readAt(ti, 0, ti.Size)
	if err != nil {
		return nil, err
	}
	factors := make([]float32, ti.Dims[0])
	if err := PlainDecoder(F32, raw, len(factors), factors); err != nil {
		return nil, err
	}
	for i, f := range factors {
		if !(f > 0) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("%w: %s: tensor %q: factor %d is %v", ErrFormat, path, ropeFreqsName, i, f)
		}
	}
	for _, k := range []string{".rope.scaling.type", ".rope.scaling.factor", ".rope.scale_linear"} {
		if _, ok := m.meta(a + k); ok {
			return nil, fmt.Errorf("%w: %s: both tensor %q and metadata %q scale RoPE", ErrUnsupported, path, ropeFreqsName, a+k)
		}
	}
	v, ok := m.meta(RopeScalingKey)
	if !ok {
		m.freqFactors = make([]float64, len(factors))
		for i, f := range factors {
			m.freqFactors[i] = float64(f)
		}
		return nil, nil
	}
	js, ok := v.Str()
	var rs map[string]any
	if !ok || json.Unmarshal([]byte(js), &rs) != nil {
		return nil, m.metaErr(RopeScalingKey, v, "want a JSON object")
	}
	return rs, nil
}

// checkRopeFreqs checks, once Config is parsed, that RopeScalingKey's
// parameters reproduce rope_freqs.weight exactly.
func (m *Model) checkRopeFreqs() error {
	ti, ok := m.tensors[ropeFreqsName]
	if !ok || m.freqFactors != nil {
		if ok && int(ti.Dims[0]) != m.Spec.HeadDim/2 {
			return fmt.Errorf("%w: %s: tensor %q has %d factors, want head_dim/2 = %d", ErrFormat, ti.File, ropeFreqsName, ti.Dims[0], m.Spec.HeadDim/2)
		}
		return nil
	}
	rs := m.Config.RopeScaling
	if rs == nil || rs.Type != "llama3" {
		return fmt.Errorf("%w: %s: metadata %q must describe llama3 RoPE scaling", ErrFormat, ti.File, RopeScalingKey)
	}
	raw, err := m.owner[ropeFreqsName].readAt(ti, 0, ti.Size)
	if err != nil {
		return err
	}
	want := llama3Factors(m.Spec.HeadDim, m.Config.RopeTheta, rs)
	if int64(len(want)) != ti.Dims[0] {
		return fmt.Errorf("%w: %s: tensor %q has %d factors, want head_dim/2 = %d", ErrFormat, ti.File, ropeFreqsName, ti.Dims[0], len(want))
	}
	for i, w := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != w {
			return fmt.Errorf("%w: %s: tensor %q factor %d = %v, but metadata %q gives %v", ErrFormat, ti.File, ropeFreqsName, i, got, RopeScalingKey, w)
		}
	}
	return nil
}

// RopeInvFreq returns the RoPE inverse frequencies the model uses: the
// architecture's (from the metadata), or, for a rope_freqs.weight without
// RopeScalingKey, freq_base^(-2i/D) / factor[i].
func (m *Model) RopeInvFreq() []float64 {
	inv := m.Spec.RopeInvFreq()
	if m.freqFactors != nil {
		for i := range inv {
			inv[i] /= m.freqFactors[i]
		}
	}
	return inv
}

// Tokens returns tokenizer.ggml.tokens (nil when the file has none).
func (m *Model) Tokens() ([]string, error) {
	v, ok := m.meta("tokenizer.ggml.tokens")
	if !ok {
		return nil, nil
	}
	a, ok := v.Array()
	if !ok {
		return nil, m.metaErr("tokenizer.ggml.tokens", v, "want an array of strings")
	}
	ss, ok := a.Strings()
	if !ok {
		return nil, m.metaErr("tokenizer.ggml.tokens", v, "want an array of strings")
	}
	return ss, nil
}

// CheckVocab compares a tokenizer's vocabulary (n ids, token(id) its
// string) with tokenizer.ggml.tokens: every id must map to the same string,
// except ids past the tokenizer's, which the GGUF may hold as llama.cpp's
// "[PAD<id>]" padding. name names the tokenizer in the error.
func (m *Model) CheckVocab(name string, n int, token func(id int32) (string, bool)) error {
	toks, err := m.Tokens()
	if err != nil {
		return err
	}
	if toks == nil {
		return nil // nothing to compare with
	}
	if n > len(toks) {
		return fmt.Errorf("%w: %s has %d token ids, %s's tokenizer.ggml.tokens %d: the tokenizer does not belong to this model", ErrFormat, name, n, m.Files[0].Path, len(toks))
	}
	bad, first := 0, -1
	for id, g := range toks {
		s, ok := token(int32(id))
		if id >= n || !ok {
			s, ok = fmt.Sprintf("[PAD%d]", id), true // llama.cpp's padding
		}
		if s != g {
			if first < 0 {
				first = id
			}
			bad++
		}
	}
	if bad > 0 {
		s, ok := token(int32(first))
		if !ok {
			s = "(none)"
		}
		return fmt.Errorf("%w: %s disagrees with %s's tokenizer.ggml.tokens on %d of %d ids (first: id %d is %q, the GGUF says %q): the tokenizer does not belong to this model", ErrFormat, name, m.Files[0].Path, bad, len(toks), first, s, toks[first])
	}
	return nil
}

// probeTypes decodes the first block of one tensor of every type in the
// file, so that a type without a decoder is refused when the model is
// opened, naming the tensor and type, not in the middle of a run.
func (m *Model) probeTypes() error {
	seen := map[Type]bool{}
	for _, f := range m.Files {
		for _, ti := range f.Tensors {
			if seen[ti.Type] || ti.Name == ropeFreqsName {
				continue
			}
			seen[ti.Type] = true
			raw, err := f.readAt(ti, 0, int64(ti.Type.TypeSize()))
			if err != nil {
				return err
			}
			dst := make([]float32, ti.Type.BlockSize())
			if err := m.decode(ti.Type, raw, len(dst), dst); err != nil {
				return fmt.Errorf("%s: tensor %q (ggml type %s, id %d): %w", ti.File, ti.Name, ti.Type, uint32(ti.Type), err)
			}
		}
	}
	return nil
}
