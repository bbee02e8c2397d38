package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

type irNet struct {
	Version string `xml:"version,attr"`
	Layers  []struct {
		ID      string `xml:"id,attr"`
		Name    string `xml:"name,attr"`
		Type    string `xml:"type,attr"`
		Version string `xml:"version,attr"`
		Data    struct {
			ElementType string `xml:"element_type,attr"`
			Shape       string `xml:"shape,attr"`
			Offset      int64  `xml:"offset,attr"`
			Size        int64  `xml:"size,attr"`
			VariableID  string `xml:"variable_id,attr"`
			Destination string `xml:"destination_type,attr"`
		} `xml:"data"`
		RtInfo struct {
			Attrs []struct {
				Name string `xml:"name,attr"`
			} `xml:"attribute"`
		} `xml:"rt_info"`
	} `xml:"layers>layer"`
	Edges []struct {
		From string `xml:"from-layer,attr"`
	} `xml:"edges>edge"`
}

func TestOpenVINOIRStructure(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixtures.Qwen36, out, "--target", "openvino", "--head-precision", "int4")
	raw, err := os.ReadFile(filepath.Join(out, "openvino_mtp_model.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var net irNet
	if err := xml.Unmarshal(raw, &net); err != nil {
		t.Fatal(err)
	}
	bin, _ := os.Stat(filepath.Join(out, "openvino_mtp_model.bin"))
	if net.Version != "11" {
		t.Fatalf("IR version %s", net.Version)
	}
	types := map[string]int{}
	var params, vars []string
	u4, decompressed := 0, 0
	for _, l := range net.Layers {
		types[l.Type]++
		switch l.Type {
		case "Parameter":
			params = append(params, l.Name)
		case "ReadValue":
			vars = append(vars, l.Data.VariableID)
		case "Const":
			if l.Data.Offset < 0 || l.Data.Offset+l.Data.Size > bin.Size() {
				t.Errorf("%s: [%d, +%d) outside the %d-byte .bin", l.Name, l.Data.Offset, l.Data.Size, bin.Size())
			}
			if l.Data.Offset%64 != 0 {
				t.Errorf("%s: unaligned blob at %d", l.Name, l.Data.Offset)
			}
			if l.Data.ElementType == "u4" {
				u4++
			}
		case "Convert":
			for _, a := range l.RtInfo.Attrs {
				if a.Name == "decompression" {
					decompressed++
				}
			}
		}
	}
	if strings.Join(params, ",") != "inputs_embeds,hidden_states,attention_mask,position_ids,beam_idx" {
		t.Errorf("parameters %v", params)
	}
	if strings.Join(vars, ",") != "mtp.layers.0.self_attn.key_cache,mtp.layers.0.self_attn.value_cache" || types["Assign"] != 2 {
		t.Errorf("state %v, %d assigns", vars, types["Assign"])
	}
	// The tiled MoE block and the rest of the layer, once each.
	for typ, n := range map[string]int{"TopK": 1, "SoftMax": 1, "ScatterElementsUpdate": 1, "Tile": 1, "ScaledDotProductAttention": 1, "Swish": 2, "Result": 1} {
		if types[typ] != n {
			t.Errorf("%d %s layers, want %d", types[typ], typ, n)
		}
	}
	// int4 asym: codes and zero points of the 11 compressed weights are u4. Only the Converts
	// of the two f16 gates carry the decompression mark: NNCF marks no integer Convert, and a
	// mark there makes the CPU plugin fold the weights to f32 at compile time.
	if u4 != 2*11 || decompressed != 2 {
		t.Errorf("%d u4 consts, %d decompression marks", u4, decompressed)
	}
	if code, _, stderr := runCLI(t, "verify", "--src", fixtures.Ensure(t, fixtures.Qwen36), out); code != 0 {
		t.Errorf("verify: %s", stderr)
	}
}
