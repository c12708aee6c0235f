package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkEncode_WikiText2 encodes the whole WikiText-2 test corpus
// (test.joined.txt, 1.3 MB) with add_special_tokens=true, each iteration
// with a cold word cache (as a freshly loaded tokenizer would). Run with
// GOMAXPROCS=1 for the one-core figure.
func BenchmarkEncode_WikiText2(b *testing.B) {
	text := string(readShared(b, "data", "wikitext-2-raw-v1", "test.joined.txt"))
	for _, name := range goldenTokenizers {
		b.Run(name, func(b *testing.B) {
			tk := loadShared(b, name)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			b.ResetTimer()
			var n int
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				tk.model.resetCache()
				c0, _ := processCPU()
				b.StartTimer()
				n = len(tk.Encode(text, true))
				b.StopTimer()
				c1, _ := processCPU()
				cpu += c1 - c0
				b.StartTimer()
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/corpus")
			if _, ok := processCPU(); ok {
				// CPU time is steadier than wall time on a shared machine.
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/corpus")
			}
			b.ReportMetric(float64(n), "tokens")
		})
	}
}

// BenchmarkLoad measures reading and building a tokenizer.json.
func BenchmarkLoad(b *testing.B) {
	for _, name := range goldenTokenizers {
		b.Run(name, func(b *testing.B) {
			p := filepath.Join(shared, "tokenizers", name)
			if _, err := os.Stat(p); err != nil {
				b.Skipf("shared tokenizer not found: %v", err)
			}
			for i := 0; i < b.N; i++ {
				if _, err := Load(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
