package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtpconv/mtpconv/convert"
	ov "github.com/mtpconv/mtpconv/formats/openvino"
	"github.com/mtpconv/mtpconv/manifests"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "export the MTP head (and for combined, the trunk) of a checkpoint",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "src", Usage: "source: a folder, ORG/NAME[@rev] from the Hugging Face cache, or hf://ORG/NAME[@rev] read from the Hub by range", Required: true},
			&cli.StringFlag{Name: "target", Usage: "mlx | combined | openvino", Required: true},
			&cli.StringFlag{Name: "out", Usage: "output folder (must not exist unless --force)"},
			&cli.StringFlag{Name: "head-precision", Usage: "f16 | bf16 | int8 | int4 (default bf16; openvino: f16)"},
			&cli.StringFlag{Name: "lm-head-precision", Value: "int8", Usage: "openvino: f16 | int8 | int4 for the lm_head IR"},
			&cli.BoolFlag{Name: "sym", Usage: "openvino: symmetric i8/i4 instead of asymmetric u8/u4 (NNCF INT*_SYM)"},
			&cli.StringFlag{Name: "trunk-precision", Value: "bf16", Usage: "combined target: f16 | bf16 | int8 | int4"},
			&cli.StringFlag{Name: "max-shard-size", Usage: "combined target: split the file into shards of at most this size (e.g. 5GB, 500MiB)"},
			&cli.IntFlag{Name: "group-size", Value: 64, Usage: "quantization group size: 32 | 64 | 128"},
			&cli.StringFlag{Name: "mlx-rounding", Value: "gpu", Usage: "gpu (what mlx_lm.convert gives on Apple silicon) | cpu (MLX's CPU kernel)"},
			&cli.IntFlag{Name: "router-bits", Value: 8, Usage: "bits of the MoE router and shared_expert_gate when quantized, at group size 64, as mlx-lm does (0: same as their component)"},
			&cli.IntFlag{Name: "jobs", Value: 0, Usage: "chunks converted in parallel (default: all cores); never changes the bytes"},
			&cli.BoolFlag{Name: "keep-source-cache", Usage: "keep the source bytes read in the page cache (by default, bytes that were not cached before are dropped once read)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing output folder"},
			&cli.BoolFlag{Name: "resume", Usage: "continue an interrupted export into the same --out, reusing finished files whose hashes match"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan (tensors, files, sizes, peak memory) and write nothing"},
			&cli.BoolFlag{Name: "no-card", Usage: "do not write README.md (the model card)"},
			&cli.BoolFlag{Name: "timestamp", Usage: "record the time in the manifest (outputs are otherwise byte-identical across runs)"},
			&cli.StringFlag{Name: "base-model", Usage: "Hub id of the source model for the card (default: from the source)"},
			&cli.StringFlag{Name: "license", Usage: "license for the card (default: the source README's, else other)"},
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable summary"},
			&cli.BoolFlag{Name: "quiet", Usage: "print nothing but errors"},
		},
		Action: runExport,
	}
}

type exportSummary struct {
	Target      string   `json:"target"`
	Out         string   `json:"out"`
	Files       []string `json:"files"`
	BytesRead   int64    `json:"bytes_read"`
	BytesOut    int64    `json:"bytes_written"`
	Seconds     float64  `json:"seconds"`
	PeakRSS     int64    `json:"peak_rss_bytes"`
	Tensors     int      `json:"tensors"`
	ReusedFiles []string `json:"reused_files"`
	// Remote sources: bytes received over HTTP versus the whole repo.
	BytesFetched int64    `json:"bytes_fetched,omitempty"`
	SourceTotal  int64    `json:"source_total_bytes,omitempty"`
	Notes        []string `json:"notes"`
}

// holdAfterEnv is a test hook: the export blocks after writing the named
// file, so a test can kill it mid-way.
const holdAfterEnv = "MTPCONV_TEST_HOLD_AFTER_FILE"

func mlxOptions(c *cli.Context) (convert.MLXOptions, error) {
	o := convert.MLXOptions{GroupSize: c.Int("group-size"), Rounding: c.String("mlx-rounding"), RouterBits: c.Int("router-bits")}
	var err error
	head := c.String("head-precision")
	if head == "" {
		head = "bf16"
	}
	if o.Head, err = convert.ParsePrecision(head); err != nil {
		return o, usagef("--head-precision: %v", err)
	}
	if o.Trunk, err = convert.ParsePrecision(c.String("trunk-precision")); err != nil {
		return o, usagef("--trunk-precision: %v", err)
	}
	switch o.GroupSize {
	case 32, 64, 128:
	default:
		return o, usagef("--group-size %d: must be 32, 64 or 128", o.GroupSize)
	}
	if o.Rounding != "gpu" && o.Rounding != "cpu" {
		return o, usagef("--mlx-rounding %q: must be gpu or cpu", o.Rounding)
	}
	if o.RouterBits != 0 && o.RouterBits != 8 {
		return o, usagef("--router-bits %d: must be 8 or 0", o.RouterBits)
	}
	if v := c.String("max-shard-size"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return o, usagef("--max-shard-size: %v", err)
		}
		o.MaxShard = n
	}
	return o, nil
}

func runExport(c *cli.Context) error {
	if c.NArg() != 0 {
		return usagef("export takes no positional arguments, got %v", c.Args().Slice())
	}
	start := time.Now()
	target := c.String("target")
	o, err := mlxOptions(c)
	if err != nil {
		return err
	}
	out := c.String("out")
	if out == "" && !c.Bool("dry-run") {
		return usagef("--out is required")
	}
	if out != "" && !c.Bool("dry-run") {
		if _, err := os.Stat(out); err == nil && !c.Bool("force") {
			return fmt.Errorf("%s already exists; pass --force to replace it", out)
		}
	}
	m, remote, closeModel, err := loadModel(c, c.String("src"))
	if err != nil {
		return err
	}
	defer closeModel()
	var plan *convert.Plan
	switch target {
	case convert.TargetMLX:
		plan, err = convert.PlanMLX(m, o)
	case convert.TargetCombined:
		plan, err = convert.PlanCombined(m, o)
	case convert.TargetOpenVINO:
		ovo := convert.OVOptions{Head: c.String("head-precision"), LMHead: c.String("lm-head-precision"), GroupSize: c.Int("group-size"), Sym: c.Bool("sym")}
		if ovo.Head == "" {
			ovo.Head = "f16"
		}
		if _, err := ovo.Validate(); err != nil {
			return usageError{err}
		}
		plan, err = convert.PlanOpenVINO(m, ovo)
	default:
		return usagef("--target %q: must be mlx, combined or openvino", target)
	}
	if err != nil {
		return err
	}
	jobs := c.Int("jobs")
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	if c.Bool("dry-run") {
		return printDryRun(c, m, plan, jobs)
	}
	fingerprint, err := manifests.Fingerprint(m.Checkpoint, m.Config.Raw)
	if err != nil {
		return err
	}
	if remote != nil {
		if err := prefetch(remote, plan, m.Checkpoint); err != nil {
			return err
		}
	}
	w := &partialDir{out: out, resume: c.Bool("resume"), planHash: planHash(plan, fingerprint)}
	sum := exportSummary{Target: target, Out: out, Tensors: len(plan.Tensors), Notes: plan.Notes, ReusedFiles: []string{}}
	var bar *progress
	if !c.Bool("quiet") && !c.Bool("json") && isTerminal(c.App.ErrWriter) {
		bar = startProgress(c.App.ErrWriter, plan.SourceBytes(m.Checkpoint))
	}
	err = w.write(func(dir string) error {
		opts := convert.RunOptions{
			Jobs:            jobs,
			KeepSourceCache: c.Bool("keep-source-cache"),
			Reuse:           w.reuse,
			OnFile: func(rec convert.FileRecord) {
				w.finished(rec)
				if !c.Bool("quiet") && !c.Bool("json") && bar == nil {
					fmt.Fprintf(c.App.ErrWriter, "wrote %s (%d bytes)\n", rec.File.Name, rec.File.Size)
				}
				if os.Getenv(holdAfterEnv) == rec.File.Name {
					time.Sleep(time.Hour)
				}
			},
		}
		if bar != nil {
			opts.Progress = bar.add
		}
		res, err := convert.Run(c.Context, plan, m.Checkpoint, dir, opts)
		if bar != nil {
			bar.finish()
		}
		if err != nil {
			return err
		}
		if plan.Target == convert.TargetOpenVINO {
			files, err := convert.WriteOpenVINOGraphs(dir, m, plan, ovRtInfo(plan, m), res)
			if err != nil {
				return err
			}
			res.Files = replaceFiles(res.Files, files)
			res.BytesOut = 0
			for _, f := range res.Files {
				res.BytesOut += f.Size
			}
		}
		man := &manifests.Manifest{
			Schema: manifests.SchemaVersion, Tool: manifests.Tool{Name: "mtpconv", Version: version},
			Source: fingerprint, Target: target, Options: plan.Options, Model: describe(c, m),
			Tensors: res.Tensors, Files: res.Files, BytesRead: res.BytesRead,
		}
		man.Source.Tensors = res.Sources
		if remote != nil {
			man.Source.BytesFetched = remote.BytesFetched()
			sum.BytesFetched = remote.BytesFetched()
			sum.SourceTotal = remote.TotalBytes()
		}
		if c.Bool("timestamp") {
			man.CreatedAt = time.Now().UTC().Format(time.RFC3339)
		}
		if err := man.Write(dir); err != nil {
			return err
		}
		if !c.Bool("no-card") {
			if err := os.WriteFile(filepath.Join(dir, "README.md"), manifests.Card(man, nil), 0o644); err != nil {
				return err
			}
		}
		for _, f := range res.Files {
			sum.Files = append(sum.Files, f.Name)
		}
		sum.BytesRead, sum.BytesOut = res.BytesRead, res.BytesOut
		sum.Notes = append(sum.Notes, valueNotes(res.Tensors)...)
		return nil
	})
	if err != nil {
		if c.Context.Err() != nil {
			return fmt.Errorf("interrupted; nothing was written to %s", out)
		}
		return err
	}
	sum.ReusedFiles = append(sum.ReusedFiles, w.reused...)
	sum.Seconds = time.Since(start).Seconds()
	sum.PeakRSS = peakRSS()
	if sum.Notes == nil {
		sum.Notes = []string{}
	}
	switch {
	case c.Bool("json"):
		return printJSON(c, sum)
	case !c.Bool("quiet"):
		for _, n := range sum.Notes {
			fmt.Fprintln(c.App.ErrWriter, "note:", n)
		}
		fmt.Fprintf(c.App.Writer, "exported %s: %d tensors, %d files, %d bytes in %.1fs (%d source bytes read, peak RSS %d MiB)\n",
			out, sum.Tensors, len(sum.Files), sum.BytesOut, sum.Seconds, sum.BytesRead, sum.PeakRSS>>20)
		if remote != nil {
			fmt.Fprintf(c.App.Writer, "fetched %d of the checkpoint's %d bytes from %s (%.2f%%)\n",
				sum.BytesFetched, sum.SourceTotal, remote.Name(), 100*float64(sum.BytesFetched)/float64(max(1, sum.SourceTotal)))
		}
	}
	return nil
}

// describe fills the manifest's model section.
func describe(c *cli.Context, m *convert.Model) manifests.Model {
	base := c.String("base-model")
	if base == "" {
		base = m.BaseModelGuess()
	}
	lic := c.String("license")
	if lic == "" {
		lic = m.License()
	}
	d := manifests.Model{Family: m.Family, ModelType: m.Config.ModelType, BaseModel: base, License: lic,
		HiddenSize: m.Config.HiddenSize, NumExperts: m.Config.NumExperts, ExpertsPerTok: m.Config.NumExpertsPerTok,
		MTPDepth: m.MTPDepth, NormConvention: "zero-centred RMSNorm weights stored shifted: 1+w (the +1 is applied by mtpconv; loaders must not add it again)"}
	return d
}

func planHash(p *convert.Plan, s manifests.Source) string {
	b, _ := json.Marshal(struct {
		Version string
		Plan    *convert.Plan
		Files   []string
		Source  manifests.Source
	}{version, p, fileNames(p), s})
	return manifests.SHA256(b)
}

func fileNames(p *convert.Plan) []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Name+":"+manifests.SHA256(f.Contents)+":"+f.CopyFrom)
	}
	return out
}

// partialDir writes an export into a hidden sibling of the output folder and
// renames it into place only when complete, so an interrupted run (Ctrl-C,
// kill, full disk) never leaves a folder that looks complete. A killed run
// leaves the sibling behind; --resume reuses its finished files.
type partialDir struct {
	out      string
	resume   bool
	planHash string
	dir      string
	reused   []string
}

const (
	planMarker = ".mtpconv-plan"
	doneDir    = ".mtpconv-done"
)

func (w *partialDir) write(fn func(dir string) error) error {
	parent := filepath.Dir(filepath.Clean(w.out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	w.dir = filepath.Join(parent, "."+filepath.Base(filepath.Clean(w.out))+".partial")
	prev, _ := os.ReadFile(filepath.Join(w.dir, planMarker))
	if !w.resume || string(prev) != w.planHash {
		if err := os.RemoveAll(w.dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(w.dir, doneDir), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(w.dir, planMarker), []byte(w.planHash), 0o644); err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(w.dir)
		}
	}()
	if err := fn(w.dir); err != nil {
		return err
	}
	os.Remove(filepath.Join(w.dir, planMarker))
	os.RemoveAll(filepath.Join(w.dir, doneDir))
	if _, err := os.Stat(w.out); err == nil {
		old := w.dir + ".old"
		os.RemoveAll(old)
		if err := os.Rename(w.out, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(w.dir, w.out); err != nil {
		return err
	}
	ok = true
	return nil
}

// finished records a completed tensor file so a later --resume can reuse it.
func (w *partialDir) finished(rec convert.FileRecord) {
	// Written aside and renamed, so a kill never leaves a half-written record.
	if b, err := json.Marshal(rec); err == nil {
		path := filepath.Join(w.dir, doneDir, rec.File.Name+".json")
		if os.WriteFile(path+".tmp", b, 0o644) == nil {
			os.Rename(path+".tmp", path)
		}
	}
}

// reuse hands back a file finished by an interrupted run, if its bytes still hash to the record.
func (w *partialDir) reuse(file string) (convert.FileRecord, bool) {
	var rec convert.FileRecord
	if !w.resume {
		return rec, false
	}
	b, err := os.ReadFile(filepath.Join(w.dir, doneDir, file+".json"))
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return rec, false
	}
	size, sum, err := manifests.HashFile(filepath.Join(w.dir, file))
	if err != nil || size != rec.File.Size || sum != rec.File.SHA256 {
		return rec, false
	}
	w.reused = append(w.reused, file)
	return rec, true
}

// peakRSS is the process's peak resident set size as the kernel reports it.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// printDryRun prints the plan without writing anything.
func printDryRun(c *cli.Context, m *convert.Model, p *convert.Plan, jobs int) error {
	type row struct {
		Name      string `json:"name"`
		File      string `json:"file"`
		Precision string `json:"precision"`
		Bytes     int64  `json:"bytes"`
	}
	type fileRow struct {
		Name  string `json:"name"`
		Bytes int64  `json:"bytes"`
	}
	var rows []row
	files := map[string]int64{}
	for _, t := range p.Tensors {
		var b int64
		for _, e := range t.Entries() {
			size, _ := e.DType.Size()
			n := size
			for _, d := range e.Shape {
				n *= d
			}
			b += n
		}
		prec := string(t.DType)
		if t.Quant != nil {
			prec = fmt.Sprintf("%s %d-bit g%d (%s)", t.Quant.Mode, t.Quant.Bits, t.Quant.GroupSize, t.DType)
		}
		rows = append(rows, row{t.Name, t.File, prec, b})
		files[t.File] += b
	}
	var fl []fileRow
	var total int64
	for _, f := range p.TensorFiles {
		fl = append(fl, fileRow{f, files[f]})
		total += files[f]
	}
	for _, f := range p.Files {
		fl = append(fl, fileRow{f.Name, int64(len(f.Contents))})
		total += int64(len(f.Contents))
	}
	peak := m.EstimatePeakMemory(p, jobs)
	if c.Bool("json") {
		return printJSON(c, map[string]any{"target": p.Target, "tensors": rows, "files": fl, "total_bytes": total, "estimated_peak_memory_bytes": peak, "notes": p.Notes})
	}
	out := c.App.Writer
	for _, r := range rows {
		fmt.Fprintf(out, "%-70s %-40s %12d  %s\n", r.Name, r.Precision, r.Bytes, r.File)
	}
	fmt.Fprintln(out)
	for _, f := range fl {
		fmt.Fprintf(out, "file %-40s %14d bytes\n", f.Name, f.Bytes)
	}
	fmt.Fprintf(out, "total %d bytes in %d files; estimated peak memory %d MiB with --jobs %d\n", total, len(fl), peak>>20, jobs)
	for _, n := range p.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	return nil
}

// ovRtInfo is the model-level rt_info of our IRs: tool, source, precisions, norm convention.
func ovRtInfo(p *convert.Plan, m *convert.Model) []ov.Attr {
	return []ov.Attr{
		{Key: "mtpconv_version", Value: version},
		{Key: "mtpconv_source", Value: m.Checkpoint.Source.Name()},
		{Key: "mtpconv_family", Value: m.Family},
		{Key: "mtpconv_head_precision", Value: p.Options["head_precision"]},
		{Key: "mtpconv_lm_head_precision", Value: p.Options["lm_head_precision"]},
		{Key: "mtpconv_group_size", Value: p.Options["group_size"]},
		{Key: "mtpconv_sym", Value: p.Options["sym"]},
		{Key: "mtpconv_norm_convention", Value: convert.OVNormConvention},
		{Key: "mtpconv_kv_variables", Value: convert.OVKeyVariable + "," + convert.OVValueVariable},
	}
}

// replaceFiles swaps in the final records of files rewritten after Run and appends new ones.
func replaceFiles(files []manifests.File, final []manifests.File) []manifests.File {
	idx := map[string]int{}
	for i, f := range files {
		idx[f.Name] = i
	}
	for _, f := range final {
		if i, ok := idx[f.Name]; ok {
			files[i] = f
		} else {
			files = append(files, f)
		}
	}
	return files
}

// parseSize reads a byte count with an optional unit: B, KB, MB, GB (powers
// of 1000) or KiB, MiB, GiB (powers of 1024).
func parseSize(v string) (int64, error) {
	units := []struct {
		suffix string
		scale  int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	scale := int64(1)
	num := strings.TrimSpace(v)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, scale = strings.TrimSpace(rest), u.scale
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/scale {
		return 0, fmt.Errorf("%q is not a positive size such as 5GB or 500MiB", v)
	}
	return n * scale, nil
}
