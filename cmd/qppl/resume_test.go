package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qppl/qppl/journal"
)

// childArgsEnv switches the test binary into `qppl` itself: TestMain runs
// run() with the JSON-encoded arguments and exits with its code. The
// kill-and-resume and signal tests spawn the test binary this way.
const childArgsEnv = "QPPL_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if a := os.Getenv(childArgsEnv); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			os.Stderr.WriteString("bad " + childArgsEnv + ": " + err.Error() + "\n")
			os.Exit(99)
		}
		os.Exit(run(append([]string{"qppl"}, args...), os.Stdin, os.Stdout, os.Stderr))
	}
	// compare's default cache is the user cache directory: tests that
	// give no --cache-dir must not write into the real one.
	tmp, err := os.MkdirTemp("", "qppl-test-cache-")
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(99)
	}
	os.Setenv("XDG_CACHE_HOME", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// startChild starts `qppl args...` as a child process (this test binary).
func startChild(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

// exitCode waits for cmd and returns its exit code (-1 when killed).
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatal(err)
	return 0
}

// journalRecords is the number of complete records in dir's journal (0 when
// there is none yet) and the size of its torn tail.
func journalRecords(dir string) (int, int64) {
	c, err := journal.Read(journalPath(dir))
	if err != nil {
		return 0, 0
	}
	return len(c.Records), c.Torn
}

// resultNoTiming reads a result JSON with its timing object removed.
func resultNoTiming(t *testing.T, path string) []byte {
	t.Helper()
	m := readJSONObject(t, path)
	if _, ok := m["timing"]; !ok {
		t.Errorf("%s: no timing object", path)
	}
	delete(m, "timing")
	out, _ := json.Marshal(m)
	return out
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runQPPL(t, args...)
	if code != 0 {
		t.Fatalf("qppl %v: exit %d: %s", args, code, stderr)
	}
	return stdout
}

// resumeTokens makes 599 windows of 16 tokens (about a millisecond each)
// in the kill test.
const resumeTokens = 615

// A run killed with SIGKILL at random points (seeded delays) and resumed
// gives a JSON bit-identical, timing aside, to an uninterrupted run.
func TestResumeAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	model, tokens := evalFixture(t, 3, resumeTokens)
	dir := t.TempDir()
	args := func(runDir, out string) []string {
		return []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "1", "--run-dir", runDir, "--json", out}
	}
	whole := filepath.Join(dir, "whole.json")
	t0 := time.Now()
	mustRun(t, args(filepath.Join(dir, "whole"), whole)...)
	full := time.Since(t0)
	const total = resumeTokens - 16 + 1 - 1 // range(0, n-ctx, 1)
	if n, _ := journalRecords(filepath.Join(dir, "whole")); n != total {
		t.Fatalf("uninterrupted journal holds %d windows, want %d", n, total)
	}

	rng := rand.New(rand.NewPCG(7, 11))
	rd, out := filepath.Join(dir, "killed"), filepath.Join(dir, "killed.json")
	midRun, prev := 0, 0
	for kill := 0; kill < 5; kill++ {
		cmd, stderr := startChild(t, args(rd, out)...)
		delay := time.Duration((0.05 + 0.5*rng.Float64()) * float64(full))
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		code := exitCode(t, cmd)
		n, torn := journalRecords(rd)
		t.Logf("kill %d after %v: exit %d, %d windows journaled (+%d), torn tail %d bytes", kill, delay, code, n, n-prev, torn)
		if code == 0 {
			break
		}
		if code != -1 {
			t.Fatalf("child exit %d: %s", code, stderr)
		}
		if n > prev && n < total {
			midRun++
		}
		prev = n
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("killed run left %s", out)
		}
	}
	if midRun == 0 {
		t.Fatalf("no kill landed in the middle of the run (uninterrupted run took %v)", full)
	}
	mustRun(t, args(rd, out)...)
	if a, b := resultNoTiming(t, whole), resultNoTiming(t, out); !bytes.Equal(a, b) {
		t.Errorf("resumed result differs:\n%s\n%s", a, b)
	}
	if n, torn := journalRecords(rd); n != total || torn != 0 {
		t.Errorf("journal holds %d windows (torn %d), want %d", n, torn, total)
	}
}

// A journal cut at any byte (what SIGKILL during an append leaves) resumes
// to the uninterrupted result: deterministic companion of the kill test.
func TestResumeFromTruncatedJournal(t *testing.T) {
	model, tokens := evalFixture(t, 4, 60)
	dir := t.TempDir()
	args := func(runDir, out string) []string {
		return []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "4", "--run-dir", runDir, "--json", out}
	}
	whole := filepath.Join(dir, "whole.json")
	mustRun(t, args(filepath.Join(dir, "whole"), whole)...)
	want := resultNoTiming(t, whole)
	jb, err := os.ReadFile(journalPath(filepath.Join(dir, "whole")))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	cuts := []int{0, 3, 8, 20, len(jb) - 1}
	for range 6 {
		cuts = append(cuts, rng.IntN(len(jb)))
	}
	for i, cut := range cuts {
		rd := filepath.Join(dir, "cut", string(rune('a'+i)))
		if err := os.MkdirAll(rd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(journalPath(rd), jb[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(rd, "r.json")
		mustRun(t, args(rd, out)...)
		if got := resultNoTiming(t, out); !bytes.Equal(got, want) {
			t.Errorf("journal cut at byte %d of %d: resumed result differs:\n%s\n%s", cut, len(jb), got, want)
		}
	}
}

// Resuming with different options is refused (exit 2) naming what differs;
// the journal is left as it was.
func TestResumeIdentityMismatch(t *testing.T) {
	model, tokens := evalFixture(t, 5, 60)
	other, _ := evalFixture(t, 6, 10)
	rd := filepath.Join(t.TempDir(), "run")
	mustRun(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "8", "--run-dir", rd)
	before, _ := os.ReadFile(journalPath(rd))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--model", model, "--ctx", "16", "--stride", "4"}, "data.stride: 8 in the journal, 4 now"},
		{[]string{"--model", model, "--ctx", "16", "--stride", "8", "--label", "x"}, `label: (none) in the journal, "x" now`},
		{[]string{"--model", other, "--ctx", "16", "--stride", "8"}, "model_hash: "},
		{[]string{"--model", model, "--ctx", "16", "--stride", "8", "--top-k", "3"}, "top_k: 5 in the journal, 3 now"},
	}
	for _, tc := range tests {
		code, _, stderr := runQPPL(t, append([]string{"eval", "--tokens", tokens, "--run-dir", rd}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, "qppl: --run-dir "+rd+" holds a different run (") || !strings.Contains(stderr, tc.want) ||
			!strings.Contains(stderr, "resume it with its original options, or use a new --run-dir") {
			t.Errorf("%v: exit %d, %s", tc.args, code, stderr)
		}
	}
	after, _ := os.ReadFile(journalPath(rd))
	if !bytes.Equal(before, after) {
		t.Error("a refused resume modified the journal")
	}
}

// SIGINT and SIGTERM: the child stops, keeps its journal, prints the
// command that resumes it, exits 130 / 143 and writes no output file; the
// resumed run equals an uninterrupted one.
func TestInterruptSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	model, tokens := evalFixture(t, 8, 300)
	dir := t.TempDir()
	args := func(runDir, out string) []string {
		return []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "1", "--run-dir", runDir, "--json", out}
	}
	whole := filepath.Join(dir, "whole.json")
	mustRun(t, args(filepath.Join(dir, "whole"), whole)...)
	want := resultNoTiming(t, whole)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		rd, out := filepath.Join(dir, tc.name), filepath.Join(dir, tc.name+".json")
		cmd, stderr := startChild(t, args(rd, out)...)
		deadline := time.Now().Add(20 * time.Second)
		for {
			if n, _ := journalRecords(rd); n >= 20 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		cmd.Process.Signal(tc.sig)
		code := exitCode(t, cmd)
		n, torn := journalRecords(rd)
		if code != tc.code {
			t.Fatalf("%s: exit %d, want %d; stderr:\n%s", tc.name, code, tc.code, stderr)
		}
		msg := stderr.String()
		for _, w := range []string{
			"qppl: " + tc.name + ": stopping: the window in flight is abandoned",
			"windows are saved in " + journalPath(rd),
			"qppl: resume with:\n  " + shellQuote(append([]string{"qppl"}, args(rd, out)...)) + "\n",
		} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, msg)
			}
		}
		if torn != 0 || n < 20 {
			t.Errorf("%s: journal %d windows, torn %d", tc.name, n, torn)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tc.name+".json") {
				t.Errorf("%s: interrupted run left %s", tc.name, e.Name())
			}
		}
		mustRun(t, args(rd, out)...)
		if got := resultNoTiming(t, out); !bytes.Equal(got, want) {
			t.Errorf("%s: resumed result differs", tc.name)
		}
	}
}

func TestShellQuote(t *testing.T) {
	got := shellQuote([]string{"qppl", "eval", "--model", "/a b/c", "--label", "it's", "--rows", "", "--x=1,2"})
	want := `qppl eval --model '/a b/c' --label 'it'\''s' --rows '' --x=1,2`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A panic inside a command is reported as an internal error, exit 1.
func TestRunRecoversPanic(t *testing.T) {
	var errb bytes.Buffer
	code := run([]string{"qppl", "version"}, strings.NewReader(""), panicWriter{}, &errb)
	if code != 1 || !strings.Contains(errb.String(), "qppl: internal error: boom (please report this bug with the command line)") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("boom") }

// A damaged journal and a journal held by another process are refused
// (exit 2) with the file named; nothing is evaluated into them.
func TestResumeCorruptOrBusyJournal(t *testing.T) {
	model, tokens := evalFixture(t, 5, 60)
	rd := filepath.Join(t.TempDir(), "run")
	args := []string{"eval", "--model", model, "--tokens", tokens, "--ctx", "16", "--stride", "8", "--run-dir", rd}
	mustRun(t, args...)
	c, err := journal.Read(journalPath(rd))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.Open(journalPath(rd), c.Identity)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runQPPL(t, args...)
	j.Close()
	want := "qppl: --run-dir " + rd + ": journal: in use by another process: " + journalPath(rd) + " (is the same run still going, or started twice?)\n"
	if code != 2 || stderr != want {
		t.Errorf("busy journal: exit %d\n got %q\nwant %q", code, stderr, want)
	}
	b, _ := os.ReadFile(journalPath(rd))
	b[len(b)-len(c.Records[len(c.Records)-1])-20] ^= 0x40 // inside the second-to-last record
	os.WriteFile(journalPath(rd), b, 0o644)
	code, _, stderr = runQPPL(t, args...)
	if want := "qppl: --run-dir " + rd + ": journal: corrupt: " + journalPath(rd) + ": checksum mismatch in record at byte "; code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("corrupt journal: exit %d\n got %q\nwant %q…", code, stderr, want)
	}
}

// readJSONObject reads a JSON object file written by qppl.
func readJSONObject(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
