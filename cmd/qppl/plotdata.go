package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/qppl/qppl/compare/suite"
)

// shortDataName is a data set's name on a chart: a file's base name, never
// its directory (the demo's text lives in a temporary directory).
func shortDataName(name string) string {
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		return filepath.Base(name)
	}
	return name
}

// checkSameData refuses result sets evaluated on different data (their
// data spec hashes differ) unless allow: one chart has one subtitle, and
// points from other tokens are not comparable.
func checkSameData(sets []*suite.ResultSet, names []string, allow bool) error {
	if allow || len(sets) < 2 {
		return nil
	}
	for i, rs := range sets[1:] {
		if rs.DataSpecHash != sets[0].DataSpecHash {
			return fmt.Errorf("%s was evaluated on other data than %s (data spec %.12s vs %.12s): its points are not comparable; --allow-mixed-data plots them anyway", names[i+1], names[0], rs.DataSpecHash, sets[0].DataSpecHash)
		}
	}
	return nil
}
