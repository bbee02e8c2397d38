package hf

// --target hf --into: the head added to a Hugging Face repo of the same
// model whose trunk another tool quantized (llm-compressor, GPTQModel,
// AutoAWQ, ModelOpt, Quark) or left in bf16. The trunk's weight files keep
// their bytes; the head goes in HeadFile, listed in the index (created when
// the repo has a single model.safetensors); config.json declares the MTP
// depth and, in the method's own form, that the head is not quantized, so
// that vLLM and SGLang both build it unquantized (checked against the
// ported rules before anything is written).

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

var (
	_ targets.IntoPlanner   = target{}
	_ targets.InPlaceIntoer = target{}
)

// ReplacesInPlace: the head file and the index each describe only
// themselves; an earlier --into's are replaced by one rename each.
func (target) ReplacesInPlace() {}

// repo is what --into reads of an HF repo: config.json and the index as they
// were before mtpconv first replaced them, and the repo described from its
// headers (its own config).
type repo struct {
	dir                 string
	config, index       []byte // index nil when the repo has none
	configSum, indexSum string
	indexOurs           bool // the index is one an earlier --into created
	m                   *model.Model
	ck                  *st.Checkpoint // the weight files as opened (closed by close)
	weights             []string       // the trunk's weight files
	ownHead             bool           // HeadFile is there and an earlier --into wrote it
	runtimes            []Runtime      // the runtimes the repo is mended for (--runtime)
}

// readRepo reads an HF repo for --into, refusing what is not one.
func readRepo(dir string) (*repo, error) {
	r := &repo{dir: dir}
	var err error
	if r.config, r.configSum, err = manifests.IntoBase(dir, model.ConfigFile, model.MaxConfigSize); err != nil {
		return nil, err
	}
	cfg, err := parseRepoConfig(r.config)
	if err != nil {
		return nil, fmt.Errorf("--into %s: %s: %w", dir, model.ConfigFile, err)
	}
	if r.indexOurs, err = manifests.IntoOwned(dir, st.IndexFile); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(dir, st.IndexFile)); err == nil && !r.indexOurs {
		if r.index, r.indexSum, err = manifests.IntoBase(dir, st.IndexFile, st.MaxHeaderSize); err != nil {
			return nil, err
		}
	}
	if r.ownHead, err = manifests.IntoOwned(dir, HeadFile); err != nil {
		return nil, err
	}
	ck, err := r.trunkCheckpoint()
	if err != nil {
		return nil, err
	}
	r.m, err = model.Describe(cfg, ck)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("--into %s: %w", dir, err)
	}
	for _, sh := range ck.Shards {
		r.weights = append(r.weights, sh.Name)
	}
	return r, nil
}

// trunkCheckpoint reads the headers of the repo's weight files, without
// the head an earlier --into added (the repo as its own tool wrote it).
func (r *repo) trunkCheckpoint() (*st.Checkpoint, error) {
	ck, err := st.Open(source.Dir(r.dir))
	if err != nil {
		return nil, fmt.Errorf("--into %s is not a Hugging Face repo: %w", r.dir, err)
	}
	r.ck = ck
	if !r.ownHead {
		return ck, nil
	}
	out := &st.Checkpoint{Source: ck.Source, Sharded: ck.Sharded, Tensors: map[string]*st.Tensor{}}
	for _, sh := range ck.Shards {
		if sh.Name != HeadFile {
			out.Shards = append(out.Shards, sh)
		}
	}
	for _, n := range ck.Names {
		if t := ck.Tensors[n]; t.Shard.Name != HeadFile {
			out.Names = append(out.Names, n)
			out.Tensors[n] = t
		}
	}
	return out, nil
}

// close releases the repo's weight files.
func (r *repo) close() {
	if r.ck != nil {
		r.ck.Close()
	}
}

// sameModel refuses a repo whose config differs from the source's in a
// value the head depends on, naming it; text-only *ForCausalLM configs and
// vision-language wrappers of the same model are the same model.
func (r *repo) sameModel(m *model.Model) error {
	// The model type first: another model's repo differs in most values,
	// and its type says which model it is.
	if a, b := textType(r.m.Config), textType(m.Config); a != b || r.m.Family != m.Family {
		return fmt.Errorf("--into %s holds another model: its %s says model_type %s, the source %s", r.dir, model.ConfigFile, a, b)
	}
	ours, theirs := m.Config.HeadValues(), r.m.Config.HeadValues()
	for i := range ours {
		k := ours[i].Key
		if k == "model_type" || k == "text model_type" {
			continue
		}
		if ours[i] != theirs[i] {
			return fmt.Errorf("--into %s holds another model: its %s says %s %v, the source %v", r.dir, model.ConfigFile, k, theirs[i].Value, ours[i].Value)
		}
	}
	if d, ok := r.m.Config.ConfigMTPDepth(); ok && d != 0 && d != m.MTPDepth {
		return fmt.Errorf("--into %s holds another model: its %s declares %d MTP layers, the source's head has %d", r.dir, model.ConfigFile, d, m.MTPDepth)
	}
	return nil
}

// textType is the text model's model_type, wrapped or not.
func textType(c *model.Config) string {
	if c.TextModelType != "" {
		return c.TextModelType
	}
	return c.ModelType
}

// CheckInto accepts an HF repo of the same model that holds no MTP head (or
// only the one an earlier --into added). It returns the files mtpconv owns
// there: the head, and the index when the repo had none.
func (t target) CheckInto(dir string, m *model.Model) ([]string, error) {
	r, err := readRepo(dir)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.check(m); err != nil {
		return nil, err
	}
	return r.owned(), nil
}

func (r *repo) owned() []string {
	if r.index == nil {
		return []string{HeadFile, st.IndexFile}
	}
	return []string{HeadFile}
}

func (r *repo) check(m *model.Model) error {
	if err := r.sameModel(m); err != nil {
		return err
	}
	for _, n := range r.m.Checkpoint.Names {
		if t := r.m.Checkpoint.Tensors[n]; r.m.IsHead(n) {
			return fmt.Errorf("--into %s already holds MTP tensors (%s in %s, a file mtpconv did not write); mtpconv never rewrites another tool's file: check them with mtpconv inspect %s, or write the head to a folder of its own with --out", r.dir, n, t.Shard.Name, r.dir)
		}
	}
	return nil
}

// PlanInto plans the head for the repo: HeadFile, the index, and config.json
// with the depth and the exclusion declared.
func (t target) PlanInto(dir string, m *model.Model, o targets.Options) (*plan.Plan, error) {
	if r := m.Family.HF.Refusal; r != "" {
		return nil, fmt.Errorf("--target hf: %s", r)
	}
	if r := unported(m); r != "" {
		return nil, fmt.Errorf("--target hf: %s", r)
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	runtimes, err := ParseRuntimes(o.Runtime)
	if err != nil {
		return nil, err
	}
	r, err := readRepo(dir)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.runtimes = runtimes
	if err := r.check(m); err != nil {
		return nil, err
	}
	q, key, err := r.quant()
	if err != nil {
		return nil, err
	}
	// An FP8 release's head goes into a block-FP8 repo of the same blocks as stored.
	def := precBF16
	fp8Repo := q.Method == RepoQuantFP8 && m.FP8Info != nil && slices.Equal(q.BlockSize, m.FP8Info.Block)
	if fp8Repo {
		def = precFP8
	}
	prec, err := headPrecision(o, def)
	if err != nil {
		return nil, err
	}
	if prec == precFP8 && !fp8Repo {
		return nil, fmt.Errorf("--head-precision fp8: --into %s is not a block-FP8 repo of the source's blocks (its quantization is %s); the head goes in as bf16", dir, cmp.Or(string(q.Method), "none"))
	}
	head, err := planHead(m, HeadFile, prec)
	if err != nil {
		return nil, err
	}
	cfg, interim, notes, err := r.updatedConfig(m, head, q, key)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{
		Target: t.Name(), Tensors: head, TensorFiles: []string{HeadFile},
		Metadata: map[string]string{"format": "pt"},
		Options:  map[string]string{"head_precision": prec, "trunk": "the repo's own (--into)"},
		Notes:    notes,
		IntoKept: r.weights,
	}
	if o.Runtime != "" {
		p.Options["runtime"] = o.Runtime
		p.Notes = append(p.Notes, fmt.Sprintf("%s is mended for %s alone (--runtime %s): inspect --runtime %s judges it; the other runtime may build the head or the trunk otherwise", model.ConfigFile, Versions[Runtime(o.Runtime)], o.Runtime, o.Runtime))
	}
	idx, err := r.updatedIndex(head)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, plan.OutFile{Name: st.IndexFile, Contents: idx})
	if r.index != nil {
		p.IntoUpdates = append(p.IntoUpdates, plan.IntoUpdate{Name: st.IndexFile, SHA256: r.indexSum})
	}
	// config.json excludes the head from the quantization before the
	// index lists it (a listed head not excluded is built quantized and
	// drafts at ~0 %), and declares the depth last, after the head is in.
	if !bytes.Equal(cfg, r.config) || manifests.SHA256(r.config) != r.configSum {
		p.Files = append(p.Files, plan.OutFile{Name: model.ConfigFile, Contents: cfg})
		u := plan.IntoUpdate{Name: model.ConfigFile, SHA256: r.configSum}
		if interim != nil && !bytes.Equal(interim, r.config) {
			u.Interim = interim
		}
		p.IntoUpdates = append(p.IntoUpdates, u)
	}
	return p, nil
}

// quant reads the repo's quantization config, refusing a method whose
// runtimes cannot be told to build the head unquantized.
func (r *repo) quant() (*Quant, string, error) {
	raw, key, err := quantizationConfig(r.config)
	if err != nil {
		return nil, "", err
	}
	q, err := ParseQuant(raw)
	if err != nil {
		var refused RefusedMethodError
		if errors.As(err, &refused) {
			return nil, "", fmt.Errorf("--into %s: %s %w; mtpconv does not add a head the runtimes may build quantized (write it to a folder of its own with --out)", r.dir, model.ConfigFile, err)
		}
		return nil, "", fmt.Errorf("--into %s: %s: %w", r.dir, model.ConfigFile, err)
	}
	return q, key, nil
}

// updatedConfig is the repo's config.json with the MTP depth declared (when
// it declares none, or 0) and the head's float modules excluded from its
// quantization; the result is checked against both runtimes' rules with the
// head stored as planned, and refused when either would build a module
// otherwise than it is stored. interim, for a quantized repo, is the config
// with the exclusion only (the depth as the repo declares it), in place while
// the head goes in.
func (r *repo) updatedConfig(m *model.Model, head []plan.OutTensor, q *Quant, key string) (cfg, interim []byte, notes []string, err error) {
	fail := func(err error) ([]byte, []byte, []string, error) {
		return nil, nil, nil, fmt.Errorf("--into %s: %s: %w", r.dir, model.ConfigFile, err)
	}
	root, err := jsonobj.Decode(r.config)
	if err != nil {
		return fail(err)
	}
	// The per-layer lists first: a head listed with them short fails to load.
	if notes, err = mendLayerLists(&root, r.config, m); err != nil {
		return fail(err)
	}
	planned := plannedRepo(r.m, head)
	mods := headModules(r.m, m.MTPDepth, planned.Tensors)
	var float []Module
	for _, mod := range mods {
		if isFloatName(stored(planned, mod, map[string]bool{})) {
			float = append(float, mod)
		}
	}
	if q.Method != RepoQuantNone {
		// AWQ without a list: vLLM derives one from the headers and SGLang
		// none, so the derived list (vLLM's trunk as before) is written for
		// vLLM alone; for SGLang only the head's entry (its trunk as before).
		var derived []string
		if !slices.Contains(r.runtimes, SGLang) {
			derived = Repo{Tensors: r.m.Checkpoint.Tensors}.floatModules()
		}
		qc, added, err := q.withExclusions(float, hfNames{r.m}, derived)
		if err != nil {
			return fail(err)
		}
		if err := setNested(&root, key, qc); err != nil {
			return fail(err)
		}
		if len(added) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %s %s gains %s, so vLLM and SGLang build the head as it is stored", model.ConfigFile, key, q.IgnoreKeyOf(), strings.Join(added, ", ")))
		}
		after, err := ParseQuant(mustRaw(qc))
		if err != nil {
			return nil, nil, nil, err
		}
		if err := r.checkBuilds(after, mods, planned); err != nil {
			return nil, nil, nil, err
		}
		if err := r.checkTrunk(q, after); err != nil {
			return nil, nil, nil, err
		}
		if interim, err = r.encodeConfig(root); err != nil {
			return nil, nil, nil, err
		}
	}
	if d, ok := r.m.Config.ConfigMTPDepth(); (!ok || d == 0) && m.Family.HF.FixedDepth == 0 {
		if err := setDepth(&root, m, r.m.Config.Nested); err != nil {
			return nil, nil, nil, fmt.Errorf("--into %s: %w", r.dir, err)
		}
		notes = append(notes, fmt.Sprintf("%s: declares %d MTP layer(s)", model.ConfigFile, m.MTPDepth))
	}
	if cfg, err = r.encodeConfig(root); err != nil {
		return nil, nil, nil, err
	}
	return cfg, interim, notes, nil
}

// encodeConfig writes config.json in the repo's own indentation and final newline.
func (r *repo) encodeConfig(root jsonobj.Object) ([]byte, error) {
	out, err := jsonobj.Indent(root, indentOf(r.config))
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(r.config, []byte("\n")) {
		out = bytes.TrimSuffix(out, []byte("\n"))
	}
	return out, nil
}

// plannedRepo is the repo's tensors with the planned head's added, as the
// rules will read them after the export.
func plannedRepo(m *model.Model, head []plan.OutTensor) Repo {
	tensors := map[string]*st.Tensor{}
	for n, t := range m.Checkpoint.Tensors {
		tensors[n] = t
	}
	for _, t := range head {
		tensors[t.Name] = &st.Tensor{TensorInfo: st.TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape}}
	}
	return Repo{Tensors: tensors}
}

// checkBuilds applies the runtimes' rules to the planned head in the
// updated config: every module must be built as it is stored. When one
// runtime would and the other would not, the refusal names --runtime.
func (r *repo) checkBuilds(q *Quant, mods []Module, planned Repo) error {
	fails := map[Runtime]string{}
	for _, rt := range r.runtimes {
		for _, mod := range mods {
			b := Decide(rt, q, r.m, mod, planned)
			why := verdict(rt, stored(planned, mod, map[string]bool{}), b)
			if b034, ok := Decide034(q, r.m, mod, planned); ok && rt == VLLM && why == "" {
				why = verdictAs(vllm034, stored(planned, mod, map[string]bool{}), b034)
			}
			if why != "" {
				fails[rt] = mod.Name + ": " + why
				break
			}
		}
	}
	for _, rt := range r.runtimes {
		why, failed := fails[rt]
		if !failed {
			continue
		}
		if ok := r.passing(fails); len(ok) > 0 {
			return fmt.Errorf("--into %s: no %s entry makes %s build the head as mtpconv writes it: %s; pass --runtime %s to mend the repo for %s alone", r.dir, q.Method, Versions[rt], why, ok[0], Versions[ok[0]])
		}
		return fmt.Errorf("--into %s: no %s entry makes %s build the head as mtpconv writes it: %s; mtpconv does not add a head that would draft at ~0 %% (write it to a folder of its own with --out)",
			r.dir, q.Method, runtimeWords(r.runtimes), why)
	}
	return nil
}

// passing are the runtimes of r.runtimes without a failure.
func (r *repo) passing(fails map[Runtime]string) []Runtime {
	var ok []Runtime
	for _, rt := range r.runtimes {
		if _, failed := fails[rt]; !failed {
			ok = append(ok, rt)
		}
	}
	return ok
}

// runtimeWords names the runtimes: "both runtimes", or the one.
func runtimeWords(rts []Runtime) string {
	if len(rts) == 1 {
		return Versions[rts[0]]
	}
	return "both runtimes"
}

// checkTrunk refuses an updated quantization config that changes how a
// runtime builds any of the trunk's modules: only what concerns the head
// is written (an AWQ list written where there was none turns off vLLM's
// list derived from the headers, auto_awq.py:370-388). The other methods'
// entries are anchored on the head's own names (re:^mtp\..*, mtp.*, exact
// module names), which no trunk module matches: not evaluated against a
// trunk of thousands of modules.
func (r *repo) checkTrunk(before, after *Quant) error {
	if before.Method != RepoQuantAWQ && before.Method != RepoQuantGPTQ {
		return nil
	}
	repo := Repo{Tensors: r.m.Checkpoint.Tensors}
	for _, mod := range trunkModules(r.m) {
		for _, rt := range r.runtimes {
			a, b := DecideTrunk(rt, before, mod, repo), DecideTrunk(rt, after, mod, repo)
			if a.Quantized == b.Quantized && a.Error == b.Error {
				continue
			}
			fix := ""
			if len(r.runtimes) > 1 {
				fix = "; pass --runtime vllm or --runtime sglang to mend the repo for one runtime alone"
			}
			return fmt.Errorf("--into %s: the %s entries the head needs would change how %s builds the trunk's %s (%s, then %s)%s",
				r.dir, before.Method, Versions[rt], mod.Name, buildWord(a), buildWord(b), fix)
		}
	}
	return nil
}

// trunkModules are the repo's own weight-bearing modules outside the head
// that a quantization config could quantize: every module with a 2-D
// weight or a quantized tensor, but the embeddings, the LM head and the
// routers (built unquantized by both runtimes whatever the config says),
// and of per-expert modules those of expert 0 (the runtimes decide a MoE
// block by expert 0's projections).
var otherExpert = regexp.MustCompile(`\.experts\.([1-9]\d*)\.`)

func trunkModules(m *model.Model) []Module {
	seen := map[string]bool{}
	var out []Module
	for _, n := range m.Checkpoint.Names {
		t := m.Checkpoint.Tensors[n]
		i := strings.LastIndexByte(n, '.')
		if i < 0 || m.IsHead(n) || m.Is(n, model.RoleRouter) {
			continue
		}
		mod, leaf := n[:i], n[i+1:]
		if otherExpert.MatchString(mod) {
			continue
		}
		if seen[mod] || strings.HasSuffix(mod, "embed_tokens") || strings.HasSuffix(mod, "lm_head") ||
			(leaf == "weight" && len(t.Shape) != 2) || (leaf != "weight" && isFloat(t.DType)) {
			continue
		}
		seen[mod] = true
		out = append(out, Module{Name: mod, Rel: mod, Kind: KindLinear, Layer: -1})
	}
	return out
}

// IgnoreKeyOf names the config entry the method's exclusions go in.
func (q *Quant) IgnoreKeyOf() string {
	if q.Method == RepoQuantGPTQ {
		return "dynamic"
	}
	if q.IgnoreKey == "" {
		return "ignore"
	}
	return q.IgnoreKey
}

func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("hf: " + err.Error()) // an Object of raw JSON always marshals
	}
	return b
}

// setNested sets KEY or text_config.KEY.
func setNested(root *jsonobj.Object, key string, v any) error {
	if rest, ok := strings.CutPrefix(key, "text_config."); ok {
		text, err := textConfig(*root)
		if err != nil {
			return err
		}
		text.Set(rest, v)
		root.Set("text_config", text)
		return nil
	}
	root.Set(key, v)
	return nil
}

// textConfig is root's text_config as read, or as an earlier edit set it.
func textConfig(root jsonobj.Object) (jsonobj.Object, error) {
	for _, kv := range root {
		if kv.Key != "text_config" {
			continue
		}
		switch v := kv.Value.(type) {
		case jsonobj.Object:
			return v, nil
		case json.RawMessage:
			text, err := jsonobj.Decode(v)
			if err != nil {
				return nil, fmt.Errorf("text_config: %w", err)
			}
			return text, nil
		}
	}
	return nil, errors.New("text_config: not an object")
}

// indentOf is the indentation of a JSON file's first member (two spaces,
// as transformers writes config.json, when it cannot tell).
func indentOf(raw []byte) string {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		line := raw[i+1:]
		n := 0
		for n < len(line) && (line[n] == ' ' || line[n] == '\t') {
			n++
		}
		if n > 0 {
			return string(line[:n])
		}
	}
	return "  "
}

// updatedIndex is the repo's index with the head's tensors mapped to
// HeadFile and their bytes added to total_size, or, for a repo with a
// single model.safetensors, a new index of both files.
func (r *repo) updatedIndex(head []plan.OutTensor) ([]byte, error) {
	bad := func(err error) error { return fmt.Errorf("--into %s: %s: %w", r.dir, st.IndexFile, err) }
	var root jsonobj.Object
	wm := map[string]json.RawMessage{}
	var total int64
	if r.index != nil {
		var err error
		if root, err = jsonobj.Decode(r.index); err != nil {
			return nil, bad(err)
		}
		raw, ok := root.Get("weight_map")
		if !ok {
			return nil, bad(errors.New("no weight_map"))
		}
		if err := json.Unmarshal(raw, &wm); err != nil {
			return nil, bad(err)
		}
	} else {
		for _, n := range r.m.Checkpoint.Names {
			t := r.m.Checkpoint.Tensors[n]
			wm[n] = json.RawMessage(strconv.Quote(t.Shard.Name))
			total += t.Bytes()
		}
		root = jsonobj.Object{{Key: "metadata", Value: json.RawMessage(`{"total_size":` + strconv.FormatInt(total, 10) + `}`)}, {Key: "weight_map", Value: nil}}
	}
	var added int64
	for _, t := range head {
		for _, e := range t.Entries() {
			wm[e.Name] = json.RawMessage(strconv.Quote(HeadFile))
			added += plan.EntryBytes(e)
		}
	}
	root.Set("weight_map", jsonobj.Sorted(wm))
	if err := targets.AddToTotalSize(&root, added); err != nil {
		return nil, bad(err)
	}
	indent := "  "
	if r.index != nil {
		indent = indentOf(r.index)
	}
	return jsonobj.Indent(root, indent)
}
