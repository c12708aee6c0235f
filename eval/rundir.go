package eval

// Resumable and sharded runs (--run-dir, --shard, qppl merge).
//
// A run directory holds one journal file, journal.qppl (package journal).
// Its header is the run's Identity (canonical JSON). Each record is one
// finished window's compare.WindowResult (MarshalBinary), appended and
// fsync'd as soon as the window is done. A run resumes by skipping the
// journaled windows and reducing journaled + new results; merge reduces the
// union of several shard journals. Because compare.Reduce sorts by window
// index and sums per window in a fixed order, all three give bit-identical
// results.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/journal"
)

// JournalName is the journal's file name inside a run directory.
const JournalName = "journal.qppl"

// CompareJournalName is the identity file of a qppl compare run directory
// (package compare/suite), which an eval run refuses to share.
const CompareJournalName = "compare.qppl"

// JournalPath is the journal file of a run directory.
func JournalPath(dir string) string { return filepath.Join(dir, JournalName) }

// RunDir is an open run directory: its journal, held (locked) until Close,
// and the windows it already holds.
type RunDir struct {
	Dir  string
	j    *journal.Journal
	Done []compare.WindowResult
}

// OpenRunDir opens (creating when needed) the journal in dir for a run with
// identity id over windows ws, and reads the journaled windows. A journal
// of a different run is refused (*InputError) with the fields that differ.
func OpenRunDir(dir string, id *Identity, ws []backends.Window) (*RunDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, Input(fmt.Errorf("--run-dir: %w", err))
	}
	if _, err := os.Stat(filepath.Join(dir, CompareJournalName)); err == nil {
		return nil, Input(fmt.Errorf("--run-dir %s holds a qppl compare run, not an eval run: use a new --run-dir", dir))
	}
	cur, err := id.Canonical()
	if err != nil {
		return nil, err
	}
	path := JournalPath(dir)
	// The journal's header is the identity of the run that started it;
	// this run continues it when their keys agree (paths, labels and
	// post-processing settings may differ).
	header := cur
	if c, rerr := journal.Read(path); rerr == nil {
		if old, perr := ParseIdentity(c.Identity, path); perr == nil {
			ok, _, _, err := sameKey(old, id)
			if err != nil {
				return nil, err
			}
			if !ok { // every field that differs, the deciding ones among them
				msg := fmt.Sprintf("--run-dir %s holds a different run (%s)", dir, strings.Join(IdentityDiff(c.Identity, cur, "in the journal", "now"), "; "))
				return nil, Input(fmt.Errorf("%s: resume it with its original options, or use a new --run-dir", msg))
			}
			header = c.Identity
		}
	}
	j, recs, err := journal.Open(path, header)
	if errors.Is(err, journal.ErrIdentity) {
		msg := fmt.Sprintf("--run-dir %s holds a different run", dir)
		if c, rerr := journal.Read(path); rerr == nil {
			msg += " (" + strings.Join(IdentityDiff(c.Identity, cur, "in the journal", "now"), "; ") + ")"
		}
		return nil, Input(fmt.Errorf("%s: resume it with its original options, or use a new --run-dir", msg))
	}
	if err != nil {
		return nil, Input(fmt.Errorf("--run-dir %s: %w", dir, err))
	}
	shard, _ := compare.ParseShard(id.Shard)
	done, err := DecodeRecords(path, recs, ws, shard)
	if err != nil {
		j.Close()
		return nil, Input(err)
	}
	return &RunDir{Dir: dir, j: j, Done: done}, nil
}

// sameKey reports whether two identities have the same Key, and returns
// both keys.
func sameKey(a, b *Identity) (bool, []byte, []byte, error) {
	ka, err := a.Key()
	if err != nil {
		return false, nil, nil, err
	}
	kb, err := b.Key()
	if err != nil {
		return false, nil, nil, err
	}
	return string(ka) == string(kb), kb, ka, nil
}

// DecodeRecords decodes journal records and checks each against the run's
// windows (when ws is not nil): a known index of this shard, the window's
// shape, no repeats.
func DecodeRecords(path string, recs [][]byte, ws []backends.Window, shard compare.Shard) ([]compare.WindowResult, error) {
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

// Append journals one finished window (fsync'd before it returns).
func (r *RunDir) Append(wr compare.WindowResult) error {
	b, err := wr.MarshalBinary()
	if err != nil {
		return err
	}
	return r.j.Append(b)
}

// Close releases the journal.
func (r *RunDir) Close() error { return r.j.Close() }

// ResetJournal removes the journal of dir so that its run starts afresh
// (compare's base model whose log-prob store was not finished). The caller
// holds the lock of the enclosing run directory.
func ResetJournal(dir string) error {
	if err := os.Remove(JournalPath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--run-dir: %w", err)
	}
	return nil
}
