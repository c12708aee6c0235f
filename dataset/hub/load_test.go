package hub

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/qppl/qppl/dataset"
)

// End to end: a real parquet file served by the fake hub is downloaded into
// the cache, read, and joined exactly.
func TestLoadWikiTextEndToEnd(t *testing.T) {
	rows := []string{"", " = Valkyria Chronicles III = \n", "", " Senjō no Valkyria 3 : <unk> Chronicles\n", ""}
	type row struct {
		Text *string `parquet:"text,optional"`
	}
	var prow []row
	for i := range rows {
		prow = append(prow, row{&rows[i]})
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, prow, parquet.Compression(&parquet.Snappy)); err != nil {
		t.Fatal(err)
	}
	h := newFakeHub(t)
	h.addFile("datasets/Salesforce/wikitext", WikiTextTestFile, buf.Bytes(), true)
	home := t.TempDir()
	c, res, err := LoadWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, nil)}, dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != SourceDownload || filepath.Base(res.Paths[0]) != "test-00000-of-00001.parquet" || c.Kind != dataset.KindParquet {
		t.Fatalf("%+v kind %s", res, c.Kind)
	}
	got, _ := c.Text(dataset.JoinCompareQ)
	want := "\n\n = Valkyria Chronicles III = \n\n\n\n\n Senjō no Valkyria 3 : <unk> Chronicles\n\n\n"
	if got != want {
		t.Fatalf("join %q, want %q", got, want)
	}
	// Offline afterwards: same corpus from the cache.
	c2, res2, err := LoadWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, map[string]string{"HF_HUB_OFFLINE": "1"})}, dataset.LoadOptions{})
	if err != nil || res2.Source != SourceCache || len(c2.Rows) != len(rows) {
		t.Fatalf("offline: %+v %v", res2, err)
	}
}
