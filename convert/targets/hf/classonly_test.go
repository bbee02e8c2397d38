package hf

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// TestClassOnly: a repo of a family mtpconv does not read is judged by its
// MTP class's rule for the whole head. LongCat-Flash's head is built
// unquantized exactly when disable_quant_module lists "mtp" (a float head
// without it is named, with the entry to add; a quantized head with it too);
// Nemotron-3.5-Transcribe's FP8 head is the release's (no problem); any
// other unknown architecture is not judged.
func TestClassOnly(t *testing.T) {
	t.Parallel()
	const fp8 = `"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}`
	longcat := func(extra string) string {
		return `{"architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash", ` + fp8 + extra + `}`
	}
	trunk := map[string]st.DType{"model.layers.0.mlp.down_proj.weight": st.F8E4M3, "model.layers.0.mlp.down_proj.weight_scale_inv": st.F32}
	with := func(head map[string]st.DType) map[string]st.DType {
		out := map[string]st.DType{}
		for k, v := range trunk {
			out[k] = v
		}
		for k, v := range head {
			out[k] = v
		}
		return out
	}
	bf16Head := with(map[string]st.DType{"model.mtp.layers.0.eh_proj.weight": st.BF16, "model.mtp.layers.0.enorm.m.weight": st.BF16})
	fp8Head := with(map[string]st.DType{"model.mtp.layers.0.eh_proj.weight": st.F8E4M3, "model.mtp.layers.0.eh_proj.weight_scale_inv": st.F32})
	for _, c := range []struct {
		name, cfg string
		tensors   map[string]st.DType
		judged    bool
		problem   string // "" none
		note      string
	}{
		{"longcat: the release's disable_quant_module", longcat(`, "disable_quant_module": ["mtp"]`), bf16Head, true, "", "build the float head unquantized"},
		{"longcat: disable_quant_module dropped", longcat(``), bf16Head, true, `disable_quant_module: lacks "mtp"`, ""},
		{"longcat: other modules disabled only", longcat(`, "disable_quant_module": ["self_attn"]`), bf16Head, true, `lacks "mtp"`, ""},
		{"longcat: a quantized head built unquantized", longcat(`, "disable_quant_module": ["mtp"]`), fp8Head, true, `lists "mtp"`, ""},
		{"longcat: a quantized head built quantized", longcat(``), fp8Head, true, "", "stored quantized and built with"},
		{"longcat: no head", longcat(`, "disable_quant_module": ["mtp"]`), trunk, true, "model.mtp.*: the repo holds no MTP head", ""},
		{"nemotron-3.5-transcribe: an FP8 head as intended",
			`{"architectures": ["Nemotron3_5TranscribeForConditionalGeneration"], "model_type": "nemotron3_5_transcribe", "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}`,
			map[string]st.DType{"llm.mtp.layers.0.mixer.in_proj.weight": st.F8E4M3, "llm.mtp.layers.0.mixer.in_proj.weight_scale": st.F32}, true, "", "as the FP8 and NVFP4 releases intend"},
		{"unknown architecture", `{"architectures": ["SomethingElse"], "model_type": "x"}`, bf16Head, false, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := testmodel.WholeHeadRepo(t, c.cfg, c.tensors)
			r, ok, err := ClassOnly(source.Dir(dir), Runtimes)
			if err != nil || ok != c.judged {
				t.Fatalf("judged %v, %v", ok, err)
			}
			if !ok {
				return
			}
			e := r.Err()
			switch {
			case c.problem == "" && e != nil:
				t.Errorf("a problem: %v", e)
			case c.problem != "" && (e == nil || !strings.Contains(e.Error(), c.problem)):
				t.Errorf("want %q, got %v", c.problem, e)
			case !strings.Contains(r.Note, c.note):
				t.Errorf("note %q, want %q", r.Note, c.note)
			}
			if strings.Contains(c.problem, "lacks") && !strings.Contains(r.MendConfig, `add "mtp" to config.json disable_quant_module`) {
				t.Errorf("mend: %q", r.MendConfig)
			}
		})
	}
}
