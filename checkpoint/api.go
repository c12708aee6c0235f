// Package checkpoint reads and writes Hugging Face model directories:
// validated safetensors files (single or sharded through
// model.safetensors.index.json, read through io.ReaderAt so a model larger
// than memory is never read whole) and config.json. It does no model math.
//
// CONTRACT SKELETON: the exported names below are used by other packages.
// The owner of this package may add to them but must keep these signatures.
package checkpoint

import (
	"encoding/json"
	"errors"
	"io"
)

var errTODO = errors.New("checkpoint: not implemented yet")

// DType is a safetensors dtype name such as "BF16" or "F8_E4M3".
type DType string

// TensorInfo describes one tensor stored in a safetensors file.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int
	File   string // path (or name) of the file holding it
	Offset int64  // absolute byte offset of the data in File
	Size   int64  // bytes
}

// File is one validated safetensors file.
type File struct{}

// Open validates the safetensors header of r (size bytes long). name is used
// in error messages.
func Open(r io.ReaderAt, size int64, name string) (*File, error) { return nil, errTODO }

// Model is a checkpoint directory: config.json plus its safetensors shards.
type Model struct {
	Dir    string
	Config *Config
}

// OpenDir opens a model directory (config.json, model.safetensors or
// model.safetensors.index.json + shards).
func OpenDir(dir string) (*Model, error) { return nil, errTODO }

// Tensor returns the description of a tensor.
func (m *Model) Tensor(name string) (TensorInfo, bool) { return TensorInfo{}, false }

// Names returns all tensor names, sorted.
func (m *Model) Names() []string { return nil }

// ReadRaw returns the raw little-endian bytes of a tensor.
func (m *Model) ReadRaw(name string) ([]byte, error) { return nil, errTODO }

// ReadFloat64 decodes a tensor of a float or integer dtype exactly into
// float64, returning its values (row-major) and shape.
func (m *Model) ReadFloat64(name string) ([]float64, []int, error) { return nil, nil, errTODO }

// Close closes the shard files.
func (m *Model) Close() error { return nil }

// Config is config.json of a causal LM, with Hugging Face transformers'
// field names and defaults applied.
type Config struct {
	ModelType             string
	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int
	HeadDim               int
	MaxPositionEmbeddings int
	RMSNormEps            float64
	RopeTheta             float64
	RopeScaling           *RopeScaling // nil = default
	TieWordEmbeddings     bool
	AttentionBias         bool
	HiddenAct             string
	BOSTokenID            int // -1 when absent
	EOSTokenID            int // -1 when absent
	TorchDtype            string
	QuantizationConfig    json.RawMessage // quantization_config or compression_config; nil when absent
}

// RopeScaling is config.json's rope_scaling.
type RopeScaling struct {
	Type                          string // "default", "linear", "llama3"
	Factor                        float64
	LowFreqFactor                 float64
	HighFreqFactor                float64
	OriginalMaxPositionEmbeddings int
}

// ParseConfig parses config.json; name is used in error messages.
func ParseConfig(data []byte, name string) (*Config, error) { return nil, errTODO }

// WriteTensor is a tensor to write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// WriteFile writes a safetensors file atomically (temp file + rename).
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	return errTODO
}
