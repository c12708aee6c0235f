package reference

import (
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/checkpoint"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, dir string) backends.Backend {
		m, err := checkpoint.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		b, err := New(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, backendtest.Tolerance(1e-12))
}
