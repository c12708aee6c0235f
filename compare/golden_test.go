package compare

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

func readGoldenTokens(t *testing.T, name string) []int32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "shared", "golden", "tokens", name))
	if err != nil {
		t.Skipf("golden tokens not found: %v", err)
	}
	ids := make([]int32, len(b)/4)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return ids
}

// On the real Llama-3 token stream of WikiText-2 (with BOS): the token hash
// is the sha256 of the .i32 file listed in shared/README.md, and the
// compare_q windows match methodology.md §1.2 (20 rows cover 11,776 tokens
// and score 40,940; 100 rows cover 52,736) and Python's len(range(0,
// n-2048, 512)) for all rows.
func TestGoldenLlama3Windows(t *testing.T) {
	ids := readGoldenTokens(t, "llama3.test-joined.special1.i32")
	if len(ids) != 289077 || ids[0] != 128000 {
		t.Fatalf("%d tokens, first %d", len(ids), ids[0])
	}
	if h := TokensHash(ids); h != "4b56d307a99c683346f204363c860af56761895ee9f05aacb91a602386cb90e5" {
		t.Errorf("tokens hash %s", h)
	}
	for _, c := range []struct {
		rows, windows int
		end           int32
		scored        int64
	}{{20, 20, 11776, 40940}, {100, 100, 52736, 204700}, {0, 561, 561*512 - 512 + 2048, 561 * 2047}} {
		ws, err := Windows(ids, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 512, Rows: c.rows})
		if err != nil {
			t.Fatal(err)
		}
		last := ws[len(ws)-1]
		end := int32((len(ws)-1)*512 + len(last.Tokens))
		if len(ws) != c.windows || end != c.end || ScoredTokens(ws) != c.scored || &last.Tokens[0] != &ids[(len(ws)-1)*512] {
			t.Errorf("rows %d: %d windows ending at %d scoring %d", c.rows, len(ws), end, ScoredTokens(ws))
		}
	}
	// llama-perplexity -c 512: 289077/512 = 564 chunks of 255 scored tokens.
	ws, err := Windows(ids, WindowOptions{Method: MethodLlamaCpp, Ctx: 512, BOS: 128000})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 564 || ScoredTokens(ws) != 564*255 {
		t.Errorf("llamacpp: %d chunks, %d scored", len(ws), ScoredTokens(ws))
	}
}

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }
