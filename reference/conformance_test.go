package reference

import (
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, dir string) backends.Backend {
		b, _ := openBackend(t, dir) // Close is idempotent: Run and the cleanup both call it
		return b
	}, backendtest.Tolerance(1e-12))
}
