package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// A renamed flag keeps its old name as a separate hidden flag (urfave/cli
// v2 shows every alias in the help), so the help shows one name per
// concept while old scripts keep working.
type renamedFlag struct{ name, old string }

// adoptOldNames moves the value of each old name given onto its current
// name, so the rest of the command reads only the current one; giving
// both names is a usage error.
func adoptOldNames(c *cli.Context, cmd string, rs ...renamedFlag) error {
	for _, r := range rs {
		if !c.IsSet(r.old) {
			continue
		}
		if c.IsSet(r.name) {
			return usageErr(fmt.Errorf("%s: --%s is the old name of --%s: give one of them", cmd, r.old, r.name))
		}
		if err := c.Set(r.name, fmt.Sprint(c.Value(r.old))); err != nil {
			return usageErr(fmt.Errorf("%s: --%s: %w", cmd, r.old, err))
		}
		fmt.Fprintf(c.App.ErrWriter, "qppl: warning: --%s is deprecated: use --%s\n", r.old, r.name)
	}
	return nil
}
