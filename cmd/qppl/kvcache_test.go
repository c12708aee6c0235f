package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/emu"
)

// TestKVCacheCommands: quantize --kv-cache fp8 writes a checkpoint whose
// eval JSON records the KV cache (on by default, off on request, with
// different numbers); off on the same weights without a KV scheme is
// identical; on without a scheme and unknown values are usage errors;
// verify --backends reference,emu passes with the cache on.
func TestKVCacheCommands(t *testing.T) {
	model, tokens := evalFixture(t, 3, 300)
	dir := t.TempDir()
	kv, plain := filepath.Join(dir, "kv"), filepath.Join(dir, "plain")
	for _, c := range [][]string{
		{"quantize", "--model", model, "--scheme", "W8A16", "--out", kv, "--kv-cache", "fp8"},
		{"quantize", "--model", model, "--scheme", "W8A16", "--out", plain},
	} {
		if code, _, errOut := runQPPL(t, c...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c, code, errOut)
		}
	}
	if code, out, _ := runQPPL(t, "inspect", "--model", kv); code != exitOK || !strings.Contains(out, "KV cache: fp8-e4m3 per-tensor static (") {
		t.Errorf("inspect: exit %d:\n%s", code, out)
	}
	evalJSON := func(m, mode string) map[string]any {
		out := filepath.Join(t.TempDir(), "r.json")
		args := []string{"eval", "--model", m, "--tokens", tokens, "--ctx", "64", "--rows", "3", "--json", out}
		if mode != "" {
			args = append(args, "--kv-cache-quant", mode)
		}
		if code, _, errOut := runQPPL(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		_, r := readResult(t, out)
		return r
	}
	on, off, weights := evalJSON(kv, ""), evalJSON(kv, "off"), evalJSON(plain, "")
	if on["kv_cache_quant"] != "on" || off["kv_cache_quant"] != "off" || weights["kv_cache_quant"] != nil ||
		!strings.HasPrefix(on["kv_cache_scheme"].(string), "fp8-e4m3 per-tensor static (") {
		t.Errorf("JSON: on %v %v, off %v, plain %v", on["kv_cache_quant"], on["kv_cache_scheme"], off["kv_cache_quant"], weights["kv_cache_quant"])
	}
	if on["ppl"] == off["ppl"] || off["ppl"] != weights["ppl"] {
		t.Errorf("PPL on %v, off %v, without a KV scheme %v: want on != off == without", on["ppl"], off["ppl"], weights["ppl"])
	}
	for _, c := range []struct {
		m, mode, want string
	}{
		{plain, "on", "declares no quantized KV cache"},
		{kv, "maybe", `--kv-cache-quant "maybe": want on or off`},
	} {
		code, _, errOut := runQPPL(t, "eval", "--model", c.m, "--tokens", tokens, "--ctx", "64", "--kv-cache-quant", c.mode)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%s %s: exit %d: %s", c.m, c.mode, code, errOut)
		}
	}
	// compare: on/off apply to the models with a KV cache (the dense base
	// runs as it is), are cached apart, and are recorded per result.
	cache := t.TempDir()
	ppl := map[string]any{}
	for _, mode := range []string{"on", "off"} {
		out := filepath.Join(t.TempDir(), "c.json")
		code, _, errOut := runQPPL(t, "compare", "--base", model, "--model", kv, "--label", "kv", "--tokens", tokens, "--ctx", "64", "--rows", "3",
			"--cache-dir", cache, "--kv-cache-quant", mode, "--json", out)
		if code != exitOK {
			t.Fatalf("compare %s: exit %d: %s", mode, code, errOut)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Results []map[string]any }
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Results) != 2 {
			t.Fatalf("compare %s: %v %d results", mode, err, len(doc.Results))
		}
		if doc.Results[0]["kv_cache_quant"] != nil || doc.Results[1]["kv_cache_quant"] != mode {
			t.Errorf("compare %s: kv_cache_quant base %v, kv %v", mode, doc.Results[0]["kv_cache_quant"], doc.Results[1]["kv_cache_quant"])
		}
		ppl[mode] = doc.Results[1]["ppl"]
	}
	if ppl["on"] != on["ppl"] || ppl["off"] != off["ppl"] {
		t.Errorf("compare PPL on %v off %v, eval on %v off %v", ppl["on"], ppl["off"], on["ppl"], off["ppl"])
	}
	if _, err := emu.New(emu.Options{}); errors.Is(err, emu.ErrNoCgo) {
		t.Skip(err)
	}
	code, stdout, errOut := runQPPL(t, "verify", "--model", kv, "--tokens", tokens, "--ctx", "64", "--rows", "2", "--backends", "reference,emu")
	if code != exitOK || !strings.Contains(stdout+errOut, "verify: PASS") || !strings.Contains(errOut, "KV cache on") {
		t.Errorf("verify: exit %d:\n%s%s", code, stdout, errOut)
	}
}
