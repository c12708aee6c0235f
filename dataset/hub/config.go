package hub

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultEndpoint is the Hugging Face hub used when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// Env gives access to environment variables. A nil Getenv means os.Getenv;
// tests pass a map lookup so the machine's environment never leaks in.
type Env struct {
	Getenv func(string) string
}

func (e Env) get(key string) string {
	if e.Getenv == nil {
		return os.Getenv(key)
	}
	return e.Getenv(key)
}

// Config is the Hugging Face configuration taken from the environment, with
// huggingface_hub's names and defaults.
type Config struct {
	Home          string // HF_HOME; default $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
	HubCache      string // HF_HUB_CACHE (legacy HUGGINGFACE_HUB_CACHE); default $HF_HOME/hub
	DatasetsCache string // HF_DATASETS_CACHE; default $HF_HOME/datasets
	Endpoint      string // HF_ENDPOINT without a trailing "/"; default https://huggingface.co
	Offline       bool   // HF_HUB_OFFLINE (or HF_DATASETS_OFFLINE) is 1/ON/YES/TRUE
	Token         string // HF_TOKEN (legacy HUGGING_FACE_HUB_TOKEN), else the file HF_TOKEN_PATH or $HF_HOME/token
}

// LoadConfig reads the configuration from env. It fails only when no cache
// location can be derived (no HF_HOME, HF_HUB_CACHE, XDG_CACHE_HOME or HOME).
func LoadConfig(env Env) (Config, error) {
	var c Config
	c.Home = expandUser(env, env.get("HF_HOME"))
	if c.Home == "" {
		if x := env.get("XDG_CACHE_HOME"); x != "" {
			c.Home = filepath.Join(expandUser(env, x), "huggingface")
		} else if h := env.get("HOME"); h != "" {
			c.Home = filepath.Join(h, ".cache", "huggingface")
		}
	}
	c.HubCache = expandUser(env, env.get("HF_HUB_CACHE"))
	if c.HubCache == "" {
		c.HubCache = expandUser(env, env.get("HUGGINGFACE_HUB_CACHE"))
	}
	if c.HubCache == "" && c.Home != "" {
		c.HubCache = filepath.Join(c.Home, "hub")
	}
	c.DatasetsCache = expandUser(env, env.get("HF_DATASETS_CACHE"))
	if c.DatasetsCache == "" && c.Home != "" {
		c.DatasetsCache = filepath.Join(c.Home, "datasets")
	}
	if c.HubCache == "" {
		return c, errors.New("hub: cannot locate the Hugging Face cache: set HF_HOME or HF_HUB_CACHE (HOME is not set)")
	}
	c.Endpoint = strings.TrimRight(env.get("HF_ENDPOINT"), "/")
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	c.Offline = truthy(env.get("HF_HUB_OFFLINE")) || truthy(env.get("HF_DATASETS_OFFLINE"))
	c.Token = strings.TrimSpace(env.get("HF_TOKEN"))
	if c.Token == "" {
		c.Token = strings.TrimSpace(env.get("HUGGING_FACE_HUB_TOKEN"))
	}
	if c.Token == "" {
		p := expandUser(env, env.get("HF_TOKEN_PATH"))
		if p == "" && c.Home != "" {
			p = filepath.Join(c.Home, "token")
		}
		if p != "" {
			if b, err := os.ReadFile(p); err == nil && len(b) < 4096 {
				c.Token = strings.TrimSpace(string(b))
			}
		}
	}
	return c, nil
}

func truthy(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

func expandUser(env Env, p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h := env.get("HOME"); h != "" {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}

// RepoType is the kind of hub repository.
type RepoType string

// Repository kinds.
const (
	Model   RepoType = "model"
	Dataset RepoType = "dataset"
)

// Repo names a hub repository, e.g. {Dataset, "Salesforce/wikitext"}.
type Repo struct {
	Type RepoType
	ID   string
}

// Folder is the repository's directory in the hub cache, as huggingface_hub
// names it: "models--org--name" or "datasets--org--name".
func (r Repo) Folder() string {
	prefix := "models"
	if r.Type == Dataset {
		prefix = "datasets"
	}
	return prefix + "--" + strings.ReplaceAll(r.ID, "/", "--")
}

func (r Repo) urlPrefix() string {
	if r.Type == Dataset {
		return "datasets/"
	}
	return ""
}

func (r Repo) String() string {
	if r.Type == Dataset {
		return "dataset " + r.ID
	}
	return "model " + r.ID
}

// IsHubID reports whether s has the shape of a hub repository id "org/name"
// (letters, digits, '-', '_', '.'; no "--" or ".." as the hub forbids).
func IsHubID(s string) bool {
	org, name, ok := strings.Cut(s, "/")
	if !ok || !validIDPart(org) || !validIDPart(name) {
		return false
	}
	return !strings.Contains(s, "--") && !strings.Contains(s, "..")
}

func validIDPart(p string) bool {
	if p == "" || len(p) > 96 || p[0] == '.' || p[0] == '-' {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// validRepoPath checks a file path inside a repository (from the user or a
// downloaded index): relative, '/'-separated, no "." or ".." segments.
func validRepoPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("invalid file name %q in repository", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid file name %q in repository", p)
		}
	}
	return nil
}

func isCommitHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
