package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// File names of a Hugging Face model directory.
const (
	ConfigFile      = "config.json"
	SafetensorsFile = "model.safetensors"
	IndexFile       = "model.safetensors.index.json"
)

// Model is a checkpoint directory: config.json plus its safetensors shards.
// The shard files stay open until Close, mapped read-only where the system
// allows (see mapping): the bytes ReadRaw returns must not be modified and
// are valid until Close.
type Model struct {
	Dir    string
	Config *Config

	files   []*File // in shard order
	closers []io.Closer
	tensors map[string]TensorInfo
	owner   map[string]*File
	names   []string

	usageMu sync.Mutex
	usage   []*Usage // active TrackUsage recorders
}

// OpenDir opens a model directory: config.json and either model.safetensors
// or model.safetensors.index.json with its shards. Every header is
// validated; no tensor data is read.
func OpenDir(dir string) (*Model, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	data, err := readSmallFile(cfgPath, ErrConfig)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: no %s in the model directory", ErrNotFound, cfgPath, ConfigFile)
		}
		return nil, err
	}
	cfg, err := ParseConfig(data, cfgPath)
	if err != nil {
		return nil, err
	}
	if cfg.QuantizationConfig == nil {
		if err := readQuantizationFiles(dir, cfg); err != nil {
			return nil, err
		}
	}
	m := &Model{Dir: dir, Config: cfg, tensors: make(map[string]TensorInfo), owner: make(map[string]*File)}
	if err := m.openTensors(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *Model) openTensors() error {
	single := filepath.Join(m.Dir, SafetensorsFile)
	if _, err := os.Stat(single); err == nil {
		f, err := m.openFile(single)
		if err != nil {
			return err
		}
		for _, n := range f.names {
			m.tensors[n] = f.tensors[n]
			m.owner[n] = f
		}
		m.names = f.Names()
		return nil
	}
	idxPath := filepath.Join(m.Dir, IndexFile)
	data, err := readSmallFile(idxPath, ErrFormat)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s: neither %s nor %s", ErrNotFound, m.Dir, SafetensorsFile, IndexFile)
		}
		return err
	}
	idx, err := ParseIndex(data, idxPath)
	if err != nil {
		return err
	}
	byShard := make(map[string]*File)
	for _, shard := range idx.Shards() {
		path := filepath.Join(m.Dir, shard)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s names %s (for %d tensors), which does not exist", ErrNotFound, idxPath, shard, idx.countIn(shard))
		}
		f, err := m.openFile(path)
		if err != nil {
			return err
		}
		byShard[shard] = f
		for _, n := range f.names {
			if prev, dup := m.owner[n]; dup {
				return fmt.Errorf("%w: %s: tensor %q is in both %s and %s", ErrFormat, idxPath, n, prev.name, f.name)
			}
			m.tensors[n] = f.tensors[n]
			m.owner[n] = f
		}
	}
	for _, n := range sortedKeys(idx.WeightMap) {
		shard := idx.WeightMap[n]
		if _, ok := byShard[shard].tensors[n]; !ok {
			return fmt.Errorf("%w: %s: tensor %q mapped to %s is not in that shard", ErrFormat, idxPath, n, shard)
		}
	}
	m.names = sortedKeys(m.tensors)
	return nil
}

// MaxJSONFileSize bounds config.json and model.safetensors.index.json (real
// ones are kilobytes to a few megabytes), so that a huge or endless file
// (a FIFO, /dev/zero) is rejected instead of read into memory.
const MaxJSONFileSize = MaxHeaderSize

// readSmallFile reads a JSON file of at most MaxJSONFileSize bytes; a larger
// one is an error wrapping sentinel, naming the file. Errors from the file
// system keep their fs error (errors.Is(err, fs.ErrNotExist) holds).
func readSmallFile(path string, sentinel error) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	tooBig := fmt.Errorf("%w: %s: larger than %d bytes", sentinel, path, MaxJSONFileSize)
	if st, err := f.Stat(); err == nil && st.Size() > MaxJSONFileSize {
		return nil, tooBig // a regular file: known before reading
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxJSONFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > MaxJSONFileSize {
		return nil, tooBig
	}
	return data, nil
}

func (m *Model) openFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, path, err)
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
	f, err := Open(fh, st.Size(), path)
	if err != nil {
		return nil, err
	}
	if mp, ok := mapFile(fh, st.Size()); ok {
		f.mapped = mp
		m.closers = append(m.closers, mp)
	}
	m.files = append(m.files, f)
	return f, nil
}

// Files returns the safetensors files, in shard order.
func (m *Model) Files() []*File { return append([]*File(nil), m.files...) }

// Tensor returns the description of a tensor and marks it as used (see
// TrackUsage; Peek does not mark).
func (m *Model) Tensor(name string) (TensorInfo, bool) {
	t, ok := m.tensors[name]
	if ok {
		m.mark(name)
	}
	return t, ok
}

// Has reports whether the checkpoint holds the named tensor.
func (m *Model) Has(name string) bool { _, ok := m.tensors[name]; return ok }

// Names returns all tensor names, sorted.
func (m *Model) Names() []string { return append([]string(nil), m.names...) }

// TotalBytes returns the sum of all tensor sizes.
func (m *Model) TotalBytes() int64 {
	var s int64
	for _, t := range m.tensors {
		s += t.Size
	}
	return s
}

func (m *Model) lookup(name string) (*File, error) {
	f, ok := m.owner[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s: tensor %q is not in the checkpoint", ErrNotFound, m.Dir, name)
	}
	m.mark(name)
	return f, nil
}

// ReadRaw returns the raw little-endian bytes of a tensor.
func (m *Model) ReadRaw(name string) ([]byte, error) {
	f, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	return f.ReadRaw(name)
}

// Section returns a reader over a tensor's bytes, for streaming.
func (m *Model) Section(name string) (*io.SectionReader, error) {
	f, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	return f.Section(name)
}

// ReadFloat64 decodes a tensor of a float or integer dtype exactly into
// float64, returning its values (row-major) and shape.
func (m *Model) ReadFloat64(name string) ([]float64, []int, error) {
	f, err := m.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	return f.ReadFloat64(name)
}

// Close closes the shard files. It is safe to call more than once.
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

// Index is model.safetensors.index.json.
type Index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// Shards returns the distinct shard file names, sorted.
func (ix *Index) Shards() []string {
	set := make(map[string]bool)
	for _, s := range ix.WeightMap {
		set[s] = true
	}
	return sortedKeys(set)
}

// ParseIndex parses and checks a shard index: a non-empty weight_map whose
// shard names are plain file names inside the model directory.
func ParseIndex(data []byte, name string) (*Index, error) {
	var ix Index
	if err := json.Unmarshal(data, &ix); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
	}
	if len(ix.WeightMap) == 0 {
		return nil, fmt.Errorf("%w: %s: empty or missing weight_map", ErrFormat, name)
	}
	for _, t := range sortedKeys(ix.WeightMap) {
		s := ix.WeightMap[t]
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) || strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("%w: %s: tensor %q: shard %q is not a plain file name", ErrFormat, name, t, s)
		}
	}
	return &ix, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// countIn returns how many tensors the index maps to shard.
func (ix *Index) countIn(shard string) int {
	n := 0
	for _, s := range ix.WeightMap {
		if s == shard {
			n++
		}
	}
	return n
}

// QuantizationSideFiles lists the files beside config.json in which
// quantizers without a quantization_config left their settings: AutoGPTQ's
// quantize_config.json, AutoAWQ's quant_config.json, NVIDIA ModelOpt's
// hf_quant_config.json (as vLLM's get_quant_config finds them).
func QuantizationSideFiles() []string {
	return []string{"quantize_config.json", "quant_config.json", "hf_quant_config.json"}
}

// readQuantizationFiles loads the QuantizationSideFiles present in dir into
// cfg.QuantizationFiles; each must be a JSON object.
func readQuantizationFiles(dir string, cfg *Config) error {
	for _, name := range QuantizationSideFiles() {
		p := filepath.Join(dir, name)
		data, err := readSmallFile(p, ErrConfig)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		t := bytes.TrimSpace(data)
		var obj map[string]json.RawMessage
		if len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &obj) != nil {
			return fmt.Errorf("%w: %s: not a JSON object", ErrConfig, p)
		}
		if cfg.QuantizationFiles == nil {
			cfg.QuantizationFiles = map[string]json.RawMessage{}
		}
		cfg.QuantizationFiles[name] = append(json.RawMessage(nil), t...)
	}
	return nil
}
