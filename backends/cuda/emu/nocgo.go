//go:build !cgo

package emu

import (
	"errors"

	"github.com/qppl/qppl/backends/cuda/device"
)

// ErrNoCgo is returned by New in binaries built without cgo: the emulator
// compiles the kernels as C++ through cgo.
var ErrNoCgo = errors.New("emu: this binary was built without cgo (CGO_ENABLED=0); the kernel emulator needs a C++ compiler and cgo")

// Options configures an emulated device.
type Options struct {
	Name        string
	MemBytes    int64
	CheckGuards bool
}

// Device is unavailable without cgo.
type Device struct{}

var _ device.Device = (*Device)(nil)

// New reports ErrNoCgo.
func New(Options) (*Device, error) { return nil, ErrNoCgo }

func (*Device) Name() string                    { return "emu" }
func (*Device) Alloc(int64) (device.Ptr, error) { return 0, ErrNoCgo }
func (*Device) Free(device.Ptr) error           { return ErrNoCgo }
func (*Device) CopyIn(device.Ptr, []byte) error { return ErrNoCgo }
func (*Device) CopyOut([]byte, device.Ptr) error {
	return ErrNoCgo
}
func (*Device) Launch(string, device.Dim3, device.Dim3, int, ...any) error { return ErrNoCgo }
func (*Device) Gemm(device.Gemm) error                                     { return ErrNoCgo }
func (*Device) BatchedGemm(device.BatchedGemm) error                       { return ErrNoCgo }
func (*Device) Sync() error                                                { return ErrNoCgo }
func (*Device) MemInfo() (int64, int64, error)                             { return 0, 0, ErrNoCgo }
func (*Device) Close() error                                               { return nil }
