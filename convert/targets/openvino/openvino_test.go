package openvino_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/openvino"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// eos_token_id is read as GenAI needs it: an id or a list of ids, at the
// top level or in text_config; anything else is an error naming the key.
func TestEOSTokenID(t *testing.T) {
	for _, c := range []struct {
		config, want string
		ok           bool
		err          string
	}{
		{`{"eos_token_id": 7}`, "7", true, ""},
		{`{"eos_token_id": [7, 9]}`, "[7, 9]", true, ""},
		{`{"text_config": {"eos_token_id": 11}}`, "11", true, ""},
		{`{"eos_token_id": null, "text_config": {"eos_token_id": [3]}}`, "[3]", true, ""},
		{`{"vocab_size": 32}`, "", false, ""},
		{`{"eos_token_id": "</s>"}`, "", false, "neither an id nor a list of ids"},
		{`{"eos_token_id": 7`, "", false, "unexpected end"},
	} {
		got, ok, err := openvino.EOSTokenID([]byte(c.config))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.config, err, c.err)
			}
			continue
		}
		if err != nil || ok != c.ok || string(got) != c.want {
			t.Errorf("%s: %s %v %v, want %s %v", c.config, got, ok, err, c.want, c.ok)
		}
	}
}

// The head's linear layers are quantized at --head-precision and the
// lm_head at its own precision; families GenAI's MTP pipeline does not run
// are refused in the family's one sentence, and chained heads by count.
func TestPlan(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	for _, c := range []struct {
		head, lmHead   string
		headQ, lmHeadQ string // the planned quantization's mode, "" for none
	}{
		{"int8", "", "int8", "int8"},
		{"int4", "int8", "int4", "int8"},
		{"f16", "f16", "", ""},
	} {
		p, err := testmodel.Plan(t, m, "openvino", targets.Options{HeadPrecision: c.head, LMHeadPrecision: c.lmHead})
		if err != nil {
			t.Fatalf("%s/%s: %v", c.head, c.lmHead, err)
		}
		var proj, lm bool
		for _, o := range p.Tensors {
			mode := "" // NNCF's int8 per output channel or int4 in groups of 64
			if q := o.Quant; q != nil {
				mode = fmt.Sprintf("int%d", q.Bits)
				if q.Mode != codec.ModeNNCF || q.GroupSize != map[int]int{8: -1, 4: 64}[q.Bits] {
					t.Errorf("%s/%s: %s planned %+v", c.head, c.lmHead, o.Name, *q)
				}
			}
			switch {
			case strings.HasSuffix(o.Name, "lm_head.weight"):
				lm = true
				if !strings.HasPrefix(mode, c.lmHeadQ) || (c.lmHeadQ == "") != (mode == "") {
					t.Errorf("%s/%s: lm_head planned %q, want %q", c.head, c.lmHead, mode, c.lmHeadQ)
				}
			case strings.Contains(o.Name, "q_proj.weight"):
				proj = true
				if !strings.HasPrefix(mode, c.headQ) || (c.headQ == "") != (mode == "") {
					t.Errorf("%s/%s: %s planned %q, want %q", c.head, c.lmHead, o.Name, mode, c.headQ)
				}
			}
		}
		if !proj || !lm {
			t.Errorf("%s/%s: no q_proj (%v) or lm_head (%v) in the plan", c.head, c.lmHead, proj, lm)
		}
	}
	for fixture, want := range map[string]string{
		fixtures.DeepSeekV32:  "runs Qwen3.5 heads only",
		fixtures.GLM52:        "runs Qwen3.5 heads only",
		fixtures.Step35:       "runs Qwen3.5 heads only",
		fixtures.Hy3:          "runs Qwen3.5 heads only",
		fixtures.NemotronHMoE: "runs Qwen3.5 heads only",
	} {
		_, err := testmodel.Plan(t, testmodel.Load(t, fixture), "openvino", targets.Options{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), ".") > 2 {
			t.Errorf("%s: %v, want one sentence with %q", fixture, err, want)
		}
	}
}
