package hub

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"defaults", map[string]string{"HOME": "/h"}, Config{
			Home: "/h/.cache/huggingface", HubCache: "/h/.cache/huggingface/hub",
			DatasetsCache: "/h/.cache/huggingface/datasets", Endpoint: DefaultEndpoint}},
		{"xdg", map[string]string{"HOME": "/h", "XDG_CACHE_HOME": "/x"}, Config{
			Home: "/x/huggingface", HubCache: "/x/huggingface/hub", DatasetsCache: "/x/huggingface/datasets", Endpoint: DefaultEndpoint}},
		{"hf_home", map[string]string{"HOME": "/h", "XDG_CACHE_HOME": "/x", "HF_HOME": "~/hf"}, Config{
			Home: "/h/hf", HubCache: "/h/hf/hub", DatasetsCache: "/h/hf/datasets", Endpoint: DefaultEndpoint}},
		{"hub_cache", map[string]string{"HF_HOME": "/a", "HF_HUB_CACHE": "/b", "HUGGINGFACE_HUB_CACHE": "/legacy"}, Config{
			Home: "/a", HubCache: "/b", DatasetsCache: "/a/datasets", Endpoint: DefaultEndpoint}},
		{"legacy_hub_cache", map[string]string{"HF_HOME": "/a", "HUGGINGFACE_HUB_CACHE": "/legacy"}, Config{
			Home: "/a", HubCache: "/legacy", DatasetsCache: "/a/datasets", Endpoint: DefaultEndpoint}},
		{"datasets_cache", map[string]string{"HF_HOME": "/a", "HF_DATASETS_CACHE": "/d"}, Config{
			Home: "/a", HubCache: "/a/hub", DatasetsCache: "/d", Endpoint: DefaultEndpoint}},
		{"endpoint_offline_token", map[string]string{"HF_HOME": "/a", "HF_ENDPOINT": "http://mirror:8080/", "HF_HUB_OFFLINE": "yes", "HF_TOKEN": " hf_x\n"}, Config{
			Home: "/a", HubCache: "/a/hub", DatasetsCache: "/a/datasets", Endpoint: "http://mirror:8080", Offline: true, Token: "hf_x"}},
		{"offline_zero", map[string]string{"HF_HOME": "/a", "HF_HUB_OFFLINE": "0"}, Config{
			Home: "/a", HubCache: "/a/hub", DatasetsCache: "/a/datasets", Endpoint: DefaultEndpoint}},
		{"datasets_offline", map[string]string{"HF_HOME": "/a", "HF_DATASETS_OFFLINE": "1"}, Config{
			Home: "/a", HubCache: "/a/hub", DatasetsCache: "/a/datasets", Endpoint: DefaultEndpoint, Offline: true}},
	}
	for _, tt := range tests {
		got, err := LoadConfig(env(tt.env))
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v\nwant %+v", tt.name, got, err, tt.want)
		}
	}
	if _, err := LoadConfig(env(nil)); err == nil || !strings.Contains(err.Error(), "HF_HOME") {
		t.Errorf("no HOME: %v", err)
	}
	// The token file under HF_HOME, and HF_TOKEN_PATH.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte("hf_file\n"), 0o600)
	if c, _ := LoadConfig(env(map[string]string{"HF_HOME": dir})); c.Token != "hf_file" {
		t.Errorf("token file: %q", c.Token)
	}
	os.WriteFile(filepath.Join(dir, "other"), []byte("hf_other"), 0o600)
	if c, _ := LoadConfig(env(map[string]string{"HF_HOME": dir, "HF_TOKEN_PATH": filepath.Join(dir, "other")})); c.Token != "hf_other" {
		t.Errorf("HF_TOKEN_PATH: %q", c.Token)
	}
}

// The zero Env reads the process environment.
func TestLoadConfigProcessEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HF_HOME", dir)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_DATASETS_CACHE", filepath.Join(dir, "ds"))
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_DATASETS_OFFLINE", "")
	t.Setenv("HF_ENDPOINT", "")
	c, err := LoadConfig(Env{})
	if err != nil {
		t.Fatal(err)
	}
	if c.HubCache != filepath.Join(dir, "hub") || c.DatasetsCache != filepath.Join(dir, "ds") || !c.Offline || c.Endpoint != DefaultEndpoint {
		t.Errorf("%+v", c)
	}
}

func parquetBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	copy(b, "PAR1")
	copy(b[n-4:], "PAR1")
	return b
}

func wikiEnv(h *fakeHub, home string, extra map[string]string) Env {
	m := map[string]string{"HF_HOME": home, "HF_ENDPOINT": h.srv.URL}
	for k, v := range extra {
		m[k] = v
	}
	return env(m)
}

func TestResolveWikiTextDownload(t *testing.T) {
	h := newFakeHub(t)
	data := parquetBytes(300_000, 1)
	commit := h.addFile("datasets/Salesforce/wikitext", WikiTextTestFile, data, true)
	home := t.TempDir()
	var progress bytes.Buffer
	opts := WikiTextOptions{Env: wikiEnv(h, home, map[string]string{"HF_TOKEN": "hf_secret"}), Progress: &progress}
	res, err := ResolveWikiText(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	storage := filepath.Join(home, "hub", "datasets--Salesforce--wikitext")
	wantPath := filepath.Join(storage, "snapshots", commit, "wikitext-2-raw-v1", "test-00000-of-00001.parquet")
	if res.Source != SourceDownload || len(res.Paths) != 1 || res.Paths[0] != wantPath {
		t.Fatalf("resolved %+v, want %s", res, wantPath)
	}
	got, err := os.ReadFile(wantPath)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content differs (%v)", err)
	}
	// huggingface_hub layout: relative symlink to the blob named by sha256.
	link, err := os.Readlink(wantPath)
	if err != nil || link != filepath.Join("..", "..", "..", "blobs", sha256Hex(data)) {
		t.Fatalf("symlink %q, %v", link, err)
	}
	if ref, _ := os.ReadFile(filepath.Join(storage, "refs", "main")); string(ref) != commit {
		t.Fatalf("refs/main = %q", ref)
	}
	if _, err := os.Stat(filepath.Join(storage, "blobs", sha256Hex(data)+".incomplete")); err == nil {
		t.Fatal(".incomplete left behind")
	}
	log := h.log()
	if len(log) != 2 || log[0].Method != "HEAD" || log[0].Path != "/datasets/Salesforce/wikitext/resolve/main/"+WikiTextTestFile ||
		log[0].Auth != "Bearer hf_secret" || log[1].Method != "GET" || !strings.HasPrefix(log[1].Path, "/cdn/") || log[1].Auth != "" {
		t.Fatalf("requests %+v", log)
	}
	if !strings.Contains(progress.String(), "MB/s") || !strings.Contains(progress.String(), "0.3 / 0.3 MB") {
		t.Fatalf("progress %q", progress.String())
	}
	// Second time: from the cache, no network.
	res2, err := ResolveWikiText(context.Background(), opts)
	if err != nil || res2.Source != SourceCache || res2.Paths[0] != wantPath {
		t.Fatalf("second resolve %+v, %v", res2, err)
	}
	if len(h.log()) != 2 {
		t.Fatalf("cache hit made requests: %+v", h.log()[2:])
	}
	// --data wins and is not checked against the hub.
	res3, err := ResolveWikiText(context.Background(), WikiTextOptions{Data: wantPath, Env: env(nil)})
	if err != nil || res3.Source != SourceFlag || res3.Paths[0] != wantPath {
		t.Fatalf("--data: %+v, %v", res3, err)
	}
	if _, err := ResolveWikiText(context.Background(), WikiTextOptions{Data: filepath.Join(home, "nope.jsonl")}); err == nil || !strings.Contains(err.Error(), "nope.jsonl") {
		t.Fatalf("missing --data: %v", err)
	}
}

func TestDownloadResume(t *testing.T) {
	h := newFakeHub(t)
	data := parquetBytes(200_000, 2)
	h.addFile("datasets/Salesforce/wikitext", WikiTextTestFile, data, true)
	home := t.TempDir()
	opts := WikiTextOptions{Env: wikiEnv(h, home, nil)}
	h.cutAfter = 70_000
	_, err := ResolveWikiText(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("interrupted download: %v", err)
	}
	inc := filepath.Join(home, "hub", "datasets--Salesforce--wikitext", "blobs", sha256Hex(data)+".incomplete")
	st, err := os.Stat(inc)
	if err != nil || st.Size() == 0 || st.Size() > 70_000 {
		t.Fatalf("partial file: %v %v", st, err)
	}
	part := st.Size()
	res, err := ResolveWikiText(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(res.Paths[0])
	if !bytes.Equal(got, data) {
		t.Fatal("resumed content differs")
	}
	var ranges []string
	for _, r := range h.log() {
		if r.Method == "GET" {
			ranges = append(ranges, r.Range)
		}
	}
	if len(ranges) != 2 || ranges[0] != "" || ranges[1] != "bytes="+itoa(part)+"-" {
		t.Fatalf("GET ranges %q (partial %d)", ranges, part)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A server that ignores Range (answers 200) makes the client start over.
func TestDownloadResumeIgnoredRange(t *testing.T) {
	h := newFakeHub(t)
	data := []byte(strings.Repeat("abcdefgh", 1000))
	c := h.addFile("org/model", "config.json", data, false)
	cache := t.TempDir()
	blob := filepath.Join(cache, "models--org--model", "blobs", gitSHA1(data))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob+".incomplete", []byte("garbage-prefix"), 0o644)
	cl := &Client{Endpoint: h.srv.URL}
	p, commit, err := cl.Download(context.Background(), cache, Repo{Model, "org/model"}, "main", "config.json")
	if err != nil || commit != c {
		t.Fatalf("%v %s", err, commit)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
}

func TestDownloadChecksumMismatch(t *testing.T) {
	h := newFakeHub(t)
	data := parquetBytes(50_000, 3)
	commit := h.addFile("datasets/Salesforce/wikitext", WikiTextTestFile, data, true)
	h.corrupt = true
	home := t.TempDir()
	_, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, nil)})
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), "--data") {
		t.Fatalf("err = %v", err)
	}
	storage := filepath.Join(home, "hub", "datasets--Salesforce--wikitext")
	for _, p := range []string{
		filepath.Join(storage, "snapshots", commit, filepath.FromSlash(WikiTextTestFile)),
		filepath.Join(storage, "blobs", sha256Hex(data)),
		filepath.Join(storage, "blobs", sha256Hex(data)+".incomplete"),
	} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after a checksum mismatch", p)
		}
	}
	// A non-LFS file is checked against its git blob sha1.
	h.corrupt = false
	cl := &Client{Endpoint: h.srv.URL}
	h.addFile("org/m", "config.json", []byte(`{"a":1}`), false)
	if _, _, err := cl.Download(context.Background(), t.TempDir(), Repo{Model, "org/m"}, "main", "config.json"); err != nil {
		t.Fatal(err)
	}
	if err := verify(mustTemp(t, []byte(`{"a":2}`)), FileMetadata{ETag: gitSHA1([]byte(`{"a":1}`)), Size: 7}); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("git sha1 mismatch: %v", err)
	}
	if err := verify(mustTemp(t, []byte(`{"a":1}x`)), FileMetadata{ETag: gitSHA1([]byte(`{"a":1}`)), Size: 7}); err == nil || !strings.Contains(err.Error(), "size check failed") {
		t.Errorf("size mismatch: %v", err)
	}
}

func mustTemp(t *testing.T, b []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, b, 0o644)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestHTTPErrors(t *testing.T) {
	h := newFakeHub(t)
	h.addFile("org/private", "config.json", []byte("{}"), false)
	h.repos["org/private"].private = true
	h.repos["org/private"].token = "hf_good"
	h.addFile("org/public", "config.json", []byte("{}"), false)
	cache := t.TempDir()
	ctx := context.Background()

	_, _, err := (&Client{Endpoint: h.srv.URL}).Download(ctx, cache, Repo{Model, "org/private"}, "main", "config.json")
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 401 || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Errorf("401 without token: %v", err)
	}
	_, _, err = (&Client{Endpoint: h.srv.URL, Token: "hf_bad"}).Download(ctx, cache, Repo{Model, "org/private"}, "main", "config.json")
	if err == nil || !strings.Contains(err.Error(), "HF_TOKEN was rejected") {
		t.Errorf("401 with a bad token: %v", err)
	}
	if _, _, err := (&Client{Endpoint: h.srv.URL, Token: "hf_good"}).Download(ctx, cache, Repo{Model, "org/private"}, "main", "config.json"); err != nil {
		t.Errorf("good token: %v", err)
	}
	cl := &Client{Endpoint: h.srv.URL}
	_, _, err = cl.Download(ctx, cache, Repo{Model, "org/public"}, "main", "missing.json")
	if !IsNotFound(err) || !strings.Contains(err.Error(), "404 EntryNotFound") {
		t.Errorf("missing file: %v", err)
	}
	_, _, err = cl.Download(ctx, cache, Repo{Model, "org/public"}, "v9", "config.json")
	if IsNotFound(err) || !strings.Contains(err.Error(), "RevisionNotFound") {
		t.Errorf("missing revision: %v", err)
	}
	_, _, err = cl.Download(ctx, cache, Repo{Model, "org/none"}, "main", "config.json")
	if IsNotFound(err) || !strings.Contains(err.Error(), "RepoNotFound") {
		t.Errorf("missing repo: %v", err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a//b", "a\\b", ""} {
		if _, _, err := cl.Download(ctx, cache, Repo{Model, "org/public"}, "main", bad); err == nil || !strings.Contains(err.Error(), "invalid file name") {
			t.Errorf("file name %q: %v", bad, err)
		}
	}
	// A server that is not a hub (no X-Repo-Commit, no ETag).
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
	defer plain.Close()
	_, err = (&Client{Endpoint: plain.URL}).Metadata(ctx, Repo{Model, "org/public"}, "main", "config.json")
	if err == nil || !strings.Contains(err.Error(), "X-Repo-Commit") {
		t.Errorf("not a hub: %v", err)
	}
}

func TestRenamedRepoRelativeRedirect(t *testing.T) {
	h := newFakeHub(t)
	c := h.addFile("new/name", "config.json", []byte(`{"x":1}`), false)
	h.renamed["old/name"] = "new/name"
	cl := &Client{Endpoint: h.srv.URL}
	cache := t.TempDir()
	p, commit, err := cl.Download(context.Background(), cache, Repo{Model, "old/name"}, "main", "config.json")
	if err != nil || commit != c || !strings.Contains(p, "models--old--name") {
		t.Fatalf("%s %s %v", p, commit, err)
	}
}

func TestOffline(t *testing.T) {
	h := newFakeHub(t)
	data := parquetBytes(10_000, 4)
	h.addFile("datasets/Salesforce/wikitext", WikiTextTestFile, data, true)
	home := t.TempDir()
	_, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, map[string]string{"HF_HUB_OFFLINE": "1"})})
	if err == nil {
		t.Fatal("offline with an empty cache succeeded")
	}
	for _, want := range []string{"HF_HUB_OFFLINE", "--data test.rows.jsonl", "--data test-00000-of-00001.parquet", "--data wiki.test.raw", "--data FILE.txt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("offline error lacks %q:\n%v", want, err)
		}
	}
	if n := len(h.log()); n != 0 {
		t.Fatalf("offline mode made %d requests", n)
	}
	// Fill the cache online, then it works offline.
	if _, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, nil)}); err != nil {
		t.Fatal(err)
	}
	n := len(h.log())
	res, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, map[string]string{"HF_HUB_OFFLINE": "1"})})
	if err != nil || res.Source != SourceCache || len(h.log()) != n {
		t.Fatalf("offline with cache: %+v %v", res, err)
	}
}

// writeSnapshot creates a hub-cache snapshot with a file and refs/<rev>.
func writeSnapshot(t *testing.T, cache, folder, rev, commit, name string, data []byte) string {
	t.Helper()
	storage := filepath.Join(cache, folder)
	blob := filepath.Join(storage, "blobs", sha256Hex(data))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob, data, 0o644)
	snap := filepath.Join(storage, "snapshots", commit, filepath.FromSlash(name))
	if err := linkBlob(blob, snap); err != nil {
		t.Fatal(err)
	}
	if rev != "" {
		if err := writeRef(storage, rev, commit); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

func TestCacheDiscovery(t *testing.T) {
	data := parquetBytes(1000, 5)
	c1, c2 := commitOf("one"), commitOf("two")
	type setup func(t *testing.T, root string) (map[string]string, string)
	tests := []struct {
		name  string
		setup setup
	}{
		{"HF_HOME", func(t *testing.T, root string) (map[string]string, string) {
			p := writeSnapshot(t, filepath.Join(root, "hf", "hub"), "datasets--Salesforce--wikitext", "main", c1, WikiTextTestFile, data)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf")}, p
		}},
		{"HOME default", func(t *testing.T, root string) (map[string]string, string) {
			p := writeSnapshot(t, filepath.Join(root, ".cache", "huggingface", "hub"), "datasets--Salesforce--wikitext", "main", c1, WikiTextTestFile, data)
			return map[string]string{"HOME": root}, p
		}},
		{"HF_HUB_CACHE", func(t *testing.T, root string) (map[string]string, string) {
			p := writeSnapshot(t, filepath.Join(root, "hubcache"), "datasets--Salesforce--wikitext", "main", c1, WikiTextTestFile, data)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf"), "HF_HUB_CACHE": filepath.Join(root, "hubcache")}, p
		}},
		{"HF_DATASETS_CACHE hub layout, legacy repo, no ref", func(t *testing.T, root string) (map[string]string, string) {
			p := writeSnapshot(t, filepath.Join(root, "ds"), "datasets--wikitext", "", c2, WikiTextTestFile, data)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf"), "HF_DATASETS_CACHE": filepath.Join(root, "ds")}, p
		}},
		{"refs/convert/parquet layout", func(t *testing.T, root string) (map[string]string, string) {
			p := writeSnapshot(t, filepath.Join(root, "hf", "hub"), "datasets--Salesforce--wikitext", "refs/convert/parquet", c2, "wikitext-2-raw-v1/test/0000.parquet", data)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf")}, p
		}},
		{"HF_DATASETS_CACHE downloads", func(t *testing.T, root string) (map[string]string, string) {
			dl := filepath.Join(root, "ds", "downloads")
			os.MkdirAll(dl, 0o755)
			p := filepath.Join(dl, "5d2f0a1b")
			os.WriteFile(p, data, 0o644)
			os.WriteFile(p+".json", []byte(`{"url": "https://huggingface.co/datasets/Salesforce/wikitext/resolve/b08601e/wikitext-2-raw-v1/test-00000-of-00001.parquet", "etag": null}`), 0o644)
			// A train file next to it must not be picked.
			os.WriteFile(filepath.Join(dl, "0000train"), data, 0o644)
			os.WriteFile(filepath.Join(dl, "0000train.json"), []byte(`{"url": "https://huggingface.co/datasets/Salesforce/wikitext/resolve/b08601e/wikitext-2-raw-v1/train-00000-of-00001.parquet"}`), 0o644)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf"), "HF_DATASETS_CACHE": filepath.Join(root, "ds")}, p
		}},
		{"HF_DATASETS_CACHE arrow cache", func(t *testing.T, root string) (map[string]string, string) {
			d := filepath.Join(root, "ds", "Salesforce___wikitext", "wikitext-2-raw-v1", "0.0.0", "b08601e04326c79dfdd32d625aee71d232d685c3")
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, "wikitext-train.arrow"), data, 0o644)
			p := filepath.Join(d, "wikitext-test.arrow")
			os.WriteFile(p, data, 0o644)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf"), "HF_DATASETS_CACHE": filepath.Join(root, "ds")}, p
		}},
		{"HF_DATASETS_CACHE extracted zip", func(t *testing.T, root string) (map[string]string, string) {
			d := filepath.Join(root, "hf", "datasets", "downloads", "extracted", "3f1c", "wikitext-2-raw")
			os.MkdirAll(d, 0o755)
			p := filepath.Join(d, "wiki.test.raw")
			os.WriteFile(p, []byte(" \n = T = \n"), 0o644)
			return map[string]string{"HF_HOME": filepath.Join(root, "hf")}, p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			m, want := tt.setup(t, root)
			m["HF_HUB_OFFLINE"] = "1"
			res, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: env(m)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != SourceCache || len(res.Paths) != 1 || res.Paths[0] != want {
				t.Fatalf("got %+v, want %s", res, want)
			}
			// The same through the process environment (the zero Env).
			for _, k := range []string{"HOME", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH"} {
				t.Setenv(k, m[k])
			}
			t.Setenv("HF_HUB_OFFLINE", "1")
			res, err = ResolveWikiText(context.Background(), WikiTextOptions{})
			if err != nil || res.Source != SourceCache || len(res.Paths) != 1 || res.Paths[0] != want {
				t.Fatalf("process env: got %+v, %v; want %s", res, err, want)
			}
		})
	}
	// Nothing where the variables point: offline error.
	root := t.TempDir()
	writeSnapshot(t, filepath.Join(root, "elsewhere"), "datasets--Salesforce--wikitext", "main", c1, WikiTextTestFile, data)
	if _, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: env(map[string]string{"HF_HOME": filepath.Join(root, "hf"), "HF_HUB_OFFLINE": "1"})}); err == nil {
		t.Fatal("found data outside the configured caches")
	}
}

func TestResolveModel(t *testing.T) {
	ctx := context.Background()
	h := newFakeHub(t)
	// Single-file model.
	h.addFile("org/single", "config.json", []byte(`{"model_type":"llama"}`), false)
	h.addFile("org/single", "tokenizer.json", []byte(`{"model":{}}`), false)
	weights := parquetBytes(40_000, 6)
	c1 := h.addFile("org/single", "model.safetensors", weights, true)
	// Sharded model.
	h.addFile("org/sharded", "config.json", []byte(`{}`), false)
	h.addFile("org/sharded", "model.safetensors.index.json", []byte(`{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}`), false)
	h.addFile("org/sharded", "model-00001-of-00002.safetensors", parquetBytes(1000, 7), true)
	c2 := h.addFile("org/sharded", "model-00002-of-00002.safetensors", parquetBytes(1000, 8), true)
	// Hostile index.
	h.addFile("org/evil", "config.json", []byte(`{}`), false)
	h.addFile("org/evil", "model.safetensors.index.json", []byte(`{"weight_map":{"a":"../../../../x"}}`), false)
	// No weights.
	h.addFile("org/noweights", "config.json", []byte(`{}`), false)

	home := t.TempDir()
	e := wikiEnv(h, home, nil)
	dir, err := ResolveModel(ctx, "org/single", ModelOptions{Env: e})
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(home, "hub", "models--org--single", "snapshots", c1) {
		t.Fatalf("dir %s", dir)
	}
	for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		if !isRegular(filepath.Join(dir, f)) {
			t.Errorf("%s missing", f)
		}
	}
	if isRegular(filepath.Join(dir, "tokenizer_config.json")) {
		t.Error("tokenizer_config.json appeared from nowhere")
	}
	dir2, err := ResolveModel(ctx, "org/sharded", ModelOptions{Env: e})
	if err != nil {
		t.Fatal(err)
	}
	if dir2 != filepath.Join(home, "hub", "models--org--sharded", "snapshots", c2) || !modelComplete(dir2) {
		t.Fatalf("sharded dir %s", dir2)
	}
	if _, err := ResolveModel(ctx, "org/evil", ModelOptions{Env: e}); err == nil || !strings.Contains(err.Error(), "invalid file name") {
		t.Errorf("hostile index: %v", err)
	}
	if _, err := ResolveModel(ctx, "org/noweights", ModelOptions{Env: e}); err == nil || !strings.Contains(err.Error(), "neither model.safetensors") {
		t.Errorf("no weights: %v", err)
	}
	// Offline: cached models resolve without requests; others fail clearly.
	n := len(h.log())
	off := wikiEnv(h, home, map[string]string{"HF_HUB_OFFLINE": "1"})
	if d, err := ResolveModel(ctx, "org/sharded", ModelOptions{Env: off}); err != nil || d != dir2 {
		t.Errorf("offline cached: %s %v", d, err)
	}
	if _, err := ResolveModel(ctx, "org/other", ModelOptions{Env: off}); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") || !strings.Contains(err.Error(), "local directory") {
		t.Errorf("offline missing: %v", err)
	}
	if len(h.log()) != n {
		t.Errorf("offline made requests")
	}
	// A revision that is a commit hash is looked up directly.
	if d, err := ResolveModel(ctx, "org/single", ModelOptions{Env: off, Revision: c1}); err != nil || d != dir {
		t.Errorf("commit revision: %s %v", d, err)
	}
	// An unreachable hub says how to do without it.
	dead := wikiEnv(h, t.TempDir(), map[string]string{"HF_ENDPOINT": "http://127.0.0.1:1"})
	if _, err := ResolveModel(ctx, "org/single", ModelOptions{Env: dead}); err == nil || !strings.Contains(err.Error(), "cannot reach http://127.0.0.1:1") {
		t.Errorf("unreachable hub: %v", err)
	}
	// Local directories pass through; other strings are rejected.
	local := t.TempDir()
	if d, err := ResolveModel(ctx, local, ModelOptions{Env: off}); err != nil || d != local {
		t.Errorf("local dir: %s %v", d, err)
	}
	for _, bad := range []string{"nodir", "a/b/c", "org/na me", "org/..x", "org--x/y"} {
		if _, err := ResolveModel(ctx, bad, ModelOptions{Env: off}); err == nil || !strings.Contains(err.Error(), "not a Hugging Face hub id") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestIsHubID(t *testing.T) {
	for s, want := range map[string]bool{
		"meta-llama/Llama-3.1-8B": true, "Qwen/Qwen3-0.6B": true, "a/b": true,
		"gpt2": false, "a/b/c": false, "/a": false, "a/": false, "a--b/c": false, "a/b..c": false, ".a/b": false, "a/b c": false,
	} {
		if IsHubID(s) != want {
			t.Errorf("IsHubID(%q) = %v", s, !want)
		}
	}
}

// Concurrent downloads of one file (shards of one job starting together)
// serialize on the blob lock and all get the right bytes, with one GET.
func TestConcurrentDownloads(t *testing.T) {
	h := newFakeHub(t)
	data := parquetBytes(500_000, 9)
	h.addFile("datasets/Salesforce/wikitext", WikiTextTestFile, data, true)
	home := t.TempDir()
	const n = 4
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			res, err := ResolveWikiText(context.Background(), WikiTextOptions{Env: wikiEnv(h, home, nil)})
			if err == nil {
				var got []byte
				got, err = os.ReadFile(res.Paths[0])
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New("content differs")
				}
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	gets := 0
	for _, r := range h.log() {
		if r.Method == "GET" {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("%d GETs for one blob", gets)
	}
	if _, err := os.Stat(filepath.Join(home, "hub", ".locks", "datasets--Salesforce--wikitext", sha256Hex(data)+".lock")); err != nil {
		t.Errorf("lock file: %v", err)
	}
}
