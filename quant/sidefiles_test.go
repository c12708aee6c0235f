package quant

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
)

func sideConfig(files map[string]string) *checkpoint.Config {
	c := &checkpoint.Config{TorchDtype: "float16", QuantizationFiles: map[string]json.RawMessage{}}
	for k, v := range files {
		c.QuantizationFiles[k] = json.RawMessage(v)
	}
	return c
}

// TestSideFilesPublished: settings files as published checkpoints ship
// them, without quantization_config in config.json.
func TestSideFilesPublished(t *testing.T) {
	for _, c := range []struct {
		source, file, body string
		check              func(*Scheme) bool
	}{
		// huggingface.co/TheBloke/Llama-2-7B-GPTQ quantize_config.json (AutoGPTQ 0.4)
		{"TheBloke GPTQ", "quantize_config.json", `{"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": false, "sym": true, "true_sequential": true, "model_name_or_path": null, "model_file_base_name": "model"}`,
			func(s *Scheme) bool {
				return s.Method == MethodGPTQ && s.GPTQ.Bits == 4 && s.GPTQ.GroupSize == 128 && !s.GPTQ.DescAct && !s.GPTQ.V2
			}},
		// AutoGPTQ 0.7 quantize_config.json (BaseQuantizeConfig.to_dict: quant_method and checkpoint_format)
		{"AutoGPTQ 0.7", "quantize_config.json", `{"bits": 4, "group_size": 32, "damp_percent": 0.1, "desc_act": true, "static_groups": false, "sym": true, "true_sequential": true, "model_name_or_path": null, "model_file_base_name": "model", "quant_method": "gptq", "checkpoint_format": "gptq"}`,
			func(s *Scheme) bool { return s.Method == MethodGPTQ && s.GPTQ.GroupSize == 32 && s.GPTQ.DescAct }},
		// huggingface.co/TheBloke/Llama-2-7B-AWQ quant_config.json (AutoAWQ)
		{"TheBloke AWQ", "quant_config.json", `{"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"}`,
			func(s *Scheme) bool { return s.Method == MethodAWQ && s.AWQ.Bits == 4 && s.AWQ.GroupSize == 128 }},
		// AutoAWQ settings saved as quantize_config.json (vLLM's AWQConfig looks there too)
		{"AWQ in quantize_config.json", "quantize_config.json", `{"zero_point": true, "q_group_size": 64, "w_bit": 4, "version": "gemm"}`,
			func(s *Scheme) bool { return s.Method == MethodAWQ && s.AWQ.GroupSize == 64 }},
	} {
		s, err := Parse(sideConfig(map[string]string{c.file: c.body}))
		if err != nil || !c.check(s) {
			t.Errorf("%s: %+v, %v", c.source, s, err)
		}
	}
	// quantization_config in config.json wins over a side file (transformers reads only config.json)
	cfg := sideConfig(map[string]string{"quantize_config.json": `{"bits": 8}`})
	cfg.QuantizationConfig = json.RawMessage(`{"quant_method":"gptq","bits":4,"group_size":128}`)
	if s, err := Parse(cfg); err != nil || s.GPTQ.Bits != 4 {
		t.Errorf("config.json did not win: %+v, %v", s, err)
	}
}

func TestSideFilesErrors(t *testing.T) {
	for _, c := range []struct{ file, body, want string }{
		{"quantize_config.json", `{"bits": 3, "group_size": 128}`, "quantize_config.json: gptq bits 3 not supported"},
		{"quant_config.json", `{"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMV"}`, `quant_config.json: awq version "GEMV"`},
		{"quant_config.json", `{"bits": 4}`, "quant_config.json: no quant_method, and its keys fit no format that writes this file (awq)"},
		{"quantize_config.json", `{"quant_method": "exl2"}`, `quantize_config.json: unsupported quant_method "exl2" (supported here: gptq, awq)`},
	} {
		_, err := Parse(sideConfig(map[string]string{c.file: c.body}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: got %v, want %q", c.file, c.body, err, c.want)
		}
	}
}

// TestSideFilesKnownToCheckpoint: every family's settings file is one that
// checkpoint.OpenDir reads, and OpenDir reads it only without
// quantization_config.
func TestSideFilesKnownToCheckpoint(t *testing.T) {
	for _, f := range families() {
		for _, s := range f.sideFiles {
			if !slices.Contains(checkpoint.QuantizationSideFiles(), s) {
				t.Errorf("family %s reads %s, which checkpoint.OpenDir does not load", f.name, s)
			}
		}
	}
	dir := t.TempDir()
	cfg := `{"model_type":"llama","vocab_size":8,"hidden_size":4,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,"num_key_value_heads":1,"max_position_embeddings":16,"rms_norm_eps":1e-6}`
	if err := checkpoint.WriteFileAtomic(filepath.Join(dir, "config.json"), []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteFileAtomic(filepath.Join(dir, "quant_config.json"), []byte(`{"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"}`)); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteFile(filepath.Join(dir, "model.safetensors"), []checkpoint.WriteTensor{{Name: "x", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if s, err := Parse(m.Config); err != nil || s.Method != MethodAWQ {
		t.Errorf("OpenDir + Parse: %+v, %v", s, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "quant_config.json"), []byte(`[1]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.OpenDir(dir); err == nil || !strings.Contains(err.Error(), "quant_config.json: not a JSON object") {
		t.Errorf("a non-object quant_config.json: %v", err)
	}
}
