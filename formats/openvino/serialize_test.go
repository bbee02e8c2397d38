package openvino

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/openvino_small.xml from this build")

// smallGraph builds a graph with every weight form the targets emit: an f16
// weight, a grouped u4 weight with zero points and scales, an RMSNorm with
// its f32 gamma, two Linears, Results and model rt_info. Its weights are
// placed in a .bin first, as the targets' tensor writer does; placed holds
// those bytes.
func smallGraph() (g *Graph, placed []byte) {
	const n, k, group = 8, 16, 8
	regions := []Region{
		{F16, []int64{n, k}, 0, n * k * 2},                    // q_proj: plain f16
		{U4, []int64{n, k / group, group}, 0, n * k / 2},      // k_proj: u4 codes
		{U4, []int64{n, k / group, 1}, 0, n * k / group / 2},  // k_proj: u4 zero points
		{F16, []int64{n, k / group, 1}, 0, n * k / group * 2}, // k_proj: f16 scales
		{F32, []int64{k}, 0, k * 4},                           // norm gamma
	}
	sizes := make([]int64, len(regions))
	for i, r := range regions {
		sizes[i] = r.Size
	}
	offsets, end := PlaceWeights(sizes)
	for i := range regions {
		regions[i].Offset = offsets[i]
	}
	placed = make([]byte, end)
	for i := range placed {
		placed[i] = byte(i*7 + 3)
	}

	g = New("small")
	x := g.Parameter("x", F32, Dynamic, Dynamic, k).SetNames("x", "hidden,0")
	h := g.RMSNorm("norm", x, regions[4], 1e-6)
	q := g.Linear("q_proj", h, Weight{Name: "q_proj.weight", Shape: []int64{n, k}, Plain: &regions[0]})
	kp := g.Linear("k_proj", h, Weight{Name: "k_proj.weight", Shape: []int64{n, k}, Q: &regions[1], ZP: &regions[2], Scale: &regions[3]})
	g.Result("q", q)
	g.Result("k", kp)
	g.RtInfo = []Attr{{"mtpconv_version", "test"}, {"mtpconv_source", `a "dir" & <more>`}}
	return g, placed
}

// irNet is what the checks read back from the XML.
type irNet struct {
	Layers []struct {
		ID   int    `xml:"id,attr"`
		Name string `xml:"name,attr"`
		Type string `xml:"type,attr"`
		Data struct {
			ElementType string `xml:"element_type,attr"`
			Offset      int64  `xml:"offset,attr"`
			Size        int64  `xml:"size,attr"`
		} `xml:"data"`
		RtInfo []struct {
			Name string `xml:"name,attr"`
		} `xml:"rt_info>attribute"`
	} `xml:"layers>layer"`
	Edges []struct {
		From int `xml:"from-layer,attr"`
		To   int `xml:"to-layer,attr"`
	} `xml:"edges>edge"`
}

func TestSerializeGolden(t *testing.T) {
	g, placed := smallGraph()
	var xmlOut, bin bytes.Buffer
	bin.Write(placed)
	end, err := g.Serialize(&xmlOut, &bin, int64(len(placed)))
	if err != nil {
		t.Fatal(err)
	}

	golden := filepath.Join("testdata", "golden", "openvino_small.xml")
	if *update {
		if err := os.WriteFile(golden, xmlOut.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := xmlOut.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var a, b string
			if i < len(gl) {
				a = gl[i]
			}
			if i < len(wl) {
				b = wl[i]
			}
			if a != b {
				t.Errorf("XML differs from %s at line %d:\n got  %q\n want %q\n(go test ./formats/openvino -update rewrites it)", golden, i+1, a, b)
				break
			}
		}
	}

	// The .bin: the placed weights untouched, then the literal Consts, each at BinAlign.
	if end != int64(bin.Len()) {
		t.Fatalf("Serialize says the .bin ends at %d, it holds %d bytes", end, bin.Len())
	}
	if !bytes.Equal(bin.Bytes()[:len(placed)], placed) {
		t.Error("the placed weights were overwritten")
	}
	var net irNet
	if err := xml.Unmarshal(xmlOut.Bytes(), &net); err != nil {
		t.Fatal(err)
	}
	byID := map[int]int{}
	consts := 0
	var maxEnd int64
	for i, l := range net.Layers {
		byID[l.ID] = i
		if l.Type != "Const" {
			continue
		}
		consts++
		if l.Data.Offset%BinAlign != 0 {
			t.Errorf("Const %s at offset %d, not a multiple of %d", l.Name, l.Data.Offset, BinAlign)
		}
		if l.Data.Offset < 0 || l.Data.Size <= 0 || l.Data.Offset+l.Data.Size > end {
			t.Errorf("Const %s: [%d, +%d) outside the %d-byte .bin", l.Name, l.Data.Offset, l.Data.Size, end)
		}
		maxEnd = max(maxEnd, l.Data.Offset+l.Data.Size)
	}
	if consts < 10 || maxEnd != end {
		t.Errorf("%d Consts, the last ending at %d of %d bytes", consts, maxEnd, end)
	}
	constBytes := func(name string) []byte {
		for _, l := range net.Layers {
			if l.Name == name {
				return bin.Bytes()[l.Data.Offset : l.Data.Offset+l.Data.Size]
			}
		}
		t.Fatalf("no layer %s", name)
		return nil
	}
	if b := constBytes("k_proj.weight/reshape/shape"); len(b) != 16 || binary.LittleEndian.Uint64(b) != 8 || binary.LittleEndian.Uint64(b[8:]) != 16 {
		t.Errorf("reshape target bytes %v", b)
	}
	if b := constBytes("norm/eps"); math.Float32frombits(binary.LittleEndian.Uint32(b)) != 1e-6 {
		t.Errorf("eps bytes %v", b)
	}

	// Converts: the f16 weight's is marked decompression; the integer
	// ones (codes, zero points, back to f32) carry no rt_info at all.
	input := map[int]int{} // Convert layer index -> its input's layer index
	for _, e := range net.Edges {
		if to := byID[e.To]; net.Layers[to].Type == "Convert" {
			input[to] = byID[e.From]
		}
	}
	marked, plain := 0, 0
	for i, l := range net.Layers {
		if l.Type != "Convert" {
			continue
		}
		from := net.Layers[input[i]]
		if from.Type == "Const" && from.Data.ElementType == "f16" {
			marked++
			if len(l.RtInfo) != 1 || l.RtInfo[0].Name != "decompression" {
				t.Errorf("f16 weight Convert %s: rt_info %v, want decompression", l.Name, l.RtInfo)
			}
			continue
		}
		plain++
		if len(l.RtInfo) != 0 {
			t.Errorf("Convert %s (of %s %s): rt_info %v, want none", l.Name, from.Type, from.Data.ElementType, l.RtInfo)
		}
	}
	if marked != 1 || plain != 3 {
		t.Errorf("%d decompression Converts, %d others; want 1 and 3", marked, plain)
	}
}
