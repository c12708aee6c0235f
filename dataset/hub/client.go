package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/qppl/qppl/internal/atomicfile"
)

// Client downloads files from a Hugging Face hub into a hub cache laid out
// as huggingface_hub lays it out:
//
//	<cache>/<models|datasets>--org--name/blobs/<etag>
//	<cache>/<models|datasets>--org--name/snapshots/<commit>/<file> → ../../blobs/<etag>
//	<cache>/<models|datasets>--org--name/refs/<revision>  (holds <commit>)
type Client struct {
	Endpoint string       // e.g. https://huggingface.co (no trailing slash)
	Token    string       // sent as "Authorization: Bearer" to the endpoint only
	HTTP     *http.Client // nil: http.DefaultClient
	Progress io.Writer    // nil: silent; else "name: x / y MB (z MB/s)" lines
	// Now is the clock of the progress meter; nil means time.Now.
	Now func() time.Time
}

// NewClient returns a client configured from cfg. A nil httpClient gets a
// client whose requests fail when a server sends no response headers within
// 30 s (as huggingface_hub's 10 s etag timeout, with room for slow links);
// a transfer itself is bounded only by the caller's context.
func NewClient(cfg Config, httpClient *http.Client, progress io.Writer) *Client {
	if httpClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 30 * time.Second
		httpClient = &http.Client{Transport: tr}
	}
	return &Client{Endpoint: cfg.Endpoint, Token: cfg.Token, HTTP: httpClient, Progress: progress}
}

// FileMetadata is what the hub's HEAD /resolve/ answer says about a file.
type FileMetadata struct {
	Commit   string // X-Repo-Commit
	ETag     string // X-Linked-Etag or ETag, normalized: sha256 for LFS files, git sha1 otherwise
	Size     int64  // X-Linked-Size or Content-Length; -1 if unknown
	Location string // where to GET the bytes (the CDN for LFS files)

	redirected bool // Location came from a redirect: never send the token there
}

// HTTPError is a failed hub request.
type HTTPError struct {
	URL     string
	Status  int
	Code    string // X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo)
	Message string // X-Error-Message
	Token   bool   // whether a token was sent
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d", e.URL, e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch {
	case e.Status == http.StatusUnauthorized && e.Token:
		msg += " (the token from HF_TOKEN was rejected, or the repository does not exist)"
	case e.Status == http.StatusUnauthorized:
		msg += " (the repository is private or gated, or does not exist: set HF_TOKEN to a token with access, see https://huggingface.co/settings/tokens)"
	case e.Status == http.StatusForbidden:
		msg += " (access denied: for a gated repository, accept its conditions on the hub and set HF_TOKEN)"
	case e.Status == http.StatusNotFound && e.Code == "RevisionNotFound":
		msg += " (no such revision)"
	case e.Status == http.StatusNotFound && e.Code == "RepoNotFound":
		msg += " (no such repository; if it is private set HF_TOKEN)"
	case e.Status == http.StatusNotFound:
		msg += " (no such file)"
	}
	return msg
}

// IsNotFound reports whether err is a 404 for a missing file (not a missing
// repository or revision).
func IsNotFound(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == http.StatusNotFound && (he.Code == "" || he.Code == "EntryNotFound")
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// ResolveURL is the hub URL of filename in repo at revision.
func (c *Client) ResolveURL(repo Repo, revision, filename string) string {
	segs := strings.Split(filename, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return c.Endpoint + "/" + repo.urlPrefix() + repo.ID + "/resolve/" + url.PathEscape(revision) + "/" + strings.Join(segs, "/")
}

func (c *Client) sameHost(u string) bool {
	a, err1 := url.Parse(c.Endpoint)
	b, err2 := url.Parse(u)
	return err1 == nil && err2 == nil && a.Host == b.Host
}

func (c *Client) newRequest(ctx context.Context, method, u string, auth bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "qppl")
	req.Header.Set("Accept-Encoding", "identity")
	if auth && c.Token != "" && c.sameHost(u) {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

func (c *Client) statusError(u string, resp *http.Response, tokenSent bool) error {
	return &HTTPError{
		URL: u, Status: resp.StatusCode,
		Code:    resp.Header.Get("X-Error-Code"),
		Message: resp.Header.Get("X-Error-Message"),
		Token:   tokenSent,
	}
}

// Metadata asks the hub about filename with a HEAD request that follows
// relative redirects (renamed repositories) but not redirects to another
// host (the CDN), as huggingface_hub does.
func (c *Client) Metadata(ctx context.Context, repo Repo, revision, filename string) (FileMetadata, error) {
	if err := validRepoPath(filename); err != nil {
		return FileMetadata{}, err
	}
	hc := *c.httpClient()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	u := c.ResolveURL(repo, revision, filename)
	for hops := 0; ; hops++ {
		req, err := c.newRequest(ctx, http.MethodHead, u, true)
		if err != nil {
			return FileMetadata{}, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return FileMetadata{}, fmt.Errorf("hub: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
			loc := resp.Header.Get("Location")
			target, err := url.Parse(loc)
			if err != nil || loc == "" {
				return FileMetadata{}, fmt.Errorf("hub: %s: bad redirect %q", u, loc)
			}
			if target.Host == "" && hops < 10 {
				base, _ := url.Parse(u)
				u = base.ResolveReference(target).String()
				continue
			}
			m, err := c.metadataFrom(u, resp, base(u).ResolveReference(target).String())
			m.redirected = true
			return m, err
		}
		if resp.StatusCode != http.StatusOK {
			return FileMetadata{}, fmt.Errorf("hub: %w", c.statusError(u, resp, c.Token != "" && c.sameHost(u)))
		}
		return c.metadataFrom(u, resp, u)
	}
}

func base(u string) *url.URL {
	b, err := url.Parse(u)
	if err != nil {
		return &url.URL{}
	}
	return b
}

func (c *Client) metadataFrom(u string, resp *http.Response, location string) (FileMetadata, error) {
	m := FileMetadata{Commit: resp.Header.Get("X-Repo-Commit"), Location: location, Size: -1}
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	m.ETag = normalizeETag(etag)
	size := resp.Header.Get("X-Linked-Size")
	if size == "" {
		size = resp.Header.Get("Content-Length")
	}
	if size != "" {
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil || n < 0 {
			return m, fmt.Errorf("hub: %s: bad size header %q", u, size)
		}
		m.Size = n
	}
	if !isCommitHash(m.Commit) {
		return m, fmt.Errorf("hub: %s: the server sent no valid X-Repo-Commit header (%q); is HF_ENDPOINT a Hugging Face hub?", u, m.Commit)
	}
	if !validETag(m.ETag) {
		return m, fmt.Errorf("hub: %s: the server sent no usable ETag (%q)", u, etag)
	}
	return m, nil
}

func normalizeETag(e string) string {
	e = strings.TrimSpace(e)
	e = strings.TrimPrefix(e, "W/")
	return strings.Trim(e, `"`)
}

func validETag(e string) bool {
	if e == "" || e[0] == '.' || len(e) > 200 {
		return false
	}
	for _, r := range e {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// Download returns the local path of filename of repo at revision in the hub
// cache cacheDir, downloading it when its snapshot entry is missing. The
// bytes go to blobs/<etag>.incomplete (resumed with an HTTP Range request
// when a previous attempt left one), are checked against the size and the
// ETag (sha256 for LFS files, git blob sha1 otherwise), renamed to
// blobs/<etag>, and linked from snapshots/<commit>/<filename>. It returns the
// snapshot path and the commit.
func (c *Client) Download(ctx context.Context, cacheDir string, repo Repo, revision, filename string) (path, commit string, err error) {
	if revision == "" {
		revision = "main"
	}
	meta, err := c.Metadata(ctx, repo, revision, filename)
	if err != nil {
		return "", "", err
	}
	storage := filepath.Join(cacheDir, repo.Folder())
	snap := filepath.Join(storage, "snapshots", meta.Commit, filepath.FromSlash(filename))
	if isRegular(snap) {
		return snap, meta.Commit, writeRef(storage, revision, meta.Commit)
	}
	blob := filepath.Join(storage, "blobs", meta.ETag)
	if !isRegular(blob) {
		unlock, err := lockFile(ctx, filepath.Join(cacheDir, ".locks", repo.Folder(), meta.ETag+".lock"))
		if err != nil {
			return "", "", fmt.Errorf("hub: locking %s: %w", blob, err)
		}
		// Another process may have finished the blob while we waited.
		if !isRegular(blob) {
			err = c.fetch(ctx, meta, blob, filename)
		}
		unlock()
		if err != nil {
			return "", "", err
		}
	}
	if err := linkBlob(blob, snap); err != nil {
		return "", "", fmt.Errorf("hub: linking %s: %w", snap, err)
	}
	if err := writeRef(storage, revision, meta.Commit); err != nil {
		return "", "", fmt.Errorf("hub: writing ref: %w", err)
	}
	return snap, meta.Commit, nil
}

// fetch downloads meta.Location into blob via blob+".incomplete".
func (c *Client) fetch(ctx context.Context, meta FileMetadata, blob, name string) error {
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	inc := blob + ".incomplete"
	f, err := os.OpenFile(inc, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	resume := st.Size()
	if meta.Size >= 0 && resume > meta.Size {
		resume = 0
	}
	for attempt := 0; ; attempt++ {
		done, err := c.get(ctx, meta, f, resume, name)
		if err == nil && done {
			break
		}
		if err != nil {
			return err
		}
		if attempt > 0 {
			return fmt.Errorf("hub: %s: the server does not honour range requests consistently", meta.Location)
		}
		resume = 0 // restart from scratch once
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := verify(f, meta); err != nil {
		f.Close()
		os.Remove(inc)
		return fmt.Errorf("hub: %s: %w; the partial download was removed", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(inc, blob); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// get issues one GET from resume. done is false when the server's answer
// means the download must restart from byte 0.
func (c *Client) get(ctx context.Context, meta FileMetadata, f *os.File, resume int64, name string) (done bool, err error) {
	// As huggingface_hub does, the token goes to the hub only, never to the
	// host a HEAD redirected to (the CDN's URL is pre-signed).
	req, err := c.newRequest(ctx, http.MethodGet, meta.Location, !meta.redirected)
	if err != nil {
		return false, err
	}
	if resume > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", resume))
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return false, fmt.Errorf("hub: downloading %s: %w (run again to resume)", name, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && resume > 0:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		if !ok || start != resume {
			return false, f.Truncate(0)
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && resume > 0:
		if resume == meta.Size {
			return true, nil // already complete
		}
		return false, f.Truncate(0)
	case resp.StatusCode == http.StatusOK:
		resume = 0
		if err := f.Truncate(0); err != nil {
			return false, fmt.Errorf("hub: %w", err)
		}
	default:
		return false, fmt.Errorf("hub: %w", c.statusError(meta.Location, resp, req.Header.Get("Authorization") != ""))
	}
	if _, err := f.Seek(resume, io.SeekStart); err != nil {
		return false, fmt.Errorf("hub: %w", err)
	}
	var w io.Writer = f
	var pm *progressMeter
	if c.Progress != nil {
		pm = newProgress(c.Progress, name, resume, meta.Size, c.Now)
		w = io.MultiWriter(f, pm)
	}
	_, err = io.Copy(w, resp.Body)
	if pm != nil {
		pm.finish(err == nil)
	}
	if err != nil {
		return false, fmt.Errorf("hub: downloading %s interrupted: %w (run again to resume)", name, err)
	}
	return true, nil
}

func contentRangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

// verify checks the downloaded file against the expected size and the ETag:
// a 64-hex ETag is the sha256 of an LFS file, a 40-hex one the git blob sha1.
func verify(f *os.File, meta FileMetadata) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if meta.Size >= 0 && st.Size() != meta.Size {
		return fmt.Errorf("size check failed: got %d bytes, the hub announced %d", st.Size(), meta.Size)
	}
	var h hash.Hash
	switch {
	case isHex(meta.ETag, 64):
		h = sha256.New()
	case isHex(meta.ETag, 40):
		h = sha1.New()
		fmt.Fprintf(h, "blob %d\x00", st.Size())
	default:
		return nil // an ETag of another form cannot be checked
	}
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size())); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(meta.ETag) {
		return fmt.Errorf("checksum mismatch: content hashes to %s, the hub's ETag is %s", got, meta.ETag)
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// linkBlob makes snap a relative symlink to blob (as huggingface_hub does),
// falling back to a hard link, then to a copy, where symlinks are refused.
func linkBlob(blob, snap string) error {
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(snap), blob)
	if err != nil {
		return err
	}
	if isRegular(snap) {
		return nil // linked meanwhile by another download
	}
	os.Remove(snap) // a dangling link from an older attempt
	if err := os.Symlink(rel, snap); err == nil || isRegular(snap) {
		return nil
	}
	if err := os.Link(blob, snap); err == nil {
		return nil
	}
	src, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer src.Close()
	return atomicfile.Write(snap, 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	})
}

// progressMeter writes "name: x / y MB (z MB/s)" at most every 200 ms.
type progressMeter struct {
	w          io.Writer
	name       string
	done, size int64
	start      int64
	t0, last   time.Time
	now        func() time.Time
}

func newProgress(w io.Writer, name string, resume, size int64, now func() time.Time) *progressMeter {
	if now == nil {
		now = time.Now
	}
	t := now()
	return &progressMeter{w: w, name: name, done: resume, start: resume, size: size, t0: t, now: now}
}

func (p *progressMeter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if t := p.now(); t.Sub(p.last) >= 200*time.Millisecond {
		p.last = t
		p.print("\r")
	}
	return len(b), nil
}

func (p *progressMeter) print(prefix string) {
	el := p.now().Sub(p.t0).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.done-p.start) / 1e6 / el
	}
	if p.size >= 0 {
		fmt.Fprintf(p.w, "%s%s: %.1f / %.1f MB (%.1f MB/s)", prefix, p.name, float64(p.done)/1e6, float64(p.size)/1e6, rate)
	} else {
		fmt.Fprintf(p.w, "%s%s: %.1f MB (%.1f MB/s)", prefix, p.name, float64(p.done)/1e6, rate)
	}
}

func (p *progressMeter) finish(ok bool) {
	p.print("\r")
	if !ok {
		fmt.Fprint(p.w, " interrupted")
	}
	fmt.Fprintln(p.w)
}
