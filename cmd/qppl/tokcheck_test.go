package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// issue 11 item 2 at the command line: eval and compare refuse a model
// whose config.json (or generation_config.json) special ids disagree with
// its tokenizer, exit 2 before any work, naming both values and files.
func TestTokenizerConfigMismatch(t *testing.T) {
	for _, tc := range []struct {
		file string
		edit map[string]any
		want []string
	}{
		{"config.json", map[string]any{"bos_token_id": 1}, []string{"is id 510", "config.json bos_token_id 1"}},
		{"generation_config.json", map[string]any{"eos_token_id": []int{2, 3}}, []string{"is id 511", "generation_config.json eos_token_id [2, 3]"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			model, _ := evalFixture(t, 1, 10)
			path := filepath.Join(model, tc.file)
			c := map[string]any{}
			if b, err := os.ReadFile(path); err == nil {
				json.Unmarshal(b, &c)
			}
			for k, v := range tc.edit {
				c[k] = v
			}
			b, _ := json.Marshal(c)
			os.WriteFile(path, b, 0o644)
			text := filepath.Join(t.TempDir(), "t.txt")
			os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog.\n", 20)), 0o644)
			out := filepath.Join(t.TempDir(), "r.json")
			for _, args := range [][]string{
				{"eval", "--model", model, "--text", text, "--ctx", "16", "--json", out},
				{"compare", "--model", model, "--text", text, "--ctx", "16", "--no-cache", "--json", out},
			} {
				code, stdout, stderr := runQPPL(t, args...)
				if code != 2 || stdout != "" {
					t.Errorf("%s: exit %d, stdout %q, stderr %q", args[0], code, stdout, stderr)
				}
				for _, w := range append(tc.want, filepath.Join(model, "tokenizer")) {
					if !strings.Contains(stderr, w) {
						t.Errorf("%s: stderr %q lacks %q", args[0], stderr, w)
					}
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("%s: wrote %s", args[0], out)
				}
			}
		})
	}
}
