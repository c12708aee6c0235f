package suite

// qppl compare --run-dir DIR: a multi-model comparison that survives
// interruption.
//
// DIR/compare.qppl is a journal without records whose header is the
// comparison's identity (Identity: data spec, windows, KL mode,
// engine, external base, and every model's label, directory and file
// hash). It is held (locked) for the whole command, so two processes never
// share a run directory, and a command with another identity is refused
// (exit 2) with the fields that differ.
//
// Each model has a subdirectory DIR/NN-label/ holding an eval-style
// journal (journal.qppl, an eval.Identity with command "compare") of
// its finished windows: a model resumes after its last journaled window, a
// finished model is reduced from its journal without a forward pass. The
// base model's log-prob store (unless the model spec's out_logits names
// another directory) is DIR/NN-label/<key>.qlp, written to a temporary
// file renamed into place when complete. A complete store is reused; a
// store that was not finished cannot be appended to, so the base model is
// then evaluated again from its first window (its journal is discarded:
// the base's window results must come from the same forward passes that
// wrote the store).
//
// Everything reduced is bit-identical to an uninterrupted run, because
// compare.Reduce sorts window results by index and sums in a fixed order,
// whether they came from the journal or from this process.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/eval"
	"github.com/qppl/qppl/journal"
)

// IdentityVersion is bumped when Identity changes meaning.
const IdentityVersion = 1

// Identity is the header of DIR/compare.qppl: the comparison a compare run
// directory holds.
type Identity struct {
	Version int    `json:"version"`
	Command string `json:"command"`

	Data         compare.DataSpec `json:"data"`
	DataSpecHash string           `json:"data_spec_hash"`
	Windows      int              `json:"windows"`
	KLMode       string           `json:"kl_mode"`
	// Engine is the evaluator's engine string: backend, precision, base
	// store encoding, top-k and KL rows.
	Engine string `json:"engine"`
	// ExternalBase is the key of --kld-base log-probs ("" when none).
	ExternalBase string `json:"external_base"`
	// Models are keyed by their subdirectory (NN-label).
	Models map[string]ModelIdentity `json:"models"`
}

// ModelIdentity is one model of a compare run.
type ModelIdentity struct {
	Label     string `json:"label"`
	Model     string `json:"model"`
	ModelHash string `json:"model_hash"`
	Base      bool   `json:"base"`
}

// RunDir is an open compare run directory.
type RunDir struct {
	Dir  string
	j    *journal.Journal // DIR/compare.qppl, held for the lock
	subs map[string]string
	log  io.Writer
}

// ModelSubdir names model i's subdirectory: its index and its label with
// every character outside [A-Za-z0-9._-] replaced by '_' (unique through
// the index, readable through the label).
func ModelSubdir(i int, label string) string {
	var b strings.Builder
	under := false
	for _, r := range label {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok {
			r = '_'
		}
		if r == '_' && under {
			continue
		}
		under = r == '_'
		b.WriteRune(r)
	}
	s := strings.Trim(b.String(), "_.")
	if len(s) > 48 {
		s = strings.TrimRight(s[:48], "_.")
	}
	if s == "" {
		s = "model"
	}
	return fmt.Sprintf("%02d-%s", i, s)
}

// subKey identifies a model spec for the subdirectory map.
func subKey(m ModelSpec) string { return m.Label + "\x00" + m.ModelDir }

// OpenRunDir creates or reopens dir for the comparison of models
// (in run order, hashes alongside) described by id (Models is filled
// here). A directory of another comparison or of a qppl eval run is
// refused (*eval.InputError). Log receives a line per resumed model.
func OpenRunDir(dir string, id *Identity, models []ModelSpec, hashes []string, log io.Writer) (*RunDir, error) {
	if _, err := os.Stat(eval.JournalPath(dir)); err == nil {
		return nil, eval.Input(fmt.Errorf("--run-dir %s holds a qppl eval run (%s): use a new --run-dir for qppl compare", dir, eval.JournalPath(dir)))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, eval.Input(fmt.Errorf("--run-dir: %w", err))
	}
	id.Version, id.Command = IdentityVersion, "compare"
	id.Models = make(map[string]ModelIdentity, len(models))
	subs := make(map[string]string, len(models))
	for i, m := range models {
		s := ModelSubdir(i, m.Label)
		id.Models[s] = ModelIdentity{Label: m.Label, Model: m.ModelDir, ModelHash: hashes[i], Base: m.Base}
		subs[subKey(m)] = s
	}
	cur, err := id.canonical()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, eval.CompareJournalName)
	// Continue the comparison that started the directory when the keys
	// agree (model and data paths are information only).
	header := cur
	if c, rerr := journal.Read(path); rerr == nil {
		var old Identity
		if json.Unmarshal(c.Identity, &old) == nil {
			oldKey, err1 := old.key()
			curKey, err2 := id.key()
			if err := errors.Join(err1, err2); err != nil {
				return nil, err
			}
			if string(oldKey) != string(curKey) { // every field that differs, the deciding ones among them
				msg := fmt.Sprintf("--run-dir %s holds a different compare run (%s)", dir, strings.Join(eval.IdentityDiff(c.Identity, cur, "in the run directory", "now"), "; "))
				return nil, eval.Input(fmt.Errorf("%s: resume it with its original options, or use a new --run-dir", msg))
			}
			header = c.Identity
		}
	}
	j, _, err := journal.Open(path, header)
	if errors.Is(err, journal.ErrIdentity) {
		msg := fmt.Sprintf("--run-dir %s holds a different compare run", dir)
		if c, rerr := journal.Read(path); rerr == nil {
			msg += " (" + strings.Join(eval.IdentityDiff(c.Identity, cur, "in the run directory", "now"), "; ") + ")"
		}
		return nil, eval.Input(fmt.Errorf("%s: resume it with its original options, or use a new --run-dir", msg))
	}
	if err != nil {
		return nil, eval.Input(fmt.Errorf("--run-dir %s: %w", dir, err))
	}
	return &RunDir{Dir: dir, j: j, subs: subs, log: log}, nil
}

// canonical is the identity as canonical JSON.
func (id *Identity) canonical() ([]byte, error) {
	raw, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	return eval.CanonicalJSON(raw)
}

// key is the part of the identity that decides the results: as
// eval.Identity.Key, paths are information only (the models' and the
// data's hashes decide), and so is the number of windows (each model's
// journal checks its windows).
func (id *Identity) key() ([]byte, error) {
	k := *id
	k.Data.Source, k.Data.Tokenizer, k.Data.Join = "", "", ""
	k.Data.Rows, k.Windows, k.DataSpecHash = 0, 0, ""
	k.Models = make(map[string]ModelIdentity, len(id.Models))
	for sub, m := range id.Models {
		m.Model = ""
		k.Models[sub] = m
	}
	return k.canonical()
}

// Close releases the run directory's lock.
func (r *RunDir) Close() error { return r.j.Close() }

// ModelDir is the subdirectory of model m.
func (r *RunDir) ModelDir(m ModelSpec) (string, error) {
	s, ok := r.subs[subKey(m)]
	if !ok {
		return "", fmt.Errorf("compare --run-dir: model %q (%s) is not part of this run", m.Label, m.ModelDir)
	}
	return filepath.Join(r.Dir, s), nil
}

// contains reports whether path lies inside the run directory.
func (r *RunDir) contains(path string) bool {
	rel, err := filepath.Rel(r.Dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// removeStaleTemps removes the temporary files an interrupted store
// writer left next to path.
func removeStaleTemps(path string) (int, error) {
	m, err := filepath.Glob(path + ".tmp*")
	if err != nil {
		return 0, err
	}
	for _, f := range m {
		if err := os.Remove(f); err != nil {
			return 0, fmt.Errorf("--run-dir: %w", err)
		}
	}
	return len(m), nil
}

// ModelHashes hashes every model's files once; the returned function
// serves Options.ModelHash from them.
// A cancelled ctx (SIGINT, SIGTERM) stops it between models.
func ModelHashes(ctx context.Context, models []ModelSpec) ([]string, func(string) (string, error), error) {
	hashes := make([]string, len(models))
	byDir := make(map[string]string, len(models))
	for i, m := range models {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("interrupted while hashing the model files: %w", err)
		}
		h, ok := byDir[m.ModelDir]
		if !ok {
			var err error
			if h, err = compare.ModelHash(m.ModelDir); err != nil {
				return nil, nil, fmt.Errorf("model %q (%s): %w", m.Label, m.Source, err)
			}
			byDir[m.ModelDir] = h
		}
		hashes[i] = h
	}
	return hashes, func(dir string) (string, error) {
		if h, ok := byDir[dir]; ok {
			return h, nil
		}
		return compare.ModelHash(dir)
	}, nil
}

// OpenModel opens job's journal in the run directory; id is the model's
// run identity (command "compare"), storePath its base log-prob store and
// storeComplete reports whether that store is complete. For the base model
// (*saveBase) a complete store with a complete journal is reused
// (*saveBase becomes false: nothing is evaluated); otherwise its journal is
// discarded and the base runs again from its first window, writing the
// store, since a store that was not finished cannot be continued.
func (r *RunDir) OpenModel(job Job, id *eval.Identity, storePath string, storeComplete func() bool, saveBase *bool) (*eval.RunDir, error) {
	sub, err := r.ModelDir(job.Model)
	if err != nil {
		return nil, err
	}
	ws := job.Data.Windows
	rd, err := eval.OpenRunDir(sub, id, ws)
	if err != nil {
		return nil, err
	}
	label := job.Model.Label
	if *saveBase {
		if len(rd.Done) == len(ws) && storeComplete() {
			*saveBase = false
			fmt.Fprintf(r.log, "qppl: %s: reusing its finished windows (%s) and complete log-prob store (%s)\n", label, eval.JournalPath(sub), storePath)
			return rd, nil
		}
		if r.contains(storePath) {
			if n, err := removeStaleTemps(storePath); err != nil {
				rd.Close()
				return nil, err
			} else if n > 0 {
				fmt.Fprintf(r.log, "qppl: %s: removed the unfinished log-prob store an interrupted run left (%s.tmp*)\n", label, storePath)
			}
		}
		if len(rd.Done) > 0 {
			fmt.Fprintf(r.log, "qppl: %s: its log-prob store is missing or was not finished: evaluating the base model again from its first window (%d journaled windows discarded)\n", label, len(rd.Done))
			rd.Close()
			if err := eval.ResetJournal(sub); err != nil {
				return nil, err
			}
			if rd, err = eval.OpenRunDir(sub, id, ws); err != nil {
				return nil, err
			}
		}
		return rd, nil
	}
	switch n := len(rd.Done); {
	case n == len(ws):
		fmt.Fprintf(r.log, "qppl: %s: all %d windows already done (%s)\n", label, n, eval.JournalPath(sub))
	case n > 0:
		fmt.Fprintf(r.log, "qppl: %s: resuming from %s: %d of %d windows already done\n", label, eval.JournalPath(sub), n, len(ws))
	}
	return rd, nil
}
