package device

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

var (
	ptxEntry = regexp.MustCompile(`\.entry\s+([A-Za-z_][A-Za-z0-9_$]*)\s*\(([^)]*)\)`)
	ptxParam = regexp.MustCompile(`\.param\s+\.([a-z]+[0-9]*)`)
)

// PTXSignatures returns the kernel entries of a PTX module with one letter
// per parameter: 'p' for a 64-bit parameter (.u64/.b64/.s64: a pointer),
// 'w' for a 32-bit integer (.u32/.s32/.b32: int or unsigned), 'f' for .f32
// and '?' for anything else.
func PTXSignatures(ptx []byte) map[string]string {
	out := map[string]string{}
	for _, m := range ptxEntry.FindAllSubmatch(ptx, -1) {
		var sig strings.Builder
		for _, p := range ptxParam.FindAllSubmatch(m[2], -1) {
			switch string(p[1]) {
			case "u64", "b64", "s64":
				sig.WriteByte('p')
			case "u32", "s32", "b32":
				sig.WriteByte('w')
			case "f32":
				sig.WriteByte('f')
			default:
				sig.WriteByte('?')
			}
		}
		out[string(m[1])] = sig.String()
	}
	return out
}

// CheckPTX checks that the PTX of kernel source src defines every kernel
// the table assigns to src, each with the parameter list of its Go
// signature (i and u both match a 32-bit integer). A mismatch means the
// embedded kernels were built from a different .cu than the launch table
// describes (a stale build).
func CheckPTX(src string, ptx []byte, table map[string]KernelInfo) error {
	have := PTXSignatures(ptx)
	var names []string
	for name, info := range table {
		if info.Source == src {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var bad []string
	for _, name := range names {
		want := table[name].Sig
		got, ok := have[name]
		if !ok {
			bad = append(bad, fmt.Sprintf("kernel %s is missing", name))
			continue
		}
		exp := strings.NewReplacer("i", "w", "u", "w").Replace(want)
		if got != exp {
			bad = append(bad, fmt.Sprintf("kernel %s has PTX parameters %s, the Go launch table says %s (%s)", name, got, exp, want))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s.ptx does not match device.Kernels: %s", src, strings.Join(bad, "; "))
	}
	return nil
}
