//go:build !unix

package hub

import "context"

// lockFile is a no-op where flock is unavailable.
func lockFile(ctx context.Context, path string) (func(), error) { return func() {}, nil }
