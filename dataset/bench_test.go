package dataset

import (
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Benchmarks on the shared WikiText-2 test split (4,358 rows, 1.3 MB).

func BenchmarkLoadJSONL_WT2Test(b *testing.B) {
	p := filepath.Join("..", "..", "shared", "data", "wikitext-2-raw-v1", "test.rows.jsonl")
	for b.Loop() {
		if _, err := Load(p, LoadOptions{}); err != nil {
			b.Skip(err)
		}
	}
}

func BenchmarkLoadParquet_WT2Test(b *testing.B) {
	c, err := Load(filepath.Join("..", "..", "shared", "data", "wikitext-2-raw-v1", "test.rows.jsonl"), LoadOptions{})
	if err != nil {
		b.Skip(err)
	}
	rows := make([]dictRow, len(c.Rows))
	for i := range c.Rows {
		rows[i].Text = &c.Rows[i]
	}
	p := filepath.Join(b.TempDir(), "test-00000-of-00001.parquet")
	if err := parquet.WriteFile(p, rows, parquet.Compression(&parquet.Snappy)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Load(p, LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDocuments_WT2Test(b *testing.B) {
	c, err := Load(filepath.Join("..", "..", "shared", "data", "wikitext-2-raw-v1", "test.rows.jsonl"), LoadOptions{})
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		c.Documents()
	}
}
