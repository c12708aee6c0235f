package quant

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
)

// pyRegex is a "re:" target of compressed-tensors (and of the other tools'
// ignore/targets/modules_to_not_convert lists), matched as Python's
// re.match(pattern, name) matches: anchored at the start only, with
// Python's syntax, lookaround included (msModelSlim writes a trailing
// (?![.\w])). Go's regexp has no lookaround; regexp2 is a backtracking
// engine with .NET syntax, which covers Python's once its few spellings
// are translated (pythonToNET).
type pyRegex struct {
	src string
	re  *regexp2.Regexp
}

func compilePyRegex(pattern string) (*pyRegex, error) {
	re, err := regexp2.Compile(`\A(?:`+pythonToNET(pattern)+`)`, regexp2.None)
	if err != nil {
		return nil, err
	}
	return &pyRegex{src: pattern, re: re}, nil
}

// pythonToNET rewrites the Python-only spellings: named groups (?P<n>…)
// and their backreferences (?P=n), and \Z (Python's absolute end, .NET's
// \z). Everything else (classes, lookaround, flags, \d \w \s) means the
// same in both.
func pythonToNET(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			if p[i+1] == 'Z' {
				b.WriteString(`\z`)
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
		case strings.HasPrefix(p[i:], "(?P<"):
			b.WriteString("(?<")
			i += 3
		case strings.HasPrefix(p[i:], "(?P="):
			j := strings.IndexByte(p[i:], ')')
			if j < 0 {
				b.WriteString(p[i:])
				return b.String()
			}
			fmt.Fprintf(&b, `\k<%s>`, p[i+4:i+j])
			i += j
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

// match reports whether the pattern matches at the start of name (a
// backtracking engine can only fail on a timeout, which is not set).
func (r *pyRegex) match(name string) bool {
	ok, err := r.re.MatchString(name)
	return err == nil && ok
}
