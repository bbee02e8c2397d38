package gguf

// --graft: the head written into a trunk GGUF the user already has, as one
// bundled file laid out as convert_hf_to_gguf.py writes a model with its
// MTP head (its default, neither --mtp nor --no-mtp): the head as block
// n_layer, block_count n_layer + depth, nextn_predict_layers, the trunk's
// tensors with their bytes and types unchanged (copied by the kernel).

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// graftPrecision is the head's precision in a trunk: the user's choice, or
// what llama-quantize gives the head in a file of the trunk's file type
// (the converter's own float types for a BF16 or F16 trunk), else Q8_0.
func graftPrecision(o targets.Options, trunk *gg.File) (precision, string, error) {
	if o.Set[targets.OptGGUFType] || o.Set[targets.OptHeadPrecision] || o.GGUFType != "" || o.HeadPrecision != "" {
		p, err := choosePrecision(o)
		return p, "", err
	}
	ft, ok := trunk.Uint("general.file_type")
	name := gg.FileType(ft).String()
	switch {
	case ok && gg.FileType(ft) == gg.FileBF16:
		return headPrecisions["bf16"], fmt.Sprintf("the head is BF16, as the reference converter writes it in a file of the trunk's type %s", name), nil
	case ok && gg.FileType(ft) == gg.FileF16:
		return headPrecisions["f16"], fmt.Sprintf("the head is F16, as the reference converter writes it in a file of the trunk's type %s", name), nil
	}
	if p, found := fileTypes[name]; ok && found {
		return p, fmt.Sprintf("the head takes what llama-quantize gives it in a file of the trunk's type %s (--gguf-type or --head-precision to choose)", name), nil
	}
	why := "the trunk declares no general.file_type"
	switch {
	case ok && gg.FileType(ft).BelowFourBits():
		// The head's own health: llama-quantize's choice for the type would
		// put 2- to 3-bit types on its weights, eh_proj among them.
		why = fmt.Sprintf("the trunk's type %s is below 4 bits, and llama-quantize's choice for it would give the head's weights, nextn.eh_proj among them, 2- to 3-bit types, with which MTP heads draft at about 0 %% (an IQ3_S head accepted 0 of 3595 drafts, IST-DASLab/GSQ#11)", name)
	case ok:
		why = fmt.Sprintf("mtpconv does not write the trunk's type %s", name)
	}
	return fileTypes["Q8_0"], fmt.Sprintf("the head is Q8_0: %s (--gguf-type or --head-precision to choose)", why), nil
}

// ggmlShape is the PyTorch-order shape of ggml dimensions.
func ggmlShape(dims []int64) []int64 {
	shape := make([]int64, len(dims))
	for j, d := range dims {
		shape[len(dims)-1-j] = d
	}
	return shape
}

// paramCount is one tensor's share of the parameter count.
type paramCount struct {
	elems, experts int64 // experts: > 0 for a stacked expert tensor
}

// countOf counts a tensor as gguf-py's writer does: a 3+-dimensional
// "_exps." tensor counts per expert.
func countOf(name string, shape []int64) paramCount {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	c := paramCount{elems: n}
	if strings.Contains(name, "_exps.") && len(shape) >= 3 {
		c.experts = shape[len(shape)-3]
		if strings.Contains(name, ".bias") {
			c.experts = shape[len(shape)-2]
		}
	}
	return c
}

// sizeLabel is the general.size_label the reference converter derives from
// a file's tensors (gguf-py's size_label): E x (shared + one expert's
// parameters) for MoE models, else the parameter count, rounded to two
// significant digits at least (K, M, B or T).
func sizeLabel(ts []paramCount) string {
	var total, shared, expert, expertSum, nExpert int64
	for _, t := range ts {
		total += t.elems
		if t.experts > 0 {
			expert += t.elems / t.experts
			expertSum += t.experts
			nExpert++
		} else {
			shared += t.elems
		}
	}
	if nExpert > 0 {
		return fmt.Sprintf("%dx%s", expertSum/nExpert, roundedCount(shared+expert))
	}
	return roundedCount(total)
}

func roundedCount(n int64) string {
	x, suffix := float64(n)*1e-3, "K"
	switch {
	case n > 1e12:
		x, suffix = float64(n)*1e-12, "T"
	case n > 1e9:
		x, suffix = float64(n)*1e-9, "B"
	case n > 1e6:
		x, suffix = float64(n)*1e-6, "M"
	}
	digits := len(strings.TrimLeft(strconv.FormatFloat(math.RoundToEven(x), 'f', 0, 64), "0"))
	return strconv.FormatFloat(x, 'f', max(2-digits, 0), 64) + suffix
}

// graftOpenError names the --graft file and says what it should be, without
// Go's "stat"/"open" operation words.
func graftOpenError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--graft %s: no such file (--graft takes the trunk GGUF of the same model to write the head into)", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return fmt.Errorf("--graft %s: %w", path, pe.Err)
	}
	if strings.HasPrefix(err.Error(), path) {
		return fmt.Errorf("--graft %w", err)
	}
	return fmt.Errorf("--graft %s: %w", path, err)
}

func (t target) planGraft(m *model.Model, o targets.Options) (*plan.Plan, error) {
	path := o.Graft
	tr, err := openGGUFFiles(path)
	if err != nil {
		return nil, graftOpenError(path, err)
	}
	trunk := tr.merged // a split set's first file's metadata and every file's tensors
	h, err := m.Config.Hparams()
	if err != nil {
		return nil, err
	}
	// The family's own keys, as the reference converter writes them for the bundled file.
	base, own, err := m.GGUFMetadata(h)
	if err != nil {
		return nil, err
	}
	ours := append(base, own...)
	if err := sameModel(trunk, m, h, ours, path); err != nil {
		return nil, err
	}
	a := m.Family.GGUF.Arch
	nLayer := m.Config.NumHiddenLayers
	// A head already there: refused, or with --force dropped and replaced.
	// The trunk's other tensors are kept, and counted for the size label.
	var old, trunkNames []string
	var trunkTensors []plannedTensor
	var params []paramCount
	for _, ti := range trunk.Tensors {
		if blockOf(ti.Name) >= nLayer {
			old = append(old, ti.Name)
			continue
		}
		shape := ggmlShape(ti.Dims)
		trunkNames = append(trunkNames, ti.Name)
		trunkTensors = append(trunkTensors, plannedTensor{ti.Name, squeeze(shape), ti.Type.String()})
		params = append(params, countOf(ti.Name, shape))
	}
	if n, _ := trunk.Uint(a + ".nextn_predict_layers"); n > 0 || len(old) > 0 {
		if !o.Force {
			return nil, fmt.Errorf("--graft %s already holds an MTP head (%s.nextn_predict_layers %d, %d tensors in blocks >= %d); pass --force to replace it", path, a, n, len(old), nLayer)
		}
	}
	// A tensor the converter computes from the config (rope_freqs) is one
	// every layer reads, the head's too: the trunk's is kept, never a second
	// one added, and a trunk without it would run the head otherwise than
	// trained.
	if cs := m.Family.GGUF.Computed; cs != nil {
		for _, ct := range cs(m) {
			if n := ct.Name.In(-1); !slices.Contains(trunkNames, n) {
				return nil, fmt.Errorf("--graft %s has no %s, which the reference converter writes for this config (%s) and the head's layers read; convert the trunk again with convert_hf_to_gguf.py", path, n, ct.Source)
			}
		}
	}
	prec, why, err := graftPrecision(o, trunk)
	if err != nil {
		return nil, targets.UsageError{Err: err}
	}
	file := tr.file(0)
	pl := &plan.Planner{M: m, File: file}
	if err := planTensors(pl, m, prec, trunkTensors); err != nil {
		return nil, err
	}
	var head []plan.OutTensor
	for _, t := range pl.Out {
		if t.Component == plan.ComponentHead {
			head = append(head, t)
		}
	}
	kvs, err := bundledMetadata(trunk, ours, a, nLayer, m.MTPDepth)
	if err != nil {
		return nil, fmt.Errorf("--graft %s: %w", path, err)
	}
	// A size label the converter derived from the trunk's tensors is derived
	// again from the bundled file's (a label from a model card is kept).
	var headParams []paramCount
	for _, t := range head {
		for _, e := range t.Entries() {
			headParams = append(headParams, countOf(e.Name, e.Shape))
		}
	}
	if label := trunk.String("general.size_label"); label != "" && label == sizeLabel(params) {
		for i := range kvs {
			if kvs[i].Key == "general.size_label" {
				kvs[i].Value = gg.Str(sizeLabel(append(params, headParams...)))
			}
		}
	}
	order := bundledOrder(m, trunkNames, head)
	p, err := tr.bundledPlan(t.Name(), head, kvs, order)
	if err != nil {
		return nil, fmt.Errorf("--graft: %w", err)
	}
	p.Options["precision"], p.Options["gguf_file_type"] = prec.name, prec.ftype.String()
	if why != "" {
		p.Notes = append(p.Notes, why)
	}
	if len(old) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("--force: the %d head tensors %s held are replaced", len(old), file))
	}
	return p, nil
}

// identityKeys are the architecture's keys (after its prefix) a trunk of
// the source's model must hold; every other key of the family's table it
// holds must have the table's value too (see sameModel).
var identityKeys = []string{"embedding_length", "attention.head_count", "attention.head_count_kv", "expert_count", "expert_used_count"}

// notCompared are the architecture's keys (after its prefix) a trunk may
// hold with other values than the source's: the layer counts (checked on
// their own, and changed by the graft) and the context length (the
// trunk's own choice, read by no weight of the head).
var notCompared = map[string]bool{"block_count": true, "nextn_predict_layers": true, "context_length": true}

// sameValue compares a trunk's metadata value with the family's: integers
// whatever their width, a per-layer array on the trunk's layers.
func sameValue(theirs, ours gg.Value, nLayer int) bool {
	if a, ok := theirs.Int(); ok {
		b, ok := ours.Int()
		return ok && a == b
	}
	if xs, ys, ok := layerArrays(ours, theirs); ok && xs.Len() >= nLayer && ys.Len() >= nLayer {
		return reflect.DeepEqual(xs.Slice(0, nLayer).Interface(), ys.Slice(0, nLayer).Interface()) // per layer: the trunk's
	}
	return theirs.Type == ours.Type && fmt.Sprint(theirs.V) == fmt.Sprint(ours.V)
}

// layerArrays are ours and theirs as arrays of one element type (booleans,
// integers, floats: a per-layer key such as recurrent_layers,
// head_count_kv or swiglu_clamp_exp, whose trunk-only file holds n_layer
// entries and whose bundled file n_layer + the MTP depth).
func layerArrays(ours, theirs gg.Value) (xs, ys reflect.Value, ok bool) {
	if ours.Type != gg.TypeArray || theirs.Type != gg.TypeArray || ours.Elem != theirs.Elem || ours.Elem == gg.TypeString {
		return xs, ys, false
	}
	xs, ys = reflect.ValueOf(ours.V), reflect.ValueOf(theirs.V)
	return xs, ys, xs.Kind() == reflect.Slice && ys.Kind() == reflect.Slice && xs.Type() == ys.Type()
}

// sameModel refuses a trunk GGUF that is not the source's model, naming
// the first key that differs. ours is the family's architecture keys for
// the source.
func sameModel(f *gg.File, m *model.Model, h model.Hparams, ours []gg.KV, path string) error {
	c := m.Config
	gs := m.Family.GGUF
	a := gs.Arch
	if got := f.String("general.architecture"); got != a {
		return fmt.Errorf("--graft %s: general.architecture is %q, the source %s is %q", path, got, m.Family, a)
	}
	nextn, _ := f.Uint(a + ".nextn_predict_layers")
	if n, ok := f.Uint(a + ".block_count"); !ok || n-nextn != int64(c.NumHiddenLayers) {
		return fmt.Errorf("--graft %s: %s.block_count %d (with %d MTP layers) is not the source's %d layers", path, a, n, nextn, c.NumHiddenLayers)
	}
	// Every hyperparameter the head's graph reads: the family's keys for the
	// source (feed-forward widths, rope, norms, attention and expert shapes).
	for _, kv := range ours {
		k, ok := strings.CutPrefix(kv.Key, a+".")
		if !ok || notCompared[k] {
			continue
		}
		theirs, ok := f.Lookup(kv.Key)
		if !ok && !slices.Contains(identityKeys, k) {
			continue // an optional key the trunk's converter left out
		}
		if !ok || !sameValue(theirs, kv.Value, c.NumHiddenLayers) {
			return fmt.Errorf("--graft %s: %s is %s, the source's is %s: the trunk is another model", path, kv.Key, valueString(theirs, ok), valueString(kv.Value, true))
		}
	}
	vocab, ok := h.Int("vocab_size")
	if !ok {
		return fmt.Errorf("%s: vocab_size is missing", model.ConfigFile)
	}
	// The embedding: the trunk tensor outside the layers of shape [vocab, hidden], by the family's name for it.
	embName := ""
	for _, w := range m.Spec.TrunkTop {
		if len(w.Shape) == 2 && w.Shape[0] == vocab && w.Shape[1] == int64(c.HiddenSize) {
			embName = gs.Top[w.Suffix].In(-1)
		}
	}
	var emb *gg.TensorInfo
	for i := range f.Tensors {
		if embName != "" && f.Tensors[i].Name == embName {
			emb = &f.Tensors[i]
		}
	}
	if emb == nil || len(emb.Dims) != 2 || emb.Dims[0] != int64(c.HiddenSize) || emb.Dims[1] != vocab {
		return fmt.Errorf("--graft %s: %s is not [%d, %d] (hidden, vocab_size of the source)", path, cmp.Or(embName, "the token embedding"), c.HiddenSize, vocab)
	}
	tv, _ := f.Lookup("tokenizer.ggml.tokens")
	theirs, _ := tv.V.([]string)
	if int64(len(theirs)) != vocab {
		return fmt.Errorf("--graft %s: tokenizer.ggml.tokens holds %d tokens, the source's vocab_size is %d", path, len(theirs), vocab)
	}
	// The token list itself, when the source has its tokenizer.
	kvs, err := VocabMetadata(m, h)
	if err != nil {
		return nil // no tokenizer.json: the sizes above are what can be compared
	}
	for _, kv := range kvs {
		if kv.Key != "tokenizer.ggml.tokens" {
			continue
		}
		ours, _ := kv.Value.V.([]string)
		for i := range ours {
			if theirs[i] != ours[i] {
				return fmt.Errorf("--graft %s: tokenizer.ggml.tokens differs from the source's tokenizer at token %d (%q, the source has %q)", path, i, theirs[i], ours[i])
			}
		}
	}
	return nil
}

func valueString(v gg.Value, present bool) string {
	if !present {
		return "absent"
	}
	if n, ok := v.Int(); ok {
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprint(v.V)
}

// bundledMetadata is the trunk's metadata with the keys a bundled file
// changes, as the family's table (ours) writes them: block_count counts the
// MTP layers, a per-layer array (recurrent_layers, head_count_kv,
// swiglu_clamp_exp) takes the head's entries from the table, nextn_predict_layers is added where the table places it
// (before the key that follows it there).
func bundledMetadata(f *gg.File, ours []gg.KV, a string, nLayer, depth int) ([]gg.KV, error) {
	kvs := make([]gg.KV, 0, len(f.KV)+1)
	nextnKey := a + ".nextn_predict_layers"
	nextn := gg.Pair(nextnKey, gg.U32(uint32(depth)))
	oursByKey := map[string]gg.Value{}
	before := "" // the key the table writes after nextn_predict_layers
	for i, kv := range ours {
		oursByKey[kv.Key] = kv.Value
		if kv.Key == nextnKey && i+1 < len(ours) {
			before = ours[i+1].Key
		}
	}
	placed := false
	for _, kv := range f.KV {
		switch kv.Key {
		case a + ".block_count":
			kv.Value = gg.U32(uint32(nLayer + depth))
			if n, ok := f.Uint(kv.Key); ok && n > 0xffffffff {
				return nil, fmt.Errorf("%s is %d", kv.Key, n)
			}
		case nextnKey:
			kv, placed = nextn, true
		case before:
			if !placed {
				kvs, placed = append(kvs, nextn), true
			}
		}
		if head, xs, ok := layerArrays(oursByKey[kv.Key], kv.Value); ok && kv.Key != nextnKey && head.Len() == nLayer+depth {
			if xs.Len() < nLayer {
				return nil, fmt.Errorf("%s is not %d per-layer values", kv.Key, nLayer)
			}
			// The trunk's entries for its layers, the table's for the head's.
			v := reflect.AppendSlice(reflect.AppendSlice(reflect.MakeSlice(xs.Type(), 0, nLayer+depth), xs.Slice(0, nLayer)), head.Slice(nLayer, nLayer+depth))
			kv.Value = gg.Value{Type: gg.TypeArray, Elem: kv.Value.Elem, V: v.Interface()}
		}
		kvs = append(kvs, kv)
	}
	if !placed {
		// The key that follows it is absent: after the last key of the architecture.
		at := len(kvs)
		for i, kv := range kvs {
			if strings.HasPrefix(kv.Key, a+".") {
				at = i + 1
			}
		}
		kvs = slices.Insert(kvs, at, nextn)
	}
	return kvs, nil
}

// bundledOrder is the order of the bundled file's tensors. A trunk in
// llama-quantize's order (tensors outside blocks, then by block, each by
// name) gets the head that way too: last, by name. Any other trunk is taken
// to be in the reference converter's order, which visits the source's
// shards in name order and each shard's tensors by name (mtp.* after every
// trunk name): a head tensor comes after every trunk tensor of its shard
// and earlier shards, in the order the converter emits it.
func bundledOrder(m *model.Model, trunk []string, head []plan.OutTensor) []string {
	var headNames []string
	for _, t := range head {
		headNames = append(headNames, t.Name)
	}
	if slices.IsSortedFunc(trunk, llamaQuantizeCmp) {
		slices.SortStableFunc(headNames, llamaQuantizeCmp)
		return append(slices.Clone(trunk), headNames...)
	}
	ck := m.Checkpoint
	var shardNames []string
	for _, t := range ck.Tensors {
		if !slices.Contains(shardNames, t.Shard.Name) {
			shardNames = append(shardNames, t.Shard.Name)
		}
	}
	sort.Strings(shardNames)
	shardOf := func(src string) int {
		if t, ok := ck.Tensors[src]; ok {
			return slices.Index(shardNames, t.Shard.Name)
		}
		return -1
	}
	// A head tensor is emitted with the last of its sources the converter visits.
	type emitted struct {
		name  string
		shard int
		src   string
	}
	var hs []emitted
	for _, t := range head {
		e := emitted{name: t.Name, shard: -1}
		for _, s := range t.Sources() {
			if k := shardOf(s); k > e.shard || k == e.shard && s > e.src {
				e.shard, e.src = k, s
			}
		}
		hs = append(hs, e)
	}
	sort.SliceStable(hs, func(i, j int) bool {
		if hs[i].shard != hs[j].shard {
			return hs[i].shard < hs[j].shard
		}
		if hs[i].src != hs[j].src {
			return hs[i].src < hs[j].src
		}
		return hs[i].name < hs[j].name
	})
	// The shard of each trunk tensor: of its source, or of its layer's tensors.
	tp := m.TextPrefix
	layerShard := map[int]int{}
	for name, t := range ck.Tensors {
		if rest, ok := strings.CutPrefix(name, tp+"layers."); ok {
			var i int
			if _, err := fmt.Sscanf(rest, "%d.", &i); err == nil {
				layerShard[i] = max(layerShard[i], slices.Index(shardNames, t.Shard.Name))
			}
		}
	}
	// The tensors outside the layers, by the family's names for them.
	fixed := map[string]string{}
	for _, w := range m.Spec.TrunkTop {
		if g, ok := m.Family.GGUF.Top[w.Suffix]; ok {
			fixed[g.In(-1)] = tp + w.Suffix
		}
	}
	if s := m.Spec.LMHead; s != nil {
		if g, ok := m.Family.GGUF.Top[s.Suffix]; ok {
			fixed[g.In(-1)] = s.Suffix
		}
	}
	// A head tensor goes before the first trunk tensor the converter visits
	// after it: in a later shard, or later by name in the same shard (GLM's
	// model.layers.{n} before model.norm; Qwen's mtp.* after every trunk name).
	var out []string
	k, shard, src := 0, 0, ""
	for _, n := range trunk {
		if s, ok := fixed[n]; ok {
			shard, src = max(shardOf(s), 0), s
		} else if b := blockOf(n); b >= 0 {
			shard, src = layerShard[b], tp+"layers."+strconv.Itoa(b)+"."
		}
		for ; k < len(hs) && (hs[k].shard < shard || hs[k].shard == shard && hs[k].src < src); k++ {
			out = append(out, hs[k].name)
		}
		out = append(out, n)
	}
	for ; k < len(hs); k++ {
		out = append(out, hs[k].name)
	}
	return out
}

// addHeadCommand is the one command that writes an MTP head into the GGUF
// at path, or "" when it holds one or is of an architecture mtpconv does
// not write. The checkpoint is the Hub repository the file names as its
// source or base model, read by range (only the head's tensors), when it
// names one.
func addHeadCommand(path string, f *gg.File, s *gg.Summary) string {
	if s.MTPHead || s.MTPOnly {
		return ""
	}
	if len(familiesOf(s.Architecture)) == 0 {
		return ""
	}
	src := "CHECKPOINT"
	for _, k := range []string{"general.source.repo_url", "general.base_model.0.repo_url"} {
		if id, ok := strings.CutPrefix(f.String(k), "https://huggingface.co/"); ok && model.IsHubID(id) {
			src = "hf://" + id
			break
		}
	}
	stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if prefix, _, _, ok := gg.SplitName(filepath.Base(path)); ok && s.SplitFiles > 0 {
		stem = prefix // a split set: named after the set
	}
	return fmt.Sprintf("mtpconv export --src %s --target gguf --graft %s --out %s", src, targets.ShellQuote(path), targets.ShellQuote(stem+"-mtp"))
}

// familiesOf lists the families llama.cpp names arch (their GGUF tables).
func familiesOf(arch string) []*model.Family {
	var fams []*model.Family
	model.FamiliesWhere(func(f *model.Family) bool {
		if arch != "" && f.GGUF.Arch == arch {
			fams = append(fams, f)
		}
		return false
	})
	return fams
}
