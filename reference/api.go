// Package reference is the ground-truth backend: the Hugging Face causal-LM
// forward pass computed in float64 with gonum.
//
// CONTRACT SKELETON: the exported names below are used by other packages.
// The owner of this package may add to them but must keep these signatures.
package reference

import (
	"context"
	"errors"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
)

// Options configures the reference backend.
type Options struct {
	Threads int // BLAS parallelism hint; 0 = GOMAXPROCS
}

// Backend implements backends.Backend (and LogProber, Prober).
type Backend struct{}

// New opens the reference backend over an opened checkpoint.
func New(m *checkpoint.Model, opt Options) (*Backend, error) {
	return nil, errors.New("reference: not implemented yet")
}

var _ backends.Backend = (*Backend)(nil)

func (b *Backend) Info() backends.Info { return backends.Info{Name: "reference", Precision: "fp64"} }
func (b *Backend) Close() error        { return nil }

// Score implements backends.Backend.
func (b *Backend) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	return backends.Scores{}, errors.New("reference: not implemented yet")
}
