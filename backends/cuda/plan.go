package cuda

import (
	"fmt"
	"io"
	"strings"
)

// DevicePlan is the memory one device receives.
type DevicePlan struct {
	Name        string
	Free        int64 // free memory reported by the device before loading
	Budget      int64 // bytes qppl may use (Free, or --gpu-split)
	FirstLayer  int   // layers [FirstLayer, EndLayer)
	EndLayer    int
	Weights     int64 // packed layer weights, norms and biases
	Embed       int64 // embedding table (device 0, and the head device when tied)
	Head        int64 // lm_head weights and final norm (head device)
	Scratch     int64 // one dequantized Linear in the GEMM dtype
	Activations int64 // per-window buffers for Options.MaxTokens tokens
	Logits      int64 // logits and base log-prob chunk (head device)
	HoldsHead   bool
}

// Total returns the bytes the device will hold.
func (p DevicePlan) Total() int64 {
	return p.Weights + p.Embed + p.Head + p.Scratch + p.Activations + p.Logits
}

// Plan is the memory plan of a Backend: which layers live on which device.
type Plan struct {
	Precision string
	MaxTokens int
	Devices   []DevicePlan
	// LayerBytes are the device bytes of each decoder layer.
	LayerBytes []int64
}

// gb formats a byte count with a unit that suits its size.
func gb(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// Write prints the plan, one line per device.
func (p *Plan) Write(w io.Writer) {
	fmt.Fprintf(w, "cuda memory plan (precision %s, windows up to %d tokens):\n", p.Precision, p.MaxTokens)
	for _, d := range p.Devices {
		layers := "no layers"
		if d.EndLayer > d.FirstLayer {
			layers = fmt.Sprintf("layers %d-%d", d.FirstLayer, d.EndLayer-1)
		}
		var extra []string
		if d.Embed > 0 {
			extra = append(extra, "embeddings "+gb(d.Embed))
		}
		if d.HoldsHead {
			extra = append(extra, "head "+gb(d.Head), "logits "+gb(d.Logits))
		}
		fmt.Fprintf(w, "  %-8s %-13s packed weights %s, scratch %s, activations %s%s; total %s of %s budget (%s free)\n",
			d.Name, layers, gb(d.Weights), gb(d.Scratch), gb(d.Activations), prefixJoin(extra), gb(d.Total()), gb(d.Budget), gb(d.Free))
	}
}

func prefixJoin(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

// planInput is what the split needs to know about the model.
type planInput struct {
	layerBytes  []int64 // per layer: packed linears + norms + biases
	embedBytes  int64
	headBytes   int64 // head weights (+ final norm); 0 extra when the tied head reuses the embedding on device 0
	tiedExtra   int64 // embedding copy needed when the tied head is not on device 0
	scratch     int64 // largest dequantized layer Linear
	headScratch int64 // dequantized head (0 when multiplied directly)
	act         int64
	logits      int64
}

// split assigns layers to devices in order, filling each device up to its
// budget (like device_map="auto"): device 0 also holds the embedding, and
// the head goes on the device of the last layer (or the next one with room).
func split(names []string, free, budget []int64, in planInput) (*Plan, error) {
	n := len(names)
	p := &Plan{Devices: make([]DevicePlan, n), LayerBytes: in.layerBytes}
	for i := range p.Devices {
		p.Devices[i] = DevicePlan{Name: names[i], Free: free[i], Budget: budget[i]}
	}
	// Device 0 always holds the embedding and the per-window buffers (the
	// embedding gather writes there); any other device gets per-window
	// buffers and a scratch once it holds a layer (or the head).
	fixed := func(i int) int64 {
		if i == 0 {
			return in.scratch
		}
		return in.act + in.scratch
	}
	dev := 0
	used := make([]int64, n)
	used[0] = in.embedBytes + in.act
	// device 0 runs the embedding gather whether or not it gets a layer
	if used[0] > budget[0] {
		return p, fmt.Errorf("cuda: the model does not fit: %s cannot hold the embedding (%s) and the per-window buffers (%s) within its budget of %s",
			names[0], gb(in.embedBytes), gb(in.act), gb(budget[0]))
	}
	p.Devices[0].Embed = in.embedBytes
	p.Devices[0].Activations = in.act
	started := make([]bool, n)
	for l, lb := range in.layerBytes {
		for {
			if dev >= n {
				need := int64(0)
				for _, b := range in.layerBytes[l:] {
					need += b
				}
				return p, fmt.Errorf("cuda: the model does not fit: layers %d-%d (%s) are left after filling every device (%s)",
					l, len(in.layerBytes)-1, gb(need), budgetsString(p))
			}
			extra := lb
			if !started[dev] {
				extra += fixed(dev)
			}
			if used[dev]+extra <= budget[dev] {
				used[dev] += extra
				if !started[dev] {
					started[dev] = true
					p.Devices[dev].FirstLayer = l
					p.Devices[dev].Activations = in.act
					p.Devices[dev].Scratch = in.scratch
				}
				p.Devices[dev].EndLayer = l + 1
				p.Devices[dev].Weights += lb
				break
			}
			dev++
		}
	}
	// head on the last layer's device, or a later one
	for h := dev; h < n; h++ {
		need := in.headBytes + in.logits
		if h != 0 {
			need += in.tiedExtra
		}
		if !started[h] && h != 0 {
			need += in.act
		}
		hs := max(in.headScratch-p.Devices[h].Scratch, 0)
		need += hs
		if used[h]+need <= budget[h] {
			d := &p.Devices[h]
			d.HoldsHead = true
			d.Head = in.headBytes
			d.Logits = in.logits
			d.Scratch += hs
			if h != 0 {
				d.Embed += in.tiedExtra
			}
			if !started[h] {
				d.Activations = in.act
				d.FirstLayer, d.EndLayer = len(in.layerBytes), len(in.layerBytes)
			}
			return p, nil
		}
	}
	return p, fmt.Errorf("cuda: the model does not fit: no device has room for the head (%s + logits %s) after the layers (%s)",
		gb(in.headBytes), gb(in.logits), budgetsString(p))
}

func budgetsString(p *Plan) string {
	var s []string
	for _, d := range p.Devices {
		s = append(s, fmt.Sprintf("%s budget %s", d.Name, gb(d.Budget)))
	}
	return strings.Join(s, ", ")
}
