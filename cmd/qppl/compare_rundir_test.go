package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/journal"
)

// crdTokens gives 104 windows of 16 tokens per model (ctx 16, stride 1).
const crdTokens = 120

// crdFixture writes a dense base fixture, two quantized copies (W4A16
// group 32 and W8A16 per channel) and a token file into a temporary
// directory.
func crdFixture(t *testing.T) (base, w4, w8, tokens string) {
	t.Helper()
	dir := t.TempDir()
	o, err := fixtures.Defaults("llama")
	if err != nil {
		t.Fatal(err)
	}
	o.Seed = 21
	base = filepath.Join(dir, "base")
	if err := fixtures.Write(base, o); err != nil {
		t.Fatal(err)
	}
	w4, w8 = filepath.Join(dir, "w4"), filepath.Join(dir, "w8")
	if err := quantizer.Quantize(base, w4, "W4A16-G32", quantizer.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := quantizer.Quantize(base, w8, "W8A16", quantizer.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, crdTokens)
	for i := range ids {
		ids[i] = int32((i*i*5 + 11*i + 3) % o.Vocab)
	}
	tokens = filepath.Join(dir, "tokens.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	return base, w4, w8, tokens
}

// crdArgs is the compare command of these tests.
func crdArgs(base, w4, w8, tokens, runDir, cache, out string, stride int, extra ...string) []string {
	a := []string{"compare", "--base", base, "--model", w4, "--label", "W4A16 g32", "--model", w8, "--label", "W8A16",
		"--tokens", tokens, "--ctx", "16", "--stride", itoa(stride), "--cache-dir", cache, "--run-dir", runDir, "--json", out}
	return append(a, extra...)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// resultSetNoTiming reads a compare result set with every result's timing
// removed.
func resultSetNoTiming(t *testing.T, path string) []byte {
	t.Helper()
	m := readJSONObject(t, path)
	rs, _ := m["results"].([]any)
	if len(rs) != 3 {
		t.Fatalf("%s: %d results, want 3", path, len(rs))
	}
	for _, r := range rs {
		delete(r.(map[string]any), "timing")
	}
	out, _ := json.Marshal(m)
	return out
}

// crdRecords is the number of complete journal records in each model's
// subdirectory of a compare run directory.
func crdRecords(rd string) [3]int {
	var n [3]int
	for i, s := range []string{"00-base", "01-W4A16_g32", "02-W8A16"} {
		n[i], _ = journalRecords(filepath.Join(rd, s))
	}
	return n
}

// noTemps fails when a store writer's temporary file is left in rd.
func noTemps(t *testing.T, rd string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(rd, "*", "*.tmp*"))
	if len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// A compare killed with SIGKILL at seeded random points, resumed with and
// without --no-cache, ends with a result set bit-identical (timing aside)
// to an uninterrupted run; SIGINT during the base (its store unfinished)
// and SIGTERM during a quantized model exit 130/143 with the resume
// command, the unfinished base is redone and the finished store reused.
func TestCompareRunDirResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	base, w4, w8, tokens := crdFixture(t)
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.json")
	t0 := time.Now()
	mustRun(t, crdArgs(base, w4, w8, tokens, filepath.Join(dir, "whole"), filepath.Join(dir, "cache-whole"), whole, 1, "--no-cache")...)
	full := time.Since(t0)
	want := resultSetNoTiming(t, whole)
	const windows = crdTokens - 16 // range(0, n-ctx, 1)
	if n := crdRecords(filepath.Join(dir, "whole")); n != [3]int{windows, windows, windows} {
		t.Fatalf("uninterrupted journals hold %v windows, want %d each", n, windows)
	}
	noTemps(t, filepath.Join(dir, "whole"))

	t.Run("SIGKILL", func(t *testing.T) {
		rd, cache, out := filepath.Join(dir, "killed"), filepath.Join(dir, "cache-killed"), filepath.Join(dir, "killed.json")
		rng := rand.New(rand.NewPCG(17, 29))
		midRun, prev := 0, 0
		for kill := 0; kill < 6; kill++ {
			var extra []string
			if kill%2 == 0 {
				extra = []string{"--no-cache"} // resuming must not depend on the result cache
			}
			cmd, stderr := startChild(t, crdArgs(base, w4, w8, tokens, rd, cache, out, 1, extra...)...)
			delay := time.Duration((0.05 + 0.35*rng.Float64()) * float64(full))
			time.Sleep(delay)
			cmd.Process.Signal(syscall.SIGKILL)
			code := exitCode(t, cmd)
			n := crdRecords(rd)
			sum := n[0] + n[1] + n[2]
			t.Logf("kill %d after %v: exit %d, journals %v", kill, delay, code, n)
			if code == 0 {
				break
			}
			if code != -1 {
				t.Fatalf("child exit %d: %s", code, stderr)
			}
			if sum != prev && sum < 3*windows {
				midRun++
			}
			prev = sum
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("killed run left %s", out)
			}
		}
		if midRun == 0 {
			t.Fatalf("no kill landed in the middle of the run (uninterrupted run took %v)", full)
		}
		_, _, stderr := runQPPL(t, crdArgs(base, w4, w8, tokens, rd, cache, out, 1)...)
		if got := resultSetNoTiming(t, out); !bytes.Equal(got, want) {
			t.Errorf("resumed result set differs:\n%s\n%s\n%s", got, want, stderr)
		}
		if n := crdRecords(rd); n != [3]int{windows, windows, windows} {
			t.Errorf("journals hold %v windows, want %d each", n, windows)
		}
		noTemps(t, rd)
	})

	t.Run("signals", func(t *testing.T) {
		rd, cache, out := filepath.Join(dir, "sig"), filepath.Join(dir, "cache-sig"), filepath.Join(dir, "sig.json")
		args := crdArgs(base, w4, w8, tokens, rd, cache, out, 1, "--no-cache")
		resume := "qppl: resume with:\n  " + shellQuote(append([]string{"qppl"}, args...)) + "\n"
		// interrupt sends sig once model m has journaled at least 5
		// windows and returns the exit code and stderr.
		interrupt := func(m int, sig syscall.Signal) (int, string) {
			cmd, stderr := startChild(t, args...)
			deadline := time.Now().Add(20 * time.Second)
			for crdRecords(rd)[m] < 5 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			return exitCode(t, cmd), stderr.String()
		}
		stores := func() []string {
			m, _ := filepath.Glob(filepath.Join(rd, "00-base", "*.qlp"))
			return m
		}

		// SIGINT while the base writes its log-prob store.
		code, msg := interrupt(0, syscall.SIGINT)
		n := crdRecords(rd)
		if code != 130 || n[0] < 5 || n[0] == windows || n[1] != 0 {
			t.Fatalf("SIGINT: exit %d, journals %v; stderr:\n%s", code, n, msg)
		}
		for _, w := range []string{
			"qppl: SIGINT: stopping: the window in flight is abandoned",
			"the base model's log-prob store was not finished: resuming evaluates the base model again from its first window\n",
			resume,
		} {
			if !strings.Contains(msg, w) {
				t.Errorf("SIGINT: stderr lacks %q:\n%s", w, msg)
			}
		}
		if s := stores(); len(s) != 0 {
			t.Errorf("SIGINT: an unfinished store is in place: %v", s)
		}

		// SIGTERM while the first quantized model runs: the base was redone
		// from its first window and its store completed.
		code, msg = interrupt(1, syscall.SIGTERM)
		n = crdRecords(rd)
		if code != 143 || n[0] != windows || n[1] < 5 || n[1] == windows || n[2] != 0 {
			t.Fatalf("SIGTERM: exit %d, journals %v; stderr:\n%s", code, n, msg)
		}
		for _, w := range []string{
			"qppl: SIGTERM: stopping: the window in flight is abandoned",
			"qppl: base: its log-prob store is missing or was not finished: evaluating the base model again from its first window (",
			"windows are saved in " + journalPath(filepath.Join(rd, "01-W4A16_g32")) + "\n",
			resume,
		} {
			if !strings.Contains(msg, w) {
				t.Errorf("SIGTERM: stderr lacks %q:\n%s", w, msg)
			}
		}
		s := stores()
		if len(s) != 1 {
			t.Fatalf("SIGTERM: stores %v, want one", s)
		}
		st0, err := os.Stat(s[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("interrupted run left %s", out)
		}

		// Resumed to the end: the complete store is reused (not rewritten).
		_, _, msg = runQPPL(t, args...)
		for _, w := range []string{
			"qppl: base: reusing its finished windows (" + journalPath(filepath.Join(rd, "00-base")) + ") and complete log-prob store (" + s[0] + ")\n",
			"qppl: W4A16 g32: resuming from " + journalPath(filepath.Join(rd, "01-W4A16_g32")) + ": ",
		} {
			if !strings.Contains(msg, w) {
				t.Errorf("resume: stderr lacks %q:\n%s", w, msg)
			}
		}
		if st1, err := os.Stat(s[0]); err != nil || !os.SameFile(st0, st1) || !st1.ModTime().Equal(st0.ModTime()) {
			t.Errorf("the complete base store was rewritten")
		}
		if got := resultSetNoTiming(t, out); !bytes.Equal(got, want) {
			t.Errorf("resumed result set differs:\n%s\n%s", got, want)
		}
		noTemps(t, rd)
	})
}

// A run directory of another comparison (data, engine, models), of a qppl
// eval run, or in use is refused with exit 2, naming what differs; the
// run directory is left as it was.
func TestCompareRunDirRefused(t *testing.T) {
	base, w4, w8, tokens := crdFixture(t)
	dir := t.TempDir()
	rd, cache, out := filepath.Join(dir, "run"), filepath.Join(dir, "cache"), filepath.Join(dir, "r.json")
	args := crdArgs(base, w4, w8, tokens, rd, cache, out, 16)
	mustRun(t, args...)
	idPath := filepath.Join(rd, compareJournalName)
	before, err := os.ReadFile(idPath)
	if err != nil {
		t.Fatal(err)
	}
	same := func(t *testing.T) {
		t.Helper()
		if after, _ := os.ReadFile(idPath); !bytes.Equal(before, after) {
			t.Error("a refused command modified " + idPath)
		}
	}
	drop := func(a []string, from, n int) []string {
		return append(append([]string(nil), a[:from]...), a[from+n:]...)
	}
	evalDir := filepath.Join(dir, "evalrun")
	mustRun(t, "eval", "--model", base, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--run-dir", evalDir)

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"stride", crdArgs(base, w4, w8, tokens, rd, cache, out, 8), []string{"data.stride: 16 in the run directory, 8 now", "windows: 7 in the run directory, 13 now"}},
		{"top-k", append(crdArgs(base, w4, w8, tokens, rd, cache, out, 16), "--top-k", "3"), []string{"engine: \"reference/fp64/base-f32/top-5\" in the run directory, \"reference/fp64/base-f32/top-3\" now"}},
		{"model dropped", drop(args, 7, 4), []string{`models.02-W8A16.label: "W8A16" in the run directory, (none) now`, `models.02-W8A16.model: "` + w8 + `" in the run directory, (none) now`}},
		{"label", append(crdArgs(base, w4, w8, tokens, rd, cache, out, 16), "--base-label", "bf"), []string{`models.00-base.label: "base" in the run directory, (none) now`, `models.00-bf.label: (none) in the run directory, "bf" now`}},
		{"model swapped", crdArgs(base, w8, w4, tokens, rd, cache, out, 16), []string{`models.01-W4A16_g32.model: "` + w4 + `" in the run directory, "` + w8 + `" now`, "models.01-W4A16_g32.model_hash: "}},
	}
	for _, tc := range tests {
		code, _, stderr := runQPPL(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, "\nqppl: --run-dir "+rd+" holds a different compare run (") ||
			!strings.HasSuffix(stderr, "): resume it with its original options, or use a new --run-dir\n") {
			t.Errorf("%s: exit %d, %s", tc.name, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
		same(t)
	}

	code, _, stderr := runQPPL(t, crdArgs(base, w4, w8, tokens, evalDir, cache, out, 16)...)
	if want := "qppl: --run-dir " + evalDir + " holds a qppl eval run (" + journalPath(evalDir) + "): use a new --run-dir for qppl compare\n"; code != 2 || !strings.HasSuffix(stderr, "\n"+want) {
		t.Errorf("eval run dir: exit %d\n got %q\nwant %q", code, stderr, want)
	}

	// And the other way round: qppl eval refuses a compare run directory.
	code, _, stderr = runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--ctx", "16", "--stride", "16", "--run-dir", rd)
	if want := "qppl: --run-dir " + rd + " holds a qppl compare run, not an eval run: use a new --run-dir\n"; code != 2 || !strings.HasSuffix(stderr, want) {
		t.Errorf("compare run dir given to eval: exit %d\n got %q\nwant %q", code, stderr, want)
	}
	if _, err := os.Stat(journalPath(rd)); err == nil {
		t.Error("eval wrote a journal into a compare run directory")
	}
	same(t)

	c, err := journal.Read(idPath)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.Open(idPath, c.Identity)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runQPPL(t, args...)
	j.Close()
	if want := "journal: in use by another process: " + idPath; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("busy run dir: exit %d, %s", code, stderr)
	}
	same(t)

	// The same command again: every model reduced from its journal
	// (--no-cache), the same result set.
	first := resultSetNoTiming(t, out)
	_, _, stderr = runQPPL(t, append(args, "--no-cache")...)
	if strings.Count(stderr, "windows already done") != 2 || !strings.Contains(stderr, "qppl: base: reusing its finished windows") {
		t.Errorf("rerun: stderr %s", stderr)
	}
	if got := resultSetNoTiming(t, out); !bytes.Equal(got, first) {
		t.Error("rerun from the journals differs")
	}
}

func TestModelSubdir(t *testing.T) {
	for _, tc := range []struct {
		i     int
		label string
		want  string
	}{
		{0, "base", "00-base"},
		{1, "W4A16 g32", "01-W4A16_g32"},
		{2, "[red] NVFP4 / 4.5 bpw", "02-red_NVFP4_4.5_bpw"},
		{3, "..", "03-model"},
		{12, "ü", "12-model"},
		{4, strings.Repeat("a", 60), "04-" + strings.Repeat("a", 48)},
		{123, "x", "123-x"},
	} {
		if got := modelSubdir(tc.i, tc.label); got != tc.want {
			t.Errorf("modelSubdir(%d, %q) = %q, want %q", tc.i, tc.label, got, tc.want)
		}
	}
}
