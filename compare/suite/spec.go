package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// DataSpec is ExLlamaV3 compare_q's data spec (-d FILE), plus optional qppl
// fields. Unknown fields are reported as warnings and ignored.
type DataSpec struct {
	// compare_q classic fields.
	TokenizeFn   string          `json:"tokenize_fn"`
	TokenizerDir string          `json:"tokenizer_dir"`
	Dataset      string          `json:"dataset"`
	EvalStride   int             `json:"eval_stride"`
	EvalLen      int             `json:"eval_len"`
	MaxRows      int             `json:"max_rows"`
	ChatTemplate json.RawMessage `json:"chat_template,omitempty"`
	WarmupTokens int             `json:"warmup_tokens,omitempty"`

	// compare_q final-version fields.
	DatasetPath        string `json:"dataset_path,omitempty"`
	DatasetName        string `json:"dataset_name,omitempty"`
	DatasetSplit       string `json:"dataset_split,omitempty"`
	TextColumn         string `json:"text_column,omitempty"`
	MaxTextRows        int    `json:"max_text_rows,omitempty"`
	DatasetDisplayName string `json:"dataset_display_name,omitempty"`
	DisplayRows        int    `json:"display_rows,omitempty"`
	DisplayEvalLen     int    `json:"display_eval_len,omitempty"`

	// qppl fields.
	//
	// DataFile is a local copy of the dataset (rows JSONL, HF parquet,
	// wiki.test.raw or plain text); TokensFile an int32 little-endian token
	// file used instead of text (then TokenizerDir is not needed).
	DataFile   string `json:"data_file,omitempty"`
	TokensFile string `json:"tokens_file,omitempty"`
	// Join is the row join: "compare_q" (classic, empty rows kept: the
	// published plots; default), "filtered" (compare_q's final version) or
	// "llamacpp".
	Join string `json:"join,omitempty"`
	// Method is the windowing method (default compare_q).
	Method string `json:"method,omitempty"`
	// KLMode is "scored" (KL at every scored position of every window;
	// default) or "compare_q" (compare_q's own coverage: every position of
	// the first 10 windows).
	KLMode string `json:"kl_mode,omitempty"`
	// AddSpecialTokens overrides the method's default (compare_q: true).
	AddSpecialTokens *bool `json:"add_special_tokens,omitempty"`
}

// knownDataFields are the JSON keys of DataSpec.
var knownDataFields = map[string]bool{
	"tokenize_fn": true, "tokenizer_dir": true, "dataset": true, "eval_stride": true, "eval_len": true,
	"max_rows": true, "chat_template": true, "warmup_tokens": true, "dataset_path": true, "dataset_name": true,
	"dataset_split": true, "split": true, "text_column": true, "max_text_rows": true, "max_dataset_rows": true,
	"dataset_display_name": true, "display_rows": true, "display_eval_len": true, "dataset_data_files": true,
	"data_file": true, "tokens_file": true, "join": true, "method": true, "kl_mode": true, "add_special_tokens": true,
}

// datasetAliases are the names compare_q maps to WikiText-2 raw test, and
// its display name.
var datasetAliases = map[string]string{"wiki2": "wikitext2", "wikitext2": "wikitext2", "wikitext": "wikitext2", "wikitext-2-raw-v1": "wikitext2"}

// ParseDataSpec decodes and validates a compare_q data spec; name is used
// in messages. Warnings list ignored fields.
func ParseDataSpec(data []byte, name string) (*DataSpec, []string, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("data spec %s: not a JSON object: %w", name, err)
	}
	var warn []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !knownDataFields[k] {
			warn = append(warn, fmt.Sprintf("data spec %s: unknown field %q ignored", name, k))
		}
	}
	var s DataSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return nil, nil, fmt.Errorf("data spec %s: %w", name, err)
	}
	// compare_q's aliases for split and max_text_rows.
	if s.DatasetSplit == "" {
		if v, ok := raw["split"]; ok {
			_ = json.Unmarshal(v, &s.DatasetSplit)
		}
	}
	if s.MaxTextRows == 0 {
		if v, ok := raw["max_dataset_rows"]; ok {
			_ = json.Unmarshal(v, &s.MaxTextRows)
		}
	}
	if v, ok := raw["dataset_data_files"]; ok && string(v) != "null" && s.DataFile == "" {
		return nil, warn, fmt.Errorf("data spec %s: dataset_data_files (hub data files) is unsupported; download the file and set \"data_file\" to its local path", name)
	}
	if err := s.validate(name); err != nil {
		return nil, warn, err
	}
	return &s, warn, nil
}

// validate checks the fields qppl needs and rejects what it cannot do.
func (s *DataSpec) validate(name string) error {
	if len(s.ChatTemplate) > 0 && !isFalsy(s.ChatTemplate) {
		return fmt.Errorf("data spec %s: chat_template is unsupported: qppl scores raw text windows only (remove chat_template; compare_q's formatted runs are not reproducible with qppl)", name)
	}
	if s.WarmupTokens != 0 {
		return fmt.Errorf("data spec %s: warmup_tokens %d is unsupported (it only applies with chat_template)", name, s.WarmupTokens)
	}
	if s.TokensFile == "" {
		if s.TokenizeFn != "" && s.TokenizeFn != "transformers" {
			return fmt.Errorf("data spec %s: tokenize_fn %q is unsupported (compare_q only has \"transformers\")", name, s.TokenizeFn)
		}
		if s.TokenizerDir == "" {
			return fmt.Errorf("data spec %s: tokenizer_dir is required (or tokens_file)", name)
		}
		if s.DataFile == "" && s.Dataset == "" {
			return fmt.Errorf("data spec %s: dataset (or data_file, or tokens_file) is required", name)
		}
	}
	if s.EvalLen < 2 {
		return fmt.Errorf("data spec %s: eval_len %d must be at least 2", name, s.EvalLen)
	}
	if s.EvalStride < 0 || s.MaxRows < 0 || s.MaxTextRows < 0 {
		return fmt.Errorf("data spec %s: eval_stride, max_rows and max_text_rows must be >= 0", name)
	}
	if s.DatasetSplit != "" && s.DatasetSplit != "test" {
		return fmt.Errorf("data spec %s: dataset split %q is unsupported (WikiText-2 raw test only)", name, s.DatasetSplit)
	}
	switch s.KLMode {
	case "", "scored", "compare_q":
	default:
		return fmt.Errorf("data spec %s: kl_mode %q (want scored or compare_q)", name, s.KLMode)
	}
	return nil
}

// isFalsy reports whether a JSON value is false, null, "" or 0 (Python's
// `if spec.get("chat_template")`).
func isFalsy(v json.RawMessage) bool {
	switch strings.TrimSpace(string(v)) {
	case "false", "null", `""`, "0", "[]", "{}":
		return true
	}
	return false
}

// DisplayName returns the dataset name for titles (compare_q's
// DATASET_ALIASES display names).
func (s *DataSpec) DisplayName() string {
	if s.DatasetDisplayName != "" {
		return s.DatasetDisplayName
	}
	if d, ok := datasetAliases[strings.ToLower(s.Dataset)]; ok {
		return d
	}
	if s.Dataset != "" {
		return s.Dataset
	}
	if s.TokensFile != "" {
		return s.TokensFile
	}
	return s.DataFile
}

// ModelSpec is one entry of a compare_q model spec (a JSON list).
type ModelSpec struct {
	ModelDir string `json:"-"` // model_dir (first element when a list)
	LoadFn   string `json:"load_fn"`
	FwdFn    string `json:"fwd_fn"`
	Label    string `json:"label"`
	// OutLogits marks the KL reference (compare_q: the directory of its
	// logits file); qppl uses it as the directory of the base log-prob
	// store.
	OutLogits string `json:"out_logits,omitempty"`
	// Overrides of the bits-per-weight accounting (compare_q
	// override_bpw_layer, override_bpw_head, override_vram_bits).
	OverrideBPWLayer *float64 `json:"override_bpw_layer,omitempty"`
	OverrideBPWHead  *float64 `json:"override_bpw_head,omitempty"`
	OverrideVRAMBits *float64 `json:"override_vram_bits,omitempty"`
	// Base marks the base model (set from OutLogits or --base).
	Base bool `json:"-"`
	// Source names the spec file and entry, for messages.
	Source string `json:"-"`
}

// hfLoaders are compare_q load_fn values that read Hugging Face
// checkpoints, which qppl's loader reads too. load_fn "llamacpp" (a .gguf
// model_dir, as exllamav3's eval/spec/*_gguf.json) is read by package gguf.
var hfLoaders = map[string]bool{"": true, "qppl": true, "transformers": true, "transformers_auto": true, "transformers_auto_bf16": true, "transformers_mm": true}

// ParseModelSpecs decodes a compare_q model spec file (a JSON list of
// objects; a single object is accepted too). Warnings report foreign
// loaders, model_dir lists and unknown fields.
func ParseModelSpecs(data []byte, name string) ([]ModelSpec, []string, error) {
	var list []map[string]json.RawMessage
	trim := bytes.TrimSpace(data)
	if len(trim) > 0 && trim[0] == '{' {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(trim, &one); err != nil {
			return nil, nil, fmt.Errorf("model spec %s: %w", name, err)
		}
		list = append(list, one)
	} else if err := json.Unmarshal(trim, &list); err != nil {
		return nil, nil, fmt.Errorf("model spec %s: want a JSON list of model objects: %w", name, err)
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("model spec %s: empty list", name)
	}
	var out []ModelSpec
	var warn []string
	known := map[string]bool{"model_dir": true, "load_fn": true, "fwd_fn": true, "label": true, "out_logits": true,
		"override_bpw_layer": true, "override_bpw_head": true, "override_vram_bits": true}
	for i, obj := range list {
		src := fmt.Sprintf("%s[%d]", name, i)
		b, _ := json.Marshal(obj)
		var m ModelSpec
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, warn, fmt.Errorf("model spec %s: %w", src, err)
		}
		m.Source = src
		dirRaw, ok := obj["model_dir"]
		if !ok {
			return nil, warn, fmt.Errorf("model spec %s: model_dir is required", src)
		}
		var dir string
		if err := json.Unmarshal(dirRaw, &dir); err != nil {
			var dirs []string
			if err2 := json.Unmarshal(dirRaw, &dirs); err2 != nil || len(dirs) == 0 {
				return nil, warn, fmt.Errorf("model spec %s: model_dir must be a string or a non-empty list of strings", src)
			}
			dir = dirs[0]
			if len(dirs) > 1 {
				warn = append(warn, fmt.Sprintf("model spec %s: model_dir is a list; using %s and ignoring %s", src, dirs[0], strings.Join(dirs[1:], ", ")))
			}
		}
		if dir == "" {
			return nil, warn, fmt.Errorf("model spec %s: model_dir is empty", src)
		}
		m.ModelDir = dir
		isGGUF := strings.HasSuffix(strings.ToLower(dir), ".gguf")
		switch {
		case m.LoadFn == "llamacpp" && !isGGUF:
			return nil, warn, fmt.Errorf("model spec %s: load_fn \"llamacpp\" needs a .gguf model_dir, got %s", src, dir)
		case m.LoadFn == "llamacpp" || isGGUF:
			// A GGUF file, read natively (package gguf).
		case !hfLoaders[m.LoadFn]:
			warn = append(warn, fmt.Sprintf("model spec %s: load_fn %q is not a Hugging Face loader; qppl's own loader will read %s (safetensors checkpoints only)", src, m.LoadFn, dir))
		}
		if m.Label == "" {
			m.Label = dir
		}
		if _, ok := obj["out_logits"]; ok {
			m.Base = true
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !known[k] {
				warn = append(warn, fmt.Sprintf("model spec %s: unknown field %q ignored", src, k))
			}
		}
		out = append(out, m)
	}
	return out, warn, nil
}

// OrderModels applies compare_q's order and mask: the base model first,
// then the others in the order given; with mask, only labels containing one
// of its substrings (case-insensitive) are kept, the base always. More than
// one base is an error.
func OrderModels(ms []ModelSpec, mask []string) ([]ModelSpec, error) {
	var base *ModelSpec
	var rest []ModelSpec
	for i := range ms {
		if ms[i].Base {
			if base != nil {
				return nil, fmt.Errorf("two base models (out_logits): %s (%s) and %s (%s)", base.Label, base.Source, ms[i].Label, ms[i].Source)
			}
			base = &ms[i]
			continue
		}
		if len(mask) > 0 && !matchMask(ms[i].Label, mask) {
			continue
		}
		rest = append(rest, ms[i])
	}
	labels := map[string]string{}
	var out []ModelSpec
	if base != nil {
		out = append(out, *base)
	}
	out = append(out, rest...)
	for _, m := range out {
		if prev, dup := labels[m.Label]; dup {
			return nil, fmt.Errorf("label %q used twice (%s and %s): labels identify models in result sets and the regression gate", m.Label, prev, m.Source)
		}
		labels[m.Label] = m.Source
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no model left to evaluate")
	}
	return out, nil
}

func matchMask(label string, mask []string) bool {
	up := strings.ToUpper(label)
	for _, m := range mask {
		if strings.Contains(up, strings.ToUpper(m)) {
			return true
		}
	}
	return false
}
