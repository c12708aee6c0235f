package hub

import (
	"context"

	"github.com/qppl/qppl/dataset"
)

// LoadWikiText resolves the WikiText-2 raw v1 test split (ResolveWikiText)
// and loads it (dataset.LoadAll, kind detected unless load.Kind is set).
// Join it with Corpus.Text(mode); split it for lm-eval with Corpus.Documents.
func LoadWikiText(ctx context.Context, opts WikiTextOptions, load dataset.LoadOptions) (*dataset.Corpus, Resolved, error) {
	res, err := ResolveWikiText(ctx, opts)
	if err != nil {
		return nil, res, err
	}
	c, err := dataset.LoadAll(res.Paths, load)
	if err != nil {
		return nil, res, err
	}
	return c, res, nil
}
