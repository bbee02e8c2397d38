package openvino

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// BinAlign is the alignment of every blob in the .bin.
const BinAlign = 64

// blob is a Const's data: either bytes to append, or a region already in the .bin.
type blob struct {
	data   []byte // literal, appended by Serialize
	offset int64  // placed region (data == nil), or the literal's offset once written
	size   int64
	placed bool
}

func (g *Graph) constant(name string, et ElemType, shape []int64, bl *blob) Output {
	n := g.add(name, "Const", "opset1", nil, nil, port{et, shape, nil})
	n.blob = bl
	return n.Out(0)
}

// ConstBytes adds a Const whose raw little-endian bytes are given.
func (g *Graph) ConstBytes(name string, et ElemType, shape []int64, data []byte) Output {
	return g.constant(name, et, shape, &blob{data: data, size: int64(len(data))})
}

// ConstAt adds a Const whose bytes already sit in the .bin at offset (written by a tensor writer).
func (g *Graph) ConstAt(name string, et ElemType, shape []int64, offset, size int64) Output {
	return g.constant(name, et, shape, &blob{offset: offset, size: size, placed: true})
}

// ConstI64 adds a 1-D i64 Const.
func (g *Graph) ConstI64(name string, v ...int64) Output {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return g.ConstBytes(name, I64, []int64{int64(len(v))}, b)
}

// ScalarI64 adds a scalar i64 Const.
func (g *Graph) ScalarI64(name string, v int64) Output {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return g.ConstBytes(name, I64, []int64{}, b)
}

// ConstF32 adds an f32 Const of the given shape.
func (g *Graph) ConstF32(name string, shape []int64, v ...float32) Output {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return g.ConstBytes(name, F32, shape, b)
}

// ScalarF32 adds a scalar f32 Const.
func (g *Graph) ScalarF32(name string, v float32) Output { return g.ConstF32(name, []int64{}, v) }

// Serialize writes the XML to xmlOut and appends the literal Consts to the
// .bin, whose current length is binLen (placed regions come before it). Equal
// literals share one blob. Output is deterministic.
func (g *Graph) Serialize(xmlOut io.Writer, bin io.Writer, binLen int64) (int64, error) {
	pos := binLen
	seen := map[string]int64{}
	for _, n := range g.nodes {
		bl := n.blob
		if bl == nil || bl.placed {
			continue
		}
		if off, ok := seen[string(bl.data)]; ok {
			bl.offset = off
			continue
		}
		if pad := (BinAlign - pos%BinAlign) % BinAlign; pad > 0 {
			if _, err := bin.Write(make([]byte, pad)); err != nil {
				return 0, err
			}
			pos += pad
		}
		if _, err := bin.Write(bl.data); err != nil {
			return 0, err
		}
		bl.offset = pos
		seen[string(bl.data)] = pos
		pos += bl.size
	}
	var x bytes.Buffer
	x.WriteString("<?xml version=\"1.0\"?>\n")
	fmt.Fprintf(&x, "<net name=\"%s\" version=\"11\">\n\t<layers>\n", esc(g.Name))
	for _, n := range g.nodes {
		fmt.Fprintf(&x, "\t\t<layer id=\"%d\" name=\"%s\" type=\"%s\" version=\"%s\">\n", n.id, esc(n.Name), n.Type, n.Version)
		attrs := n.Attrs
		if n.blob != nil {
			o := n.outs[0]
			attrs = []Attr{{"element_type", string(o.et)}, {"shape", ints(o.shape)}, {"offset", strconv.FormatInt(n.blob.offset, 10)}, {"size", strconv.FormatInt(n.blob.size, 10)}}
		}
		if len(attrs) > 0 {
			x.WriteString("\t\t\t<data")
			for _, a := range attrs {
				fmt.Fprintf(&x, " %s=\"%s\"", a.Key, esc(a.Value))
			}
			x.WriteString(" />\n")
		}
		if n.decompression {
			x.WriteString("\t\t\t<rt_info>\n\t\t\t\t<attribute name=\"decompression\" version=\"0\" />\n\t\t\t</rt_info>\n")
		}
		if len(n.Inputs) > 0 {
			x.WriteString("\t\t\t<input>\n")
			for i, in := range n.Inputs {
				writePort(&x, i, in.Node.outs[in.Index], false)
			}
			x.WriteString("\t\t\t</input>\n")
		}
		if len(n.outs) > 0 && n.Type != "Result" && n.Type != "Assign" {
			x.WriteString("\t\t\t<output>\n")
			for i, o := range n.outs {
				writePort(&x, len(n.Inputs)+i, o, true)
			}
			x.WriteString("\t\t\t</output>\n")
		}
		x.WriteString("\t\t</layer>\n")
	}
	x.WriteString("\t</layers>\n\t<edges>\n")
	for _, n := range g.nodes {
		for i, in := range n.Inputs {
			fmt.Fprintf(&x, "\t\t<edge from-layer=\"%d\" from-port=\"%d\" to-layer=\"%d\" to-port=\"%d\" />\n",
				in.Node.id, len(in.Node.Inputs)+in.Index, n.id, i)
		}
	}
	x.WriteString("\t</edges>\n")
	if len(g.RtInfo) > 0 {
		x.WriteString("\t<rt_info>\n")
		for _, a := range g.RtInfo {
			fmt.Fprintf(&x, "\t\t<%s value=\"%s\" />\n", a.Key, esc(a.Value))
		}
		x.WriteString("\t</rt_info>\n")
	}
	x.WriteString("</net>\n")
	_, err := xmlOut.Write(x.Bytes())
	return pos, err
}

func writePort(x *bytes.Buffer, id int, p port, output bool) {
	fmt.Fprintf(x, "\t\t\t\t<port id=\"%d\" precision=\"%s\"", id, precisions[p.et])
	if output && len(p.names) > 0 {
		escaped := make([]string, len(p.names))
		for i, n := range p.names {
			escaped[i] = strings.ReplaceAll(n, ",", `\,`)
		}
		fmt.Fprintf(x, " names=\"%s\"", esc(strings.Join(escaped, ",")))
	}
	if p.shape == nil {
		x.WriteString(" />\n")
		return
	}
	x.WriteString(">\n")
	for _, d := range p.shape {
		fmt.Fprintf(x, "\t\t\t\t\t<dim>%d</dim>\n", d)
	}
	x.WriteString("\t\t\t\t</port>\n")
}

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), `"`, "&quot;")
}
