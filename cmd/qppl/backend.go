package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/quant"
	"github.com/qppl/qppl/reference"
)

// backendOptions are the flags that choose and tune a backend.
type backendOptions struct {
	Name      string // reference | emu | cuda
	Precision string // bf16 | fp16 | fp32 (emu, cuda)
	GPUs      string // --gpus 0,1,... (cuda: device ids; emu: that many emulated devices)
	GPUSplit  string // --gpu-split GB per device, comma separated
	MaxTokens int    // longest window (--ctx); 0 = the cuda backend's default
	Log       io.Writer
	// AllowUnused (--allow-unused-tensors) loads a checkpoint holding
	// tensors the forward pass and the format do not use.
	AllowUnused bool
	// KVCacheQuant is --kv-cache-quant: "" (on when the checkpoint declares
	// a quantized KV cache), "on" or "off".
	KVCacheQuant string
}

// Backend flag names, declared once (backendFlags) for every command that
// opens a backend.
const (
	flagBackend     = "backend"
	flagPrecision   = "precision"
	flagGPUs        = "gpus"
	flagGPUSplit    = "gpu-split"
	flagAllowUnused = "allow-unused-tensors"
	flagKVCache     = "kv-cache-quant"
)

// backendFlagSet selects which of the shared backend flags a command has.
type backendFlagSet struct {
	name      bool   // --backend (verify names two backends with --backends)
	precision string // usage of --precision
	kv        bool   // --kv-cache-quant (commands that evaluate checkpoints)
}

// backendFlags declares --backend, --precision, --gpus and --gpu-split.
func backendFlags(s backendFlagSet) []cli.Flag {
	var fs []cli.Flag
	if s.name {
		fs = append(fs, &cli.StringFlag{Name: flagBackend, Value: "reference", Usage: "reference, emu or cuda"})
	}
	prec := s.precision
	if prec == "" {
		prec = "bf16, fp16 or fp32 (emu, cuda)"
	}
	if s.kv {
		fs = append(fs, &cli.StringFlag{Name: flagKVCache, Usage: "on or off: emulate the checkpoint's quantized KV cache (kv_cache_scheme, kv_cache_quant_algo; on by default when it has one) or measure the weights alone (recorded in the JSON)"})
	}
	return append(fs,
		&cli.StringFlag{Name: flagPrecision, Usage: prec},
		&cli.StringFlag{Name: flagGPUs, Usage: "GPU ids, e.g. 0,1 (cuda; emu: that many emulated devices)"},
		&cli.StringFlag{Name: flagGPUSplit, Usage: "GB per GPU, e.g. 20,24 (cuda, emu)"},
		&cli.BoolFlag{Name: flagAllowUnused, Usage: "evaluate a checkpoint although some of its tensors are not used by the forward pass or the format (refused by default; recorded in the JSON)"},
	)
}

// checkDevices refuses device flags for a backend that has no devices.
func (o backendOptions) checkDevices() error {
	if (o.Name == "" || o.Name == "reference") && (o.GPUs != "" || o.GPUSplit != "") {
		return fmt.Errorf("--gpus and --gpu-split choose the devices of --backend emu or cuda; the reference backend runs on the CPU")
	}
	return nil
}

// backendFromFlags reads the shared backend flags; maxTokens is the
// longest window the command will score (its --ctx).
func backendFromFlags(c *cli.Context, maxTokens int) backendOptions {
	return backendOptions{
		Name: c.String(flagBackend), Precision: c.String(flagPrecision), GPUs: c.String(flagGPUs), GPUSplit: c.String(flagGPUSplit),
		MaxTokens: maxTokens, Log: c.App.ErrWriter, AllowUnused: c.Bool(flagAllowUnused), KVCacheQuant: c.String(flagKVCache),
	}
}

// deviceLoader loads a model onto devices: cuda.New over a checkpoint,
// cuda.NewGGUF over a GGUF file.
type deviceLoader func(devs []device.Device, opt cuda.Options) (*cuda.Backend, error)

func checkpointLoader(m *checkpoint.Model) deviceLoader {
	return func(devs []device.Device, opt cuda.Options) (*cuda.Backend, error) { return cuda.New(m, devs, opt) }
}

// openBackend is the one place that names concrete backends.
func openBackend(m *checkpoint.Model, o backendOptions) (backends.Backend, error) {
	switch o.Name {
	case "", "reference":
		if o.Precision != "" && o.Precision != "fp64" {
			return nil, usageErr(fmt.Errorf("--precision %s: the reference backend computes in fp64", o.Precision))
		}
		b, err := reference.New(m, reference.Options{AllowUnusedTensors: o.AllowUnused, KVCacheQuant: o.KVCacheQuant})
		if err != nil {
			// Everything New checks comes from the checkpoint's files
			// (architecture, quantization_config, tensors): an input error.
			return nil, usageErr(err)
		}
		return b, nil
	}
	return openDeviceBackend(checkpointLoader(m), o)
}

// openDeviceBackend opens --backend emu or cuda over the model load loads.
func openDeviceBackend(load deviceLoader, o backendOptions) (backends.Backend, error) {
	switch o.Name {
	case "emu":
		ids, split, err := parseDevices(o)
		if err != nil {
			return nil, err
		}
		var devs []device.Device
		for _, id := range ids {
			d, err := emu.New(emu.Options{Name: fmt.Sprintf("emu:%d", id), MemBytes: 64 << 30})
			if err != nil {
				return nil, err
			}
			devs = append(devs, d)
		}
		return newCUDABackend(load, devs, split, o, "emu")
	case "cuda":
		return openCUDA(load, o)
	default:
		return nil, usageErr(fmt.Errorf("unknown backend %q (want reference, emu or cuda)", o.Name))
	}
}

// parseDevices reads --gpus (default "0") and --gpu-split.
func parseDevices(o backendOptions) ([]int, []float64, error) {
	ids := []int{0}
	if s := strings.TrimSpace(o.GPUs); s != "" {
		ids = nil
		seen := map[int]bool{}
		for _, f := range strings.Split(s, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || id < 0 {
				return nil, nil, usageErr(fmt.Errorf("--gpus %q: want device ids like 0,1", o.GPUs))
			}
			if seen[id] {
				return nil, nil, usageErr(fmt.Errorf("--gpus %q: device %d listed twice", o.GPUs, id))
			}
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var split []float64
	if s := strings.TrimSpace(o.GPUSplit); s != "" {
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(v > 0) {
				return nil, nil, usageErr(fmt.Errorf("--gpu-split %q: want GB per device like 20,24", o.GPUSplit))
			}
			split = append(split, v)
		}
		if len(split) != len(ids) {
			return nil, nil, usageErr(fmt.Errorf("--gpu-split has %d values for %d devices (--gpus %q)", len(split), len(ids), o.GPUs))
		}
	}
	return ids, split, nil
}

// deviceOwner closes the devices a backend was opened on.
type deviceOwner struct {
	*cuda.Backend
	devs []device.Device
}

func (d deviceOwner) Close() error {
	err := d.Backend.Close()
	for _, dv := range d.devs {
		if e := dv.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func newCUDABackend(load deviceLoader, devs []device.Device, split []float64, o backendOptions, name string) (backends.Backend, error) {
	if _, err := device.ParseDType(o.Precision); err != nil {
		for _, d := range devs {
			d.Close()
		}
		return nil, usageErr(err)
	}
	log := o.Log
	if log == nil {
		log = os.Stderr
	}
	b, err := load(devs, cuda.Options{Name: name, Precision: o.Precision, MaxTokens: o.MaxTokens, SplitGB: split, Log: log, AllowUnusedTensors: o.AllowUnused, KVCacheQuant: o.KVCacheQuant})
	if err != nil {
		for _, d := range devs {
			d.Close()
		}
		if errors.Is(err, checkpoint.ErrUnused) || errors.Is(err, gguf.ErrFormat) || errors.Is(err, gguf.ErrUnsupported) {
			return nil, usageErr(err)
		}
		return nil, err
	}
	return deviceOwner{b, devs}, nil
}

// kvCacheState resolves --kv-cache-quant (mode) against checkpoint m:
// quant is "on" or "off" and scheme describes the declared KV cache, both
// empty for a checkpoint without one ("off" is then what it always is;
// "on" is refused as a usage error, as is an unknown mode).
func kvCacheState(m *checkpoint.Model, mode string) (state, scheme string, err error) {
	if m == nil || m.Config == nil {
		if mode == quant.KVQuantOn {
			return "", "", usageErr(fmt.Errorf("--kv-cache-quant on: the model declares no quantized KV cache"))
		}
		return "", "", nil
	}
	s, err := quant.Parse(m.Config)
	if err != nil {
		return "", "", usageErr(fmt.Errorf("%s: %w", m.Dir, err))
	}
	on, err := s.KVQuantEnabled(mode)
	if err != nil {
		return "", "", usageErr(fmt.Errorf("%s: %w", m.Dir, err))
	}
	if s.KV == nil {
		return "", "", nil
	}
	if on {
		return quant.KVQuantOn, s.KV.Describe(), nil
	}
	return quant.KVQuantOff, s.KV.Describe(), nil
}
