package main

// Resumable and sharded runs (--run-dir, --shard, qppl merge).
//
// A run directory holds one journal file, journal.qppl (package journal).
// Its header is the run's identity: canonical JSON (keys sorted) of
// runIdentity, which records everything that determines the final result
// apart from the window results themselves. Each record is one finished
// window's compare.WindowResult (MarshalBinary), appended and fsync'd as
// soon as the window is done. A run resumes by skipping the journaled
// windows and reducing journaled + new results; merge reduces the union of
// several shard journals. Because compare.Reduce sorts by window index and
// sums per window in a fixed order, all three give bit-identical results.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/journal"
)

// journalName is the journal's file name inside a run directory.
const journalName = "journal.qppl"

// identityVersion is bumped when runIdentity changes meaning.
const identityVersion = 1

// runIdentity is the journal header of a run directory: the inputs that
// decide the result (data spec, token-stream hash, model files hash,
// method, windows, backend, precision, KL base, shard) and the descriptive
// fields of the final JSON, so that `qppl merge` can write exactly what an
// unsharded `qppl eval` writes.
type runIdentity struct {
	Version int    `json:"version"`
	Command string `json:"command"`

	Model     string `json:"model"`
	ModelHash string `json:"model_hash"`
	Label     string `json:"label"`
	Backend   string `json:"backend"`
	Precision string `json:"precision"`

	Data         compare.DataSpec `json:"data"`
	DataSpecHash string           `json:"data_spec_hash"`
	Windows      int              `json:"windows"`

	KLMode       string `json:"kl_mode"`
	KLBaseKey    string `json:"kl_base_key"`
	KLBaseFormat string `json:"kl_base_format"`
	TopK         int    `json:"top_k"`

	Words     int64  `json:"words"`
	Bytes     int64  `json:"bytes"`
	Bootstrap int    `json:"bootstrap"`
	Seed      uint64 `json:"seed"`

	BPWLayer float64 `json:"bpw_layer"`
	BPWHead  float64 `json:"bpw_head"`
	VRAMGB   float64 `json:"vram_gb"`
	Format   string  `json:"format"`

	// Shard is "I/N" for a sharded run, "" for a whole run.
	Shard string `json:"shard"`
}

// canonical returns the identity as JSON with sorted keys at every level.
func (id *runIdentity) canonical() ([]byte, error) {
	b, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(b)
}

// canonicalJSON re-encodes a JSON document with object keys sorted
// (encoding/json sorts map keys), numbers kept as written.
func canonicalJSON(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// parseIdentity decodes a journal header written by canonical.
func parseIdentity(b []byte, path string) (*runIdentity, error) {
	var id runIdentity
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&id); err != nil {
		return nil, fmt.Errorf("%s: the journal header is not a qppl run identity: %v", path, err)
	}
	if id.Version != identityVersion {
		return nil, fmt.Errorf("%s: run identity version %d, this qppl reads version %d", path, id.Version, identityVersion)
	}
	return &id, nil
}

// identityDiff lists the fields in which two canonical identities differ,
// as "field: A in aName, B in bName", nested fields dotted.
func identityDiff(old, cur []byte, aName, bName string) []string {
	var a, b map[string]any
	da, db := json.NewDecoder(bytes.NewReader(old)), json.NewDecoder(bytes.NewReader(cur))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&a) != nil || db.Decode(&b) != nil {
		return []string{"identity not readable"}
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if fa[k] != fb[k] {
			out = append(out, fmt.Sprintf("%s: %s %s, %s %s", k, orNone(fa[k]), aName, orNone(fb[k]), bName))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" || s == `""` {
		return "(none)"
	}
	return s
}

func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, x, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	out[prefix] = string(b)
}

// runDir is an open run directory.
type runDir struct {
	dir  string
	j    *journal.Journal
	done []compare.WindowResult
}

// openRunDir opens (creating when needed) the journal in dir for a run
// with identity id over windows ws, and returns the journaled windows. A
// journal of a different run is refused (usage error) with the fields that
// differ.
func openRunDir(dir string, id *runIdentity, ws []backends.Window) (*runDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, usageErr(fmt.Errorf("--run-dir: %w", err))
	}
	if _, err := os.Stat(filepath.Join(dir, compareJournalName)); err == nil {
		return nil, usageErr(fmt.Errorf("--run-dir %s holds a qppl compare run, not an eval run: use a new --run-dir", dir))
	}
	cur, err := id.canonical()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, journalName)
	j, recs, err := journal.Open(path, cur)
	if errors.Is(err, journal.ErrIdentity) {
		msg := fmt.Sprintf("--run-dir %s holds a different run", dir)
		if c, rerr := journal.Read(path); rerr == nil {
			msg += " (" + strings.Join(identityDiff(c.Identity, cur, "in the journal", "now"), "; ") + ")"
		}
		return nil, usageErr(fmt.Errorf("%s: resume it with its original options, or use a new --run-dir", msg))
	}
	if err != nil {
		return nil, usageErr(fmt.Errorf("--run-dir %s: %w", dir, err))
	}
	shard, _ := compare.ParseShard(id.Shard)
	done, err := decodeRecords(path, recs, ws, shard)
	if err != nil {
		j.Close()
		return nil, usageErr(err)
	}
	return &runDir{dir: dir, j: j, done: done}, nil
}

// decodeRecords decodes journal records and checks each against the run's
// windows: a known index of this shard, the window's shape, no repeats.
func decodeRecords(path string, recs [][]byte, ws []backends.Window, shard compare.Shard) ([]compare.WindowResult, error) {
	out := make([]compare.WindowResult, 0, len(recs))
	seen := make(map[int]bool, len(recs))
	for i, rec := range recs {
		var wr compare.WindowResult
		if err := wr.UnmarshalBinary(rec); err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		if ws != nil {
			if wr.Index < 0 || wr.Index >= len(ws) || !shard.Has(wr.Index) {
				return nil, fmt.Errorf("%s: record %d holds window %d, which this run does not have", path, i, wr.Index)
			}
			if w := ws[wr.Index]; w.First != wr.First || len(w.Tokens) != wr.Len {
				return nil, fmt.Errorf("%s: record %d: window %d has shape %d/%d, the run's window %d/%d", path, i, wr.Index, wr.First, wr.Len, w.First, len(w.Tokens))
			}
		}
		if seen[wr.Index] {
			return nil, fmt.Errorf("%s: window %d is journaled twice", path, wr.Index)
		}
		seen[wr.Index] = true
		out = append(out, wr)
	}
	return out, nil
}

// append journals one finished window (fsync'd before it returns).
func (r *runDir) append(wr compare.WindowResult) error {
	b, err := wr.MarshalBinary()
	if err != nil {
		return err
	}
	return r.j.Append(b)
}

func (r *runDir) close() error { return r.j.Close() }

// journalPath is the journal file of a run directory.
func journalPath(dir string) string { return filepath.Join(dir, journalName) }

// interruptedError is returned by a run that stopped on a signal or
// cancellation; run prints the resume command for it.
type interruptedError struct {
	err          error
	runDir       string // "" without --run-dir
	done, total  int    // windows journaled / of this run (shard)
	cmdForResume string
	// note, when set (compare --run-dir), replaces the count of saved
	// windows in the message.
	note string
}

func (e *interruptedError) Error() string {
	if e.runDir == "" {
		return fmt.Sprintf("%v; nothing was saved (no --run-dir): rerun with --run-dir DIR to make the run resumable", e.err)
	}
	if e.note != "" {
		return fmt.Sprintf("%v; %s", e.err, e.note)
	}
	return fmt.Sprintf("%v; %d of %d windows are saved in %s", e.err, e.done, e.total, journalPath(e.runDir))
}

func (e *interruptedError) Unwrap() error { return e.err }

// shellQuote quotes args for a POSIX shell, leaving plain words as they are.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,@%+") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// sortedShards formats shard names for messages.
func sortedShards(m map[int]string, n int) string {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprintf("%d/%d", k, n)
	}
	return strings.Join(s, ", ")
}
