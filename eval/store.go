package eval

import (
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
)

// BaseStore says where and how a base model's log-probs are stored.
type BaseStore struct {
	Path      string
	Container string // "" = qppl's own (compare.ContainerQPPL)
	Encoding  compare.Encoding
	KLMode    compare.KLMode
	// KLRows is the number of windows with KL in compare_q mode.
	KLRows    int
	ModelHash string
	Vocab     int
}

// CreateBaseStore creates the log-prob store of a base run over the
// windows ws of the token stream tokens (data spec spec, hash specHash),
// keyed by the data spec and the model files. A layout the windows do not
// allow is an *InputError.
func CreateBaseStore(o BaseStore, ws []backends.Window, tokens []int32, spec compare.DataSpec, specHash string) (*compare.StoreWriter, error) {
	klRows := 0
	if o.KLMode == compare.KLCompareQ {
		klRows = o.KLRows
	}
	layout, err := compare.StoreLayout(ws, o.KLMode, klRows)
	if err != nil {
		return nil, Input(err)
	}
	container := o.Container
	if container == "" {
		container = compare.ContainerQPPL
	}
	h := compare.StoreHeader{
		Container: container, Encoding: o.Encoding, Vocab: o.Vocab, KLMode: o.KLMode, KLRows: klRows,
		DataSpecHash: specHash, ModelHash: o.ModelHash, TokensHash: spec.TokensHash,
		Method: spec.Method, Ctx: spec.Ctx, Stride: spec.Stride, Rows: spec.Rows, Windows: layout,
		TargetTopK: compare.StoreTopK, // the base run's exact NLL and top ids (store version 2)
	}
	return compare.CreateStore(o.Path, h, tokens)
}
