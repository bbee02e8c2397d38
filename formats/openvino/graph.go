// Package openvino writes OpenVINO IR v11 (.xml + .bin): a small typed graph
// builder whose nodes carry their opset, attributes, output element types and
// shapes, and a serializer. It knows the IR format and the op patterns the
// OpenVINO plugins fuse (blocks.go); it does not know which model uses them.
package openvino

import (
	"fmt"
	"strconv"
	"strings"
)

// ElemType is an OpenVINO element type, spelled as in the IR.
type ElemType string

// Element types used here.
const (
	F32     ElemType = "f32"
	F16     ElemType = "f16"
	I64     ElemType = "i64"
	I32     ElemType = "i32"
	U8      ElemType = "u8"
	I8      ElemType = "i8"
	U4      ElemType = "u4"
	I4      ElemType = "i4"
	Boolean ElemType = "boolean"
)

var precisions = map[ElemType]string{F32: "FP32", F16: "FP16", I64: "I64", I32: "I32", U8: "U8", I8: "I8", U4: "U4", I4: "I4", Boolean: "BOOL"}

// Dynamic marks a dynamic dimension.
const Dynamic = int64(-1)

// Output is one output port of a node.
type Output struct {
	Node  *Node
	Index int
}

// Attr is one attribute of a layer's <data>.
type Attr struct{ Key, Value string }

type port struct {
	et    ElemType
	shape []int64 // nil: unknown rank
	names []string
}

// Node is one layer.
type Node struct {
	id            int
	Name          string
	Type, Version string
	Attrs         []Attr
	Inputs        []Output
	outs          []port
	decompression bool
	blob          *blob // Const only
}

// Out returns output i.
func (n *Node) Out(i int) Output { return Output{n, i} }

// Type of an output.
func (o Output) Type() ElemType { return o.Node.outs[o.Index].et }

// Shape of an output (nil when unknown).
func (o Output) Shape() []int64 { return o.Node.outs[o.Index].shape }

// Graph is a model under construction.
type Graph struct {
	Name   string
	nodes  []*Node
	RtInfo []Attr // model-level rt_info, in order
	names  map[string]int
}

// New starts a graph.
func New(name string) *Graph { return &Graph{Name: name, names: map[string]int{}} }

// add appends a node; names are made unique so the IR stays readable.
func (g *Graph) add(name, typ, version string, attrs []Attr, inputs []Output, outs ...port) *Node {
	if k := g.names[name]; k > 0 {
		g.names[name] = k + 1
		name = name + "/" + strconv.Itoa(k)
	} else {
		g.names[name] = 1
	}
	n := &Node{id: len(g.nodes), Name: name, Type: typ, Version: version, Attrs: attrs, Inputs: inputs, outs: outs}
	g.nodes = append(g.nodes, n)
	return n
}

// SetNames sets the tensor names of an output (what runtimes look inputs and outputs up by).
func (o Output) SetNames(names ...string) Output {
	o.Node.outs[o.Index].names = names
	return o
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		if d < 0 {
			parts[i] = "?"
		} else {
			parts[i] = strconv.FormatInt(d, 10)
		}
	}
	return strings.Join(parts, ",")
}

func ints(v []int64) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(parts, ",")
}

func b(v bool) string { return strconv.FormatBool(v) }

// Parameter adds a model input.
func (g *Graph) Parameter(name string, et ElemType, shape ...int64) Output {
	n := g.add(name, "Parameter", "opset1", []Attr{{"shape", shapeString(shape)}, {"element_type", string(et)}}, nil, port{et, shape, []string{name}})
	return n.Out(0)
}

// Result adds a model output named name.
func (g *Graph) Result(name string, x Output) {
	x.SetNames(name)
	g.add(name+"/sink_port_0", "Result", "opset1", nil, []Output{x})
}

// Convert casts to et; decompression marks a Convert of a compressed weight.
func (g *Graph) Convert(name string, x Output, et ElemType, decompression bool) Output {
	n := g.add(name, "Convert", "opset1", []Attr{{"destination_type", string(et)}}, []Output{x}, port{et, x.Shape(), nil})
	n.decompression = decompression
	return n.Out(0)
}

func broadcastShape(a, b []int64) []int64 {
	if a == nil || b == nil {
		return nil
	}
	n := max(len(a), len(b))
	out := make([]int64, n)
	for i := 0; i < n; i++ {
		da, db := int64(1), int64(1)
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		case da < 0:
			out[i] = db
		default:
			out[i] = da
		}
	}
	return out
}

// binary adds an elementwise op with numpy broadcasting.
func (g *Graph) binary(typ, name string, a, b Output, extra ...Attr) Output {
	attrs := append([]Attr{{"auto_broadcast", "numpy"}}, extra...)
	return g.add(name, typ, "opset1", attrs, []Output{a, b}, port{a.Type(), broadcastShape(a.Shape(), b.Shape()), nil}).Out(0)
}

// Add, Subtract, Multiply, Divide and Power are elementwise with numpy broadcasting.
func (g *Graph) Add(name string, a, b Output) Output      { return g.binary("Add", name, a, b) }
func (g *Graph) Subtract(name string, a, b Output) Output { return g.binary("Subtract", name, a, b) }
func (g *Graph) Multiply(name string, a, b Output) Output { return g.binary("Multiply", name, a, b) }
func (g *Graph) Power(name string, a, b Output) Output    { return g.binary("Power", name, a, b) }
func (g *Graph) Divide(name string, a, b Output) Output {
	return g.binary("Divide", name, a, b, Attr{"m_pythondiv", "true"})
}

func (g *Graph) unary(typ, version, name string, x Output) Output {
	return g.add(name, typ, version, nil, []Output{x}, port{x.Type(), x.Shape(), nil}).Out(0)
}

// Sqrt, Sigmoid, Swish, Cos and Sin are elementwise.
func (g *Graph) Sqrt(name string, x Output) Output    { return g.unary("Sqrt", "opset1", name, x) }
func (g *Graph) Sigmoid(name string, x Output) Output { return g.unary("Sigmoid", "opset1", name, x) }
func (g *Graph) Swish(name string, x Output) Output   { return g.unary("Swish", "opset4", name, x) }
func (g *Graph) Cos(name string, x Output) Output     { return g.unary("Cos", "opset1", name, x) }
func (g *Graph) Sin(name string, x Output) Output     { return g.unary("Sin", "opset1", name, x) }

// MatMul multiplies; weights are [.., N, K] with transpose_b = true.
func (g *Graph) MatMul(name string, a, w Output, transposeB bool) Output {
	var shape []int64
	if as, ws := a.Shape(), w.Shape(); as != nil && ws != nil && len(ws) >= 2 {
		n := ws[len(ws)-1]
		if transposeB {
			n = ws[len(ws)-2]
		}
		lead := broadcastShape(as[:len(as)-1], ws[:len(ws)-2])
		if len(ws) == 2 {
			lead = as[:len(as)-1]
		}
		shape = append(append([]int64{}, lead...), n)
	}
	return g.add(name, "MatMul", "opset1", []Attr{{"transpose_a", "false"}, {"transpose_b", b(transposeB)}}, []Output{a, w}, port{a.Type(), shape, nil}).Out(0)
}

// Reshape reshapes x to the shape held by target (a 1-D i64 tensor).
func (g *Graph) Reshape(name string, x, target Output, specialZero bool, known []int64) Output {
	return g.add(name, "Reshape", "opset1", []Attr{{"special_zero", b(specialZero)}}, []Output{x, target}, port{x.Type(), known, nil}).Out(0)
}

// Transpose permutes x.
func (g *Graph) Transpose(name string, x Output, perm ...int64) Output {
	var shape []int64
	if s := x.Shape(); s != nil {
		shape = make([]int64, len(perm))
		for i, p := range perm {
			shape[i] = s[p]
		}
	}
	return g.add(name, "Transpose", "opset1", nil, []Output{x, g.ConstI64(name+"/order", perm...)}, port{x.Type(), shape, nil}).Out(0)
}

// Unsqueeze inserts a unit axis.
func (g *Graph) Unsqueeze(name string, x Output, axis int64, known []int64) Output {
	return g.add(name, "Unsqueeze", "opset1", nil, []Output{x, g.ScalarI64(name+"/axis", axis)}, port{x.Type(), known, nil}).Out(0)
}

// Concat concatenates along axis.
func (g *Graph) Concat(name string, axis int64, known []int64, xs ...Output) Output {
	return g.add(name, "Concat", "opset1", []Attr{{"axis", strconv.FormatInt(axis, 10)}}, xs, port{xs[0].Type(), known, nil}).Out(0)
}

// VariadicSplit splits x along axis into the given lengths.
func (g *Graph) VariadicSplit(name string, x Output, axis int64, lengths ...int64) []Output {
	var outs []port
	for _, l := range lengths {
		var s []int64
		if xs := x.Shape(); xs != nil {
			s = append([]int64{}, xs...)
			a := axis
			if a < 0 {
				a += int64(len(s))
			}
			s[a] = l
		}
		outs = append(outs, port{x.Type(), s, nil})
	}
	n := g.add(name, "VariadicSplit", "opset1", nil, []Output{x, g.ScalarI64(name+"/axis", axis), g.ConstI64(name+"/lengths", lengths...)}, outs...)
	res := make([]Output, len(lengths))
	for i := range res {
		res[i] = n.Out(i)
	}
	return res
}

// ReduceMean and ReduceSum reduce over the given axes.
func (g *Graph) ReduceMean(name string, x Output, keep bool, axes ...int64) Output {
	return g.reduce("ReduceMean", name, x, keep, axes)
}
func (g *Graph) ReduceSum(name string, x Output, keep bool, axes ...int64) Output {
	return g.reduce("ReduceSum", name, x, keep, axes)
}

func (g *Graph) reduce(typ, name string, x Output, keep bool, axes []int64) Output {
	var shape []int64
	if s := x.Shape(); s != nil {
		drop := map[int64]bool{}
		for _, a := range axes {
			if a < 0 {
				a += int64(len(s))
			}
			drop[a] = true
		}
		for i, d := range s {
			switch {
			case !drop[int64(i)]:
				shape = append(shape, d)
			case keep:
				shape = append(shape, 1)
			}
		}
		if shape == nil {
			shape = []int64{}
		}
	}
	return g.add(name, typ, "opset1", []Attr{{"keep_dims", b(keep)}}, []Output{x, g.ConstI64(name+"/axes", axes...)}, port{x.Type(), shape, nil}).Out(0)
}

// ShapeOf returns x's shape as i64.
func (g *Graph) ShapeOf(name string, x Output) Output {
	var shape []int64
	if s := x.Shape(); s != nil {
		shape = []int64{int64(len(s))}
	}
	return g.add(name, "ShapeOf", "opset3", []Attr{{"output_type", "i64"}}, []Output{x}, port{I64, shape, nil}).Out(0)
}

// Gather (opset8) takes indices along axis.
func (g *Graph) Gather(name string, x, indices, axis Output, batchDims int64, known []int64) Output {
	return g.add(name, "Gather", "opset8", []Attr{{"batch_dims", strconv.FormatInt(batchDims, 10)}}, []Output{x, indices, axis}, port{x.Type(), known, nil}).Out(0)
}

// Broadcast (opset3) broadcasts x to target.
func (g *Graph) Broadcast(name string, x, target Output, mode string, known []int64) Output {
	return g.add(name, "Broadcast", "opset3", []Attr{{"mode", mode}}, []Output{x, target}, port{x.Type(), known, nil}).Out(0)
}

// Softmax (opset8) along axis.
func (g *Graph) Softmax(name string, x Output, axis int64) Output {
	return g.add(name, "SoftMax", "opset8", []Attr{{"axis", strconv.FormatInt(axis, 10)}}, []Output{x}, port{x.Type(), x.Shape(), nil}).Out(0)
}

// TopK (opset11): values and i64 indices of the k largest along the last axis.
func (g *Graph) TopK(name string, x Output, k int64) (values, indices Output) {
	var shape []int64
	if s := x.Shape(); s != nil {
		shape = append(append([]int64{}, s[:len(s)-1]...), k)
	}
	n := g.add(name, "TopK", "opset11", []Attr{{"axis", "-1"}, {"mode", "max"}, {"sort", "value"}, {"index_element_type", "i64"}, {"stable", "false"}},
		[]Output{x, g.ScalarI64(name+"/k", k)}, port{x.Type(), shape, nil}, port{I64, shape, nil})
	return n.Out(0), n.Out(1)
}

// ScatterElementsUpdate (opset12) with reduction none.
func (g *Graph) ScatterElementsUpdate(name string, data, indices, updates Output, axis int64) Output {
	return g.add(name, "ScatterElementsUpdate", "opset12", []Attr{{"reduction", "none"}, {"use_init_val", "true"}},
		[]Output{data, indices, updates, g.ScalarI64(name+"/axis", axis)}, port{data.Type(), data.Shape(), nil}).Out(0)
}

// Tile repeats x.
func (g *Graph) Tile(name string, x Output, repeats ...int64) Output {
	return g.add(name, "Tile", "opset1", nil, []Output{x, g.ConstI64(name+"/repeats", repeats...)}, port{x.Type(), nil, nil}).Out(0)
}

// ReadValue (opset6) reads a variable, initialised by init.
func (g *Graph) ReadValue(id string, init Output, et ElemType, shape []int64) Output {
	return g.add(id+"/read", "ReadValue", "opset6", []Attr{{"variable_id", id}, {"variable_type", string(et)}, {"variable_shape", shapeString(shape)}},
		[]Output{init}, port{et, shape, nil}).Out(0)
}

// Assign (opset6) stores x into a variable.
func (g *Graph) Assign(id string, x Output) {
	g.add(id+"/assign", "Assign", "opset6", []Attr{{"variable_id", id}}, []Output{x})
}

// SDPA is ScaledDotProductAttention-13 with an additive mask and a scale.
func (g *Graph) SDPA(name string, q, k, v, mask, scale Output, causal bool) Output {
	return g.add(name, "ScaledDotProductAttention", "opset13", []Attr{{"causal", b(causal)}}, []Output{q, k, v, mask, scale}, port{q.Type(), q.Shape(), nil}).Out(0)
}

// Select (opset1) picks from a where cond holds, else from b.
func (g *Graph) Select(name string, cond, a, b Output) Output {
	return g.add(name, "Select", "opset1", []Attr{{"auto_broadcast", "numpy"}}, []Output{cond, a, b}, port{a.Type(), nil, nil}).Out(0)
}

// Range (opset4) of i64 from start to stop by step.
func (g *Graph) Range(name string, start, stop, step Output, et ElemType) Output {
	return g.add(name, "Range", "opset4", []Attr{{"output_type", string(et)}}, []Output{start, stop, step}, port{et, []int64{Dynamic}, nil}).Out(0)
}

func (g *Graph) String() string { return fmt.Sprintf("graph %s: %d nodes", g.Name, len(g.nodes)) }

// compare adds a comparison or logical op producing booleans.
func (g *Graph) compare(typ, name string, a, b Output) Output {
	return g.add(name, typ, "opset1", []Attr{{"auto_broadcast", "numpy"}}, []Output{a, b}, port{Boolean, broadcastShape(a.Shape(), b.Shape()), nil}).Out(0)
}

// LessEqual, NotEqual and LogicalAnd compare elementwise.
func (g *Graph) LessEqual(name string, a, b Output) Output { return g.compare("LessEqual", name, a, b) }
func (g *Graph) NotEqual(name string, a, b Output) Output  { return g.compare("NotEqual", name, a, b) }
func (g *Graph) LogicalAnd(name string, a, b Output) Output {
	return g.compare("LogicalAnd", name, a, b)
}

// Squeeze drops every unit axis (a [1] tensor becomes a scalar).
func (g *Graph) Squeeze(name string, x Output) Output {
	return g.add(name, "Squeeze", "opset1", nil, []Output{x}, port{x.Type(), nil, nil}).Out(0)
}
