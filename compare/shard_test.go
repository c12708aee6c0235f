package compare

import (
	"context"
	"testing"
)

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"": {0, 1}, "0/1": {0, 1}, "2/4": {2, 4}} {
		if got, err := ParseShard(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"4/4", "-1/2", "1", "a/b", "0/0"} {
		if _, err := ParseShard(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// A run interrupted after some windows and resumed in shards gives the
// unsharded result bit for bit.
func TestResumeShards(t *testing.T) {
	m := &toyModel{vocab: 11}
	ws, _ := Windows(toyTokens(400, 11), WindowOptions{Method: MethodCompareQ, Ctx: 24, Stride: 8})
	all, _ := (&Runner{Backend: m, Windows: ws}).Run(context.Background())
	done := all[:5] // journaled before the interruption
	results := append([]WindowResult(nil), done...)
	for i := 0; i < 3; i++ {
		part, err := (&Runner{Backend: m, Windows: ws, Skip: SkipFunc(done, Shard{i, 3})}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, part...)
	}
	if len(results) != len(ws) {
		t.Fatalf("%d results for %d windows", len(results), len(ws))
	}
	a, _ := Reduce(all, ReduceOptions{})
	b, _ := Reduce(results, ReduceOptions{})
	if a.PPL != b.PPL || a.NLLMeanSE != b.NLLMeanSE || *a.PPLBootstrap != *b.PPLBootstrap {
		t.Errorf("resumed shards %v != %v", b.PPL, a.PPL)
	}
}
