package checkpoint

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestParseConfigGeneric: ParseConfig reads only family-independent keys
// and knows no model_type (the family tests are arch/config_test.go).
func TestParseConfigGeneric(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type":"bert","hidden_size":64,"eos_token_id":[3,9],"torch_dtype":"bfloat16","compression_config":{"a":1},"x":null}`), "d/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelType != "bert" || c.HiddenSize != 64 || c.VocabSize != 0 || c.NumKeyValueHeads != 0 || c.RMSNormEps != 0 ||
		c.EOSTokenID != 3 || len(c.EOSTokenIDs) != 2 || c.BOSTokenID != -1 || c.TorchDtype != "bfloat16" ||
		c.QuantizationKey != "compression_config" || string(c.QuantizationConfig) != `{"a":1}` ||
		c.Resolved || c.Path != "d/config.json" || len(c.Raw) != 6 {
		t.Errorf("got %+v", c)
	}
	for _, bad := range []struct{ js, want string }{
		{`[]`, "not a JSON object"},
		{`{"model_type":1}`, "model_type: want a string"},
		{`{"hidden_size":1.5}`, "hidden_size: want an integer"},
		{`{"quantization_config":3}`, "quantization_config must be a JSON object"},
	} {
		_, err := ParseConfig([]byte(bad.js), "d/config.json")
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "d/config.json") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.js, err, bad.want)
		}
	}
}

// TestConfigReaderSub: a Sub reader's errors name the nested key and are
// the parent's first error.
func TestConfigReaderSub(t *testing.T) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(`{"text_config":{"rope_scaling":{"factor":"x"}},"n":5}`), &raw); err != nil {
		t.Fatal(err)
	}
	r := NewConfigReader("c.json", raw)
	if r.Sub("absent") != nil || r.Err() != nil {
		t.Fatal("absent key gave a reader or an error")
	}
	rs := r.Sub("text_config").Sub("rope_scaling")
	if f := rs.Float("factor", 1); f != 0 || r.Err() == nil || !strings.Contains(r.Err().Error(), "c.json: text_config.rope_scaling.factor: want a number") {
		t.Errorf("nested error %v", r.Err())
	}
	r2 := NewConfigReader("c.json", raw)
	if r2.Sub("n") != nil || r2.Err() == nil || !strings.Contains(r2.Err().Error(), "n must be an object") {
		t.Errorf("non-object: %v", r2.Err())
	}
}
