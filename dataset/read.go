package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Kind is the format of a text source.
type Kind string

// The text source formats Load understands.
const (
	KindAuto    Kind = ""        // detect from the name and the content
	KindJSONL   Kind = "jsonl"   // one JSON object per line with a string field (default "text")
	KindParquet Kind = "parquet" // Hugging Face parquet, string column (default "text")
	KindArrow   Kind = "arrow"   // Arrow IPC (the datasets library's cache files), string column (default "text")
	KindRaw     Kind = "raw"     // llama.cpp's wiki.test.raw: the original WikiText file, one row per line
	KindText    Kind = "text"    // any UTF-8 text, used as is
)

// ParseKind maps a user-facing name to a Kind ("", "auto", "jsonl", "parquet",
// "raw", "wiki.test.raw", "text").
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return KindAuto, nil
	case "jsonl", "json", "ndjson", "rows":
		return KindJSONL, nil
	case "parquet":
		return KindParquet, nil
	case "arrow":
		return KindArrow, nil
	case "raw", "wiki.test.raw", "llamacpp":
		return KindRaw, nil
	case "text", "txt":
		return KindText, nil
	}
	return "", fmt.Errorf("dataset: unknown data format %q (want auto, jsonl, parquet, arrow, raw or text)", s)
}

// LoadOptions selects how Load reads a file. The zero value detects the kind
// and reads the column "text".
type LoadOptions struct {
	Kind   Kind   // KindAuto: detect from the extension and the content
	Column string // JSONL field / parquet column holding the rows; "" means "text"
}

// Corpus is a loaded text source. Row-based sources (JSONL, parquet and
// wiki.test.raw) have Rows, exactly as the Hugging Face `wikitext` dataset
// holds them (non-blank rows end in "\n", blank rows are ""). KindRaw and
// KindText also keep the file content in Raw.
type Corpus struct {
	Path string
	Kind Kind
	Rows []string // nil for KindText
	Raw  string   // file content for KindRaw and KindText; "" otherwise
}

// Load reads a text source. Errors name the file and, for JSONL, the line; a
// file with invalid UTF-8 is rejected with its byte offset.
func Load(path string, opts LoadOptions) (*Corpus, error) {
	col := opts.Column
	if col == "" {
		col = "text"
	}
	kind := opts.Kind
	if kind == KindParquet || (kind == KindAuto && strings.EqualFold(filepath.Ext(path), ".parquet")) {
		rows, err := ReadParquetColumn(path, col)
		if err != nil {
			return nil, err
		}
		return &Corpus{Path: path, Kind: KindParquet, Rows: rows}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if kind == KindAuto {
		kind = DetectKind(path, data)
	}
	switch kind {
	case KindParquet:
		rows, err := ReadParquetColumn(path, col)
		if err != nil {
			return nil, err
		}
		return &Corpus{Path: path, Kind: KindParquet, Rows: rows}, nil
	case KindArrow:
		rows, err := parseArrowColumn(data, col)
		if err != nil {
			return nil, fmt.Errorf("dataset: arrow %s: %w", path, err)
		}
		return &Corpus{Path: path, Kind: KindArrow, Rows: rows}, nil
	case KindJSONL:
		rows, err := ParseJSONL(path, data, col)
		if err != nil {
			return nil, err
		}
		return &Corpus{Path: path, Kind: KindJSONL, Rows: rows}, nil
	case KindRaw, KindText:
		if err := CheckUTF8(path, data); err != nil {
			return nil, err
		}
		c := &Corpus{Path: path, Kind: kind, Raw: string(data)}
		if kind == KindRaw {
			c.Rows = RowsFromRaw(c.Raw)
		}
		return c, nil
	}
	return nil, fmt.Errorf("dataset: %s: unknown kind %q", path, kind)
}

// LoadAll loads several row-based files of one format (for example parquet
// shards) in the given order and concatenates their rows.
func LoadAll(paths []string, opts LoadOptions) (*Corpus, error) {
	if len(paths) == 0 {
		return nil, errors.New("dataset: no input files")
	}
	if len(paths) == 1 {
		return Load(paths[0], opts)
	}
	var all *Corpus
	for _, p := range paths {
		c, err := Load(p, opts)
		if err != nil {
			return nil, err
		}
		if c.Rows == nil {
			return nil, fmt.Errorf("dataset: %s: a %s file cannot be concatenated with other files (row-based formats only)", p, c.Kind)
		}
		if all == nil {
			all = &Corpus{Path: p, Kind: c.Kind}
		} else if c.Kind != all.Kind {
			return nil, fmt.Errorf("dataset: %s is %s but %s is %s: files of one corpus must have one format", p, c.Kind, all.Path, all.Kind)
		}
		all.Rows = append(all.Rows, c.Rows...)
		all.Raw += c.Raw // wiki.test.raw pieces: the original file is their concatenation
	}
	return all, nil
}

// DetectKind guesses the format of a file from its name and content:
// .jsonl/.json/.ndjson → JSONL, .parquet or "PAR1" magic → parquet,
// .arrow, "ARROW1" or an IPC continuation marker → Arrow,
// wiki.*.raw or .raw → llama.cpp raw, a first line that is a JSON object with
// a "text" string → JSONL, anything else → text.
func DetectKind(path string, head []byte) Kind {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".jsonl", ".json", ".ndjson":
		return KindJSONL
	case ".parquet":
		return KindParquet
	case ".arrow":
		return KindArrow
	case ".raw":
		return KindRaw
	}
	if len(head) >= 4 && string(head[:4]) == "PAR1" {
		return KindParquet
	}
	if len(head) >= 6 && string(head[:6]) == "ARROW1" || len(head) >= 4 && string(head[:4]) == "\xff\xff\xff\xff" {
		return KindArrow
	}
	line := head
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(t, &obj) == nil {
			var s string
			if raw, ok := obj["text"]; ok && json.Unmarshal(raw, &s) == nil {
				return KindJSONL
			}
		}
	}
	return KindText
}

// ParseJSONL parses rows from JSONL data: every non-blank line must be a JSON
// object whose field col is a string. Blank lines are skipped. Errors give
// name:line.
func ParseJSONL(name string, data []byte, col string) ([]string, error) {
	if off := firstInvalidUTF8(data); off >= 0 {
		line := 1 + bytes.Count(data[:off], []byte{'\n'})
		return nil, fmt.Errorf("dataset: %s:%d: invalid UTF-8 at byte offset %d", name, line, off)
	}
	var rows []string
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, fmt.Errorf("dataset: %s:%d: not a JSON object: %v", name, lineNo, err)
		}
		raw, ok := obj[col]
		if !ok {
			return nil, fmt.Errorf("dataset: %s:%d: no %q field", name, lineNo, col)
		}
		var s *string
		if err := json.Unmarshal(raw, &s); err != nil || s == nil {
			return nil, fmt.Errorf("dataset: %s:%d: field %q is not a string", name, lineNo, col)
		}
		if strings.ContainsRune(*s, utf8.RuneError) && unpairedSurrogate(raw) {
			// encoding/json turns a lone \uD800-\uDFFF escape into U+FFFD;
			// Python keeps a surrogate that cannot be encoded as UTF-8.
			return nil, fmt.Errorf("dataset: %s:%d: field %q has an unpaired UTF-16 surrogate escape", name, lineNo, col)
		}
		rows = append(rows, *s)
	}
	return rows, nil
}

// unpairedSurrogate reports whether a JSON string literal holds a \uD800 to
// \uDFFF escape that is not a high surrogate followed by a low one.
func unpairedSurrogate(lit []byte) bool {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		var r rune
		for _, c := range b[:4] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' || i+1 >= len(lit) {
			continue
		}
		if lit[i+1] != 'u' {
			i++ // skip the escaped character
			continue
		}
		r, ok := hex4(lit[i+2:])
		if !ok {
			continue
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if !(i+7 < len(lit) && lit[i+6] == '\\' && lit[i+7] == 'u') {
				return true
			}
			lo, ok := hex4(lit[i+8:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// RowsFromRaw splits the content of an original WikiText file (llama.cpp's
// wiki.test.raw) into the rows of the Hugging Face `wikitext` dataset: one row
// per line, the line ending kept, and a line that is only whitespace becoming
// "". RowsFromRaw(JoinLlamaCpp(rows)) == rows for the dataset's rows.
func RowsFromRaw(raw string) []string {
	rows := make([]string, 0, strings.Count(raw, "\n")+1)
	for len(raw) > 0 {
		var line string
		if i := strings.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i+1], raw[i+1:]
		} else {
			line, raw = raw, ""
		}
		if isBlank(line) {
			line = ""
		}
		rows = append(rows, line)
	}
	return rows
}
