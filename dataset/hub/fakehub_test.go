package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub mimics the hub's /resolve/ endpoints: LFS files answer HEAD with a
// 302 to a CDN path plus X-Linked-Etag/X-Linked-Size, regular files with an
// ETag (git blob sha1); the CDN honours Range requests. Knobs simulate an
// interrupted transfer, corrupt bytes, private repositories and renames.
type fakeHub struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	repos    map[string]*fakeRepo // key: "datasets/Salesforce/wikitext" or "org/name"
	renamed  map[string]string    // old key → new key
	blobs    map[string][]byte    // sha256 → content (the CDN)
	cutAfter int                  // >0: the next CDN GET stops after this many bytes
	corrupt  bool                 // the CDN serves flipped bytes
	requests []fakeRequest
}

type fakeRequest struct {
	Method, Path, Range, Auth string
}

type fakeRepo struct {
	private bool
	token   string            // accepted token for a private repo
	refs    map[string]string // revision → commit
	files   map[string]map[string]fakeFile
}

type fakeFile struct {
	data []byte
	lfs  bool
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{t: t, repos: map[string]*fakeRepo{}, renamed: map[string]string{}, blobs: map[string][]byte{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func commitOf(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func gitSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// addFile puts a file in repo key at revision "main" (commit derived from key).
func (h *fakeHub) addFile(key, name string, data []byte, lfs bool) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.repos[key]
	if r == nil {
		r = &fakeRepo{refs: map[string]string{"main": commitOf(key)}, files: map[string]map[string]fakeFile{}}
		h.repos[key] = r
	}
	c := r.refs["main"]
	if r.files[c] == nil {
		r.files[c] = map[string]fakeFile{}
	}
	r.files[c][name] = fakeFile{data, lfs}
	if lfs {
		h.blobs[sha256Hex(data)] = data
	}
	return c
}

func (h *fakeHub) log() []fakeRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]fakeRequest(nil), h.requests...)
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, fakeRequest{r.Method, r.URL.Path, r.Header.Get("Range"), r.Header.Get("Authorization")})
	h.mu.Unlock()
	if rest, ok := strings.CutPrefix(r.URL.Path, "/cdn/"); ok {
		h.serveCDN(w, r, rest)
		return
	}
	key, tail, ok := strings.Cut(r.URL.Path[1:], "/resolve/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	if nk, ok := h.renamed[key]; ok {
		h.mu.Unlock()
		w.Header().Set("Location", "/"+nk+"/resolve/"+tail)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	repo := h.repos[key]
	h.mu.Unlock()
	fail := func(status int, code string) {
		w.Header().Set("X-Error-Code", code)
		w.Header().Set("X-Error-Message", code+" for "+key)
		w.WriteHeader(status)
	}
	if repo == nil {
		fail(http.StatusNotFound, "RepoNotFound")
		return
	}
	if repo.private && r.Header.Get("Authorization") != "Bearer "+repo.token {
		fail(http.StatusUnauthorized, "RepoNotFound")
		return
	}
	rev, name, _ := strings.Cut(tail, "/")
	commit := rev
	if c, ok := repo.refs[rev]; ok {
		commit = c
	}
	files, ok := repo.files[commit]
	if !ok {
		fail(http.StatusNotFound, "RevisionNotFound")
		return
	}
	f, ok := files[name]
	if !ok {
		fail(http.StatusNotFound, "EntryNotFound")
		return
	}
	w.Header().Set("X-Repo-Commit", commit)
	if f.lfs {
		sum := sha256Hex(f.data)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(f.data)))
		w.Header().Set("ETag", `"`+gitSHA1([]byte("pointer "+sum))+`"`)
		w.Header().Set("Location", h.srv.URL+"/cdn/"+sum+"?X-Amz-Signature=abc")
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitSHA1(f.data)+`"`)
	w.Header().Set("Content-Length", fmt.Sprint(len(f.data)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(f.data)
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request, sum string) {
	if r.Header.Get("Authorization") != "" {
		h.t.Errorf("the token was sent to the CDN")
	}
	h.mu.Lock()
	data, ok := h.blobs[sum]
	cut := h.cutAfter
	h.cutAfter = 0
	corrupt := h.corrupt
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if corrupt {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 1
	}
	if cut > 0 {
		// Announce everything, send cut bytes, then drop the connection.
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:cut])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(w, r, "blob", time.Unix(0, 0), strings.NewReader(string(data)))
}

// env returns an Env reading only m.
func env(m map[string]string) Env {
	return Env{Getenv: func(k string) string { return m[k] }}
}
