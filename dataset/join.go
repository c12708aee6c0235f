package dataset

import (
	"fmt"
	"strings"
)

// JoinMode is how the rows of a row-based corpus become one text.
type JoinMode string

// The join modes, named as users of each tool know them.
const (
	// JoinCompareQ is ExLlamaV3 compare_q classic and the HF perplexity
	// guide: "\n\n".join(rows) with the empty rows kept. The default.
	JoinCompareQ JoinMode = "compare_q"
	// JoinFiltered is compare_q's final version: rows whose Python
	// t.strip() is empty are dropped, then "\n\n".join.
	JoinFiltered JoinMode = "filtered"
	// JoinLlamaCpp is what llama-perplexity tokenizes: the wiki.test.raw file
	// ("".join(row or " \n")) with one trailing "\n" removed, as llama.cpp's
	// -f option does.
	JoinLlamaCpp JoinMode = "llamacpp"
)

// JoinModes returns the accepted join-mode names in documentation order.
func JoinModes() []JoinMode { return []JoinMode{JoinCompareQ, JoinFiltered, JoinLlamaCpp} }

// ParseJoinMode maps a name to a JoinMode; "" means JoinCompareQ.
func ParseJoinMode(s string) (JoinMode, error) {
	switch JoinMode(s) {
	case "", JoinCompareQ:
		return JoinCompareQ, nil
	case JoinFiltered, JoinLlamaCpp:
		return JoinMode(s), nil
	}
	switch s {
	case "compareq", "compare-q", "classic":
		return JoinCompareQ, nil
	case "llama.cpp", "llama-cpp":
		return JoinLlamaCpp, nil
	}
	return "", fmt.Errorf("dataset: unknown join mode %q (want compare_q, filtered or llamacpp)", s)
}

// JoinCompareQRows returns "\n\n".join(rows), empty rows kept.
func JoinCompareQRows(rows []string) string { return strings.Join(rows, "\n\n") }

// JoinFilteredRows returns "\n\n".join(t for t in rows if t.strip()).
func JoinFilteredRows(rows []string) string {
	kept := make([]string, 0, len(rows))
	for _, r := range rows {
		if !isBlank(r) {
			kept = append(kept, r)
		}
	}
	return strings.Join(kept, "\n\n")
}

// RawFromRows rebuilds the original WikiText file (llama.cpp's wiki.test.raw)
// from the dataset rows: "".join(row or " \n").
func RawFromRows(rows []string) string {
	var b strings.Builder
	n := 0
	for _, r := range rows {
		if r == "" {
			n += 2
		} else {
			n += len(r)
		}
	}
	b.Grow(n)
	for _, r := range rows {
		if r == "" {
			b.WriteString(" \n")
		} else {
			b.WriteString(r)
		}
	}
	return b.String()
}

// LlamaCppPrompt is the text llama.cpp reads from a -f file: the content with
// one trailing "\n" removed (common/arg.cpp).
func LlamaCppPrompt(content string) string {
	return strings.TrimSuffix(content, "\n")
}

// Text returns the corpus joined by mode. Row-based corpora (JSONL, parquet,
// wiki.test.raw) support every mode. A plain text corpus is used as is for
// compare_q and filtered, and with one trailing "\n" removed for llamacpp.
func (c *Corpus) Text(mode JoinMode) (string, error) {
	switch mode {
	case "", JoinCompareQ:
		if c.Kind == KindText {
			return c.Raw, nil
		}
		return JoinCompareQRows(c.Rows), nil
	case JoinFiltered:
		if c.Kind == KindText {
			return c.Raw, nil
		}
		return JoinFilteredRows(c.Rows), nil
	case JoinLlamaCpp:
		return LlamaCppPrompt(c.RawText()), nil
	}
	return "", fmt.Errorf("dataset: unknown join mode %q (want compare_q, filtered or llamacpp)", mode)
}

// RawText returns the original-file form of the corpus: the file content for
// KindRaw and KindText, RawFromRows(Rows) otherwise.
func (c *Corpus) RawText() string {
	if c.Kind == KindRaw || c.Kind == KindText {
		return c.Raw
	}
	return RawFromRows(c.Rows)
}
