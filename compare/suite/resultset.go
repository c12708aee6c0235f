package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
)

// FormatResultSet identifies a qppl compare result file.
const FormatResultSet = "qppl-compare/1"

// ResultSet is the outcome of one compare run: every model's result on the
// same token stream and windows.
type ResultSet struct {
	Format string `json:"format"`
	// DataSpec is the data spec as given (compare_q's fields), when the run
	// came from one or from qppl's equivalent flags.
	DataSpec *DataSpec `json:"data_spec,omitempty"`
	// Data, DataSpecHash and TokensHash identify the token stream and the
	// windows: result sets are comparable only when both hashes match.
	Data         compare.DataSpec `json:"data"`
	DataSpecHash string           `json:"data_spec_hash"`
	TokensHash   string           `json:"tokens_hash"`
	// KLMode is the KL coverage ("scored" or "compare_q"), "" without KL.
	KLMode string `json:"kl_mode,omitempty"`
	// Base is the label of the KL reference model ("" when none).
	Base string `json:"base,omitempty"`
	// Results are in run order: the base first.
	Results []compare.Result `json:"results"`
}

// Find returns the result labelled label.
func (rs *ResultSet) Find(label string) (*compare.Result, bool) {
	for i := range rs.Results {
		if rs.Results[i].Label == label {
			return &rs.Results[i], true
		}
	}
	return nil, false
}

// Windows returns the number of windows of the run (from the first result,
// or 0).
func (rs *ResultSet) Windows() int {
	for _, r := range rs.Results {
		if r.Windows > 0 {
			return r.Windows
		}
	}
	return 0
}

// DisplayName returns the dataset name for titles.
func (rs *ResultSet) DisplayName() string {
	if rs.DataSpec != nil {
		return rs.DataSpec.DisplayName()
	}
	if rs.Data.Source != "" {
		return filepath.Base(rs.Data.Source)
	}
	return "tokens"
}

// Write writes rs as indented JSON, atomically.
func (rs *ResultSet) Write(path string) error {
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return fmt.Errorf("results %s: %w", path, err)
	}
	b = append(b, '\n')
	if err := dataset.WriteFileAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("results %s: %w", path, err)
	}
	return nil
}

// LoadResults reads a result file: a qppl compare result set, a single
// `qppl eval --json` result, a JSON list of such results, or the list of
// {"label","layer_bpw","head_bpw","vram_gb","ppl"[,"kld"]} objects that
// compare_q prints.
func LoadResults(path string) (*ResultSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	return ParseResults(data, path)
}

// ParseResults decodes the content of a result file (see LoadResults).
func ParseResults(data []byte, name string) (*ResultSet, error) {
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 {
		return nil, fmt.Errorf("results %s: empty file", name)
	}
	if trim[0] == '{' {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(trim, &probe); err != nil {
			return nil, fmt.Errorf("results %s: %w", name, err)
		}
		if _, ok := probe["results"]; ok {
			var rs ResultSet
			if err := json.Unmarshal(trim, &rs); err != nil {
				return nil, fmt.Errorf("results %s: %w", name, err)
			}
			if rs.Format != FormatResultSet {
				return nil, fmt.Errorf("results %s: format %q, want %q", name, rs.Format, FormatResultSet)
			}
			return &rs, rs.check(name)
		}
		var r compare.Result
		if err := json.Unmarshal(trim, &r); err != nil {
			return nil, fmt.Errorf("results %s: %w", name, err)
		}
		rs := fromResults([]compare.Result{r})
		return rs, rs.check(name)
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(trim, &list); err != nil {
		return nil, fmt.Errorf("results %s: want a result set, a result or a list of results: %w", name, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("results %s: empty list", name)
	}
	if _, ok := list[0]["layer_bpw"]; ok {
		return fromCompareQ(trim, name)
	}
	var rs []compare.Result
	if err := json.Unmarshal(trim, &rs); err != nil {
		return nil, fmt.Errorf("results %s: %w", name, err)
	}
	out := fromResults(rs)
	return out, out.check(name)
}

// fromResults wraps loose results; their data must agree.
func fromResults(rs []compare.Result) *ResultSet {
	out := &ResultSet{Format: FormatResultSet, Results: rs}
	if len(rs) > 0 {
		out.Data = rs[0].Data
		out.DataSpecHash = rs[0].DataSpecHash
		out.TokensHash = rs[0].TokensHash
		for _, r := range rs {
			if r.KLD != nil {
				out.KLMode = r.KLD.Mode
				break
			}
		}
	}
	return out
}

// check validates a result set: labels unique, results on its data.
func (rs *ResultSet) check(name string) error {
	seen := map[string]bool{}
	for i, r := range rs.Results {
		if r.Label == "" {
			rs.Results[i].Label = r.Model
			r.Label = r.Model
		}
		if seen[r.Label] {
			return fmt.Errorf("results %s: label %q appears twice", name, r.Label)
		}
		seen[r.Label] = true
		if r.DataSpecHash != rs.DataSpecHash || r.TokensHash != rs.TokensHash {
			return fmt.Errorf("results %s: %q was evaluated on other data (data spec %s, tokens %s) than the set (%s, %s)",
				name, r.Label, short(r.DataSpecHash), short(r.TokensHash), short(rs.DataSpecHash), short(rs.TokensHash))
		}
	}
	return nil
}

// compareQResult is one entry of compare_q's printed result list.
type compareQResult struct {
	Label    string   `json:"label"`
	LayerBPW float64  `json:"layer_bpw"`
	HeadBPW  float64  `json:"head_bpw"`
	VRAMGB   float64  `json:"vram_gb"`
	PPL      float64  `json:"ppl"`
	KLD      *float64 `json:"kld"`
}

func fromCompareQ(data []byte, name string) (*ResultSet, error) {
	var list []compareQResult
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("results %s (compare_q list): %w", name, err)
	}
	rs := &ResultSet{Format: FormatResultSet}
	for i, q := range list {
		if q.Label == "" {
			return nil, fmt.Errorf("results %s (compare_q list): entry %d has no label", name, i)
		}
		r := compare.Result{Label: q.Label, Model: q.Label, BPWLayer: q.LayerBPW, BPWHead: q.HeadBPW, VRAMGB: q.VRAMGB, PPL: q.PPL, Method: "compare_q"}
		if q.KLD != nil {
			if *q.KLD == 0 && rs.Base == "" {
				rs.Base = q.Label // compare_q reports 0 for its reference
			} else {
				r.KLD = &compare.KLDStats{Mode: "compare_q", Mean: *q.KLD}
			}
			rs.KLMode = "compare_q"
		}
		rs.Results = append(rs.Results, r)
	}
	return rs, rs.check(name)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "(none)"
	}
	return h
}
