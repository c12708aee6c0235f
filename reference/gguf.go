package reference

import (
	"errors"
	"fmt"

	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/quant"
)

// NewGGUF opens the reference backend over an opened GGUF model (package
// gguf): the same forward pass, reading every weight through the model's
// ggml type decoders (with llama.cpp's Q/K row permutation undone for
// llama-architecture files). Every tensor of the file must be read
// (gguf.Usage) unless opt.AllowUnusedTensors. The caller keeps ownership
// of m.
func NewGGUF(m *gguf.Model, opt Options) (*Backend, error) {
	if m == nil || m.Config == nil {
		return nil, errors.New("reference: nil GGUF model")
	}
	if opt.Threads < 0 {
		return nil, fmt.Errorf("reference: Threads %d < 0", opt.Threads)
	}
	usage := m.TrackUsage()
	defer usage.Stop()
	b, err := newBackend(m.Config, ggufSource{m}, opt.Threads)
	if err != nil {
		return nil, err
	}
	if !opt.AllowUnusedTensors {
		if err := usage.Check("reference"); err != nil {
			return nil, fmt.Errorf("reference: %w", err)
		}
	}
	// llama.cpp's rope_freqs factors, when the file has them.
	b.m.invFreq = m.RopeInvFreq()
	return b, nil
}

// ggufSource adapts a gguf.Model to source.
type ggufSource struct{ m *gguf.Model }

func (s ggufSource) Linear(module string) (quant.Linear, error) { return s.m.Linear(module) }
func (s ggufSource) Float64(name string) ([]float64, []int, error) {
	return s.m.Float64(name)
}
func (s ggufSource) Rows(name string) (rowReader, error) { return s.m.Rows(name) }
func (s ggufSource) Where(name string) string            { return s.m.Where(name) }

// GptOssExperts: gpt-oss's experts from their split GGUF tensors.
func (s ggufSource) GptOssExperts(gateUp, down string, experts, hidden, inter int) ([]quant.Linear, []quant.Linear, error) {
	return s.m.GptOssExperts(gateUp, down, experts, hidden, inter)
}

// DecayRate: qwen35 files store A = exp(A_log) (as −A), used exactly.
func (s ggufSource) DecayRate(name string) ([]float64, bool, error) { return s.m.DecayRate(name) }
