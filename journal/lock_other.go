//go:build !unix

package journal

import "os"

// lock is a no-op where flock(2) does not exist: two processes appending
// to one journal there are the user's responsibility.
func lock(*os.File) error { return nil }
