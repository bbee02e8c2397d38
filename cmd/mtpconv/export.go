package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/ggufsplit"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	convrun "github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/manifests/words"
	"github.com/urfave/cli/v2"
)

func exportCommand() *cli.Command {
	var targetHelp []string
	for _, n := range targets.TargetNames() {
		t, _ := targets.LookupTarget(n)
		targetHelp = append(targetHelp, n+": "+t.Usage()+" (takes "+strings.Join(dashed(t.Accepts()), ", ")+")")
	}
	return &cli.Command{
		Name:        "export",
		Usage:       "export the MTP head (and for combined, the trunk) of a checkpoint",
		Description: "Targets:\n   " + strings.Join(targetHelp, "\n   ") + "\n\nA target-specific flag given to a target that does not take it is an error.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "src", Usage: "source: a folder, ORG/NAME[@rev] from the Hugging Face cache, or hf://ORG/NAME[@rev] read from the Hub by range", Required: true},
			&cli.StringFlag{Name: "target", Usage: strings.Join(targets.TargetNames(), " | "), Required: true},
			&cli.StringFlag{Name: "out", Usage: "output folder (must not exist unless --force)"},
			&cli.StringFlag{Name: "into", Usage: "openvino: add the MTP IR (openvino_mtp_model.xml/.bin) to this optimum-intel export of the same model; combined: add the mtp.* head (model-mtp.safetensors, config.json and the index updated, their originals kept) to this MLX model folder of the same model; the trunk files are not touched, no README.md is written, and the manifest records what mtpconv owns (exclusive with --out; --force replaces the head's files an earlier --into wrote; a file mtpconv did not write is never replaced)"},
			&cli.StringFlag{Name: targets.OptHeadPrecision, Usage: "mlx, combined: f16 | bf16 | int2 | int3 | int4 | int5 | int6 | int8 (MLX affine) | mxfp4 | mxfp8 | nvfp4 | fp8 (MLX's 8-bit float: mxfp8) (default bf16); mlx also int1 (MLX's 1-bit affine, with --mlx-rounding cpu; drafters without stacked experts or heads); openvino: f16 | int8 | int4 (default f16); gguf: bf16 | f16 | int8 (Q8_0) | int4 (Q4_K_M) (default bf16; --gguf-type gives every llama-quantize type); hf: bf16 | fp8 (an FP8 release's block-FP8 head as stored; the default into a block-FP8 repo) (default bf16)"},
			&cli.StringFlag{Name: targets.OptLMHeadPrecision, Usage: "openvino: f16 | int8 | int4 for the lm_head IR (default int8)"},
			&cli.BoolFlag{Name: targets.OptSym, Usage: "openvino: symmetric i8/i4 instead of asymmetric u8/u4 (NNCF INT*_SYM)"},
			&cli.StringFlag{Name: targets.OptTrunkPrecision, Usage: "combined: as --head-precision for mlx (default bf16); wins over --q-bits/--q-mode"},
			&cli.StringFlag{Name: targets.OptTrunkRecipe, Usage: "combined: mlx-lm's mixed recipe for the trunk, mixed_2_6 | mixed_3_4 | mixed_3_6 | mixed_4_6 (the head keeps --head-precision); wins over --quant-predicate"},
			&cli.IntFlag{Name: targets.OptQBits, DefaultText: "the mode's: 4 for affine", Usage: "combined: mlx_lm.convert's spelling of the trunk's bits (with --q-mode; --trunk-precision wins)"},
			&cli.IntFlag{Name: targets.OptQGroupSize, DefaultText: "--group-size", Usage: "combined: mlx_lm.convert's spelling: the trunk's group size (wins over --group-size for the trunk)"},
			&cli.StringFlag{Name: targets.OptQMode, Usage: "combined: mlx_lm.convert's spelling: affine | mxfp4 | mxfp8 | nvfp4 for the trunk (--trunk-precision wins)"},
			&cli.StringFlag{Name: targets.OptQuantPredicate, Usage: "combined: mlx_lm.convert's spelling of --trunk-recipe (--trunk-recipe wins)"},
			&cli.StringFlag{Name: targets.OptMaxShardSize, Usage: "combined: split the file into shards of at most this size (e.g. 5GB, 500MiB)"},
			&cli.IntFlag{Name: targets.OptGroupSize, Value: 64, Usage: "quantization group size: mlx, combined affine 32 | 64 | 128 (default 64), mxfp4/mxfp8 32 only, nvfp4 16 only (the default for those); openvino int4 64 | 128"},
			&cli.StringFlag{Name: targets.OptMLXRounding, Usage: "mlx, combined: gpu (what mlx_lm.convert gives on Apple silicon, the default) | cpu (MLX's CPU kernel)"},
			&cli.StringFlag{Name: targets.OptRuntime, Usage: "hf --into: vllm | sglang: mend the repo for that runtime alone, where no quantization config serves both (GPTQ with routed experts in the head, AWQ without modules_to_not_convert) (default both)"},
			&cli.StringFlag{Name: targets.OptGGUFType, Usage: "gguf: a llama-quantize file type, F16 | BF16 | Q8_0 | Q4_0 | Q4_K_M | Q4_K_S | Q5_K_M | Q6_K: what llama-quantize makes of the bf16 sidecar (instead of --head-precision)"},
			&cli.StringFlag{Name: targets.OptGraft, Usage: "gguf: write the head into this trunk GGUF of the same model: one bundled GGUF in --out named as it (a file of a split set: the whole set, its files named as the trunk's), the trunk's tensors copied unchanged (--force replaces a head it already holds)"},
			&cli.IntFlag{Name: targets.OptRouterBits, Value: 8, Usage: "mlx, combined: bits of the MoE router and shared_expert_gate when quantized, at group size 64, as mlx-lm does (0: same as their component)"},
			&cli.IntFlag{Name: "jobs", DefaultText: "every core", Usage: "chunks converted in parallel, at least 1; never changes the bytes"},
			&cli.BoolFlag{Name: "keep-source-cache", Usage: "keep the source bytes read in the page cache (by default, bytes that were not cached before are dropped once read)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing output folder (an earlier mtpconv --out; never a folder the head was added into: use --into DIR --force)"},
			&cli.BoolFlag{Name: "resume", Usage: "continue an interrupted export into the same --out, reusing finished files whose hashes match"},
			&cli.BoolFlag{Name: "allow-lossy-head", Usage: "write the head even when its quantization loses the embedding or hidden half of its concat projection (eh_proj, mtp.fc), which the export otherwise refuses: such a head loads and drafts at about 0 %"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan (tensors, files, sizes, peak memory) and write nothing"},
			&cli.BoolFlag{Name: "no-card", Usage: "do not write README.md (the model card)"},
			&cli.BoolFlag{Name: "timestamp", Usage: "record the time in the manifest (outputs are otherwise byte-identical across runs)"},
			&cli.StringFlag{Name: "base-model", Usage: "Hub id of the source model for the card (default: from the source)"},
			&cli.StringFlag{Name: "license", Usage: "license for the card (default: the source README's, with its license_name and license_link, else other)"},
			&cli.StringFlag{Name: "repo-id", Usage: "the Hub id ORG/NAME this output will be published as: the card's snippets load it by that name (default: a YOUR-ORG/ placeholder)"},
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable summary"},
			&cli.BoolFlag{Name: "quiet", Usage: "print nothing but errors"},
		},
		Action: runExport,
	}
}

func dashed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	return out
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
	Warnings     []string `json:"warnings"`
}

// holdAfterEnv is a test hook: the export blocks after writing the named
// file (until interrupted), so a test can kill or interrupt it mid-way.
const holdAfterEnv = "MTPCONV_TEST_HOLD_AFTER_FILE"

// exportOptions reads the target options from the flags, recording which were given.
func exportOptions(c *cli.Context) (targets.Options, error) {
	o := targets.Options{
		HeadPrecision: c.String(targets.OptHeadPrecision), TrunkPrecision: c.String(targets.OptTrunkPrecision),
		LMHeadPrecision: c.String(targets.OptLMHeadPrecision), GroupSize: c.Int(targets.OptGroupSize), Sym: c.Bool(targets.OptSym),
		MLXRounding: c.String(targets.OptMLXRounding), RouterBits: c.Int(targets.OptRouterBits), Set: map[string]bool{},
		TrunkRecipe: c.String(targets.OptTrunkRecipe), QBits: c.Int(targets.OptQBits), QGroupSize: c.Int(targets.OptQGroupSize),
		QMode: c.String(targets.OptQMode), QuantPredicate: c.String(targets.OptQuantPredicate), GGUFType: c.String(targets.OptGGUFType),
		Graft: c.String(targets.OptGraft), Runtime: c.String(targets.OptRuntime),
	}
	for _, n := range []string{targets.OptHeadPrecision, targets.OptTrunkPrecision, targets.OptLMHeadPrecision, targets.OptGroupSize,
		targets.OptSym, targets.OptMLXRounding, targets.OptRouterBits, targets.OptMaxShardSize,
		targets.OptTrunkRecipe, targets.OptQBits, targets.OptQGroupSize, targets.OptQMode, targets.OptQuantPredicate, targets.OptGGUFType,
		targets.OptGraft, targets.OptRuntime} {
		o.Set[n] = c.IsSet(n)
	}
	if v := c.String(targets.OptMaxShardSize); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return o, usagef("--max-shard-size: %v", err)
		}
		o.MaxShardSize = n
	}
	return o, nil
}

// remoteFetcher adapts a Hub source to the library's Fetcher.
type remoteFetcher struct{ r *source.Remote }

func (f remoteFetcher) Prefetch(ranges map[string][][2]int64) error {
	rs := map[string][]source.Range{}
	for file, xs := range ranges {
		for _, x := range xs {
			rs[file] = append(rs[file], source.Range{Begin: x[0], End: x[1]})
		}
	}
	return f.r.Prefetch(rs)
}
func (f remoteFetcher) BytesFetched() int64 { return f.r.BytesFetched() }
func (f remoteFetcher) TotalBytes() int64   { return f.r.TotalBytes() }

func runExport(c *cli.Context) error {
	if c.NArg() != 0 {
		return usagef("export takes no positional arguments, got %v", c.Args().Slice())
	}
	start := time.Now()
	o, err := exportOptions(c)
	if err != nil {
		return err
	}
	if c.IsSet("jobs") && c.Int("jobs") < 1 {
		return usagef("--jobs %d: must be 1 or more (leave it out to use every core)", c.Int("jobs"))
	}
	req := export.Request{
		Target: c.String("target"), Options: o, Force: c.Bool("force"), Resume: c.Bool("resume"),
		DryRun: c.Bool("dry-run"), Jobs: c.Int("jobs"), KeepSourceCache: c.Bool("keep-source-cache"), NoCard: c.Bool("no-card"),
		Timestamp: c.Bool("timestamp"), BaseModel: c.String("base-model"), License: c.String("license"), RepoID: c.String("repo-id"), Version: version,
		AllowLossyHead: c.Bool("allow-lossy-head"),
	}
	if req.RepoID != "" && !model.IsHubID(req.RepoID) {
		return usagef("--repo-id %q is not a Hub id ORG/NAME", req.RepoID)
	}
	if _, err := targets.LookupTarget(req.Target); err != nil {
		return usageError{err}
	}
	if req.Dest, err = export.DestOf(c.String("out"), c.String("into"), req.DryRun); err != nil {
		return err
	}
	if isGGUFFile(c.String("src")) {
		return splitExport(c, req, start)
	}
	// Refused early, before the source is read (over the network for hf://).
	if req.Dest.Into || strings.HasPrefix(c.String("src"), "hf://") {
		if err := export.CheckDest(req); err != nil {
			return err
		}
	}
	m, remote, closeModel, err := loadModel(c, "--src", c.String("src"))
	if err != nil {
		return err
	}
	defer closeModel()
	req.Model = m
	if remote != nil {
		req.Fetcher = remoteFetcher{remote}
	}
	quiet := c.Bool("quiet") || c.Bool("json")
	var bar *progress
	if !quiet && !req.DryRun && isTerminal(c.App.ErrWriter) {
		bar = startProgress(c.App.ErrWriter, 0)
		req.Progress = bar.add
	}
	req.OnFile = func(rec convrun.FileRecord) {
		if !quiet && bar == nil {
			fmt.Fprintf(c.App.ErrWriter, "wrote %s (%d bytes)\n", rec.File.Name, rec.File.Size)
		}
		if os.Getenv(holdAfterEnv) == rec.File.Name {
			select { // until killed or interrupted
			case <-time.After(time.Hour):
			case <-c.Context.Done():
			}
		}
	}
	oc, err := export.Export(c.Context, req)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return err
	}
	if req.DryRun {
		return printDryRun(c, oc, req.Jobs, !req.NoCard && !req.Dest.Into)
	}
	return printExport(c, req, oc, remote, start)
}

// printExport prints what an export did.
func printExport(c *cli.Context, req export.Request, oc *export.Outcome, remote *source.Remote, start time.Time) error {
	dest := req.Dest.Dir
	sum := exportSummary{Target: req.Target, Out: dest, Tensors: oc.Tensors, Notes: oc.Notes, Warnings: append([]string{}, oc.Warnings...), ReusedFiles: oc.Reused,
		BytesRead: oc.BytesRead, BytesOut: oc.BytesOut, BytesFetched: oc.BytesFetched, SourceTotal: oc.SourceTotal}
	for _, f := range oc.Files {
		sum.Files = append(sum.Files, f.Name)
	}
	sum.Seconds = time.Since(start).Seconds()
	sum.PeakRSS = peakRSS()
	switch {
	case c.Bool("json"):
		return printJSON(c, sum)
	case !c.Bool("quiet"):
		for _, n := range sum.Notes {
			fmt.Fprintln(c.App.ErrWriter, "note:", n)
		}
		for _, w := range sum.Warnings {
			fmt.Fprintln(c.App.ErrWriter, "warning:", w)
		}
		fmt.Fprintf(c.App.Writer, "exported %s: %s, %s, %d bytes in %.1fs (%d source bytes read, peak RSS %d MiB)\n",
			dest, words.Count(sum.Tensors, "tensor"), words.Count(len(sum.Files), "file"), sum.BytesOut, sum.Seconds, sum.BytesRead, sum.PeakRSS>>20)
		if req.Resume {
			if len(sum.ReusedFiles) == 0 {
				fmt.Fprintln(c.App.Writer, "resumed: no file of the interrupted run could be reused; every file was written again")
			} else {
				fmt.Fprintf(c.App.Writer, "resumed: reused %s of the interrupted run, every input byte proven unchanged: %s\n",
					words.Count(len(sum.ReusedFiles), "file"), strings.Join(sum.ReusedFiles, ", "))
			}
		}
		if remote != nil {
			fmt.Fprintf(c.App.Writer, "fetched %d of the checkpoint's %d bytes from %s (%.2f%%)\n",
				sum.BytesFetched, sum.SourceTotal, remote.Name(), 100*float64(sum.BytesFetched)/float64(max(1, sum.SourceTotal)))
		}
	}
	return nil
}

// isGGUFFile reports a --src that is a local GGUF file (a bundled model to
// split the sidecar from) rather than a checkpoint.
func isGGUFFile(src string) bool {
	f, _, err := st.OpenRegular(src)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == gguf.Magic
}

// splitExport writes the MTP-only sidecar of a bundled GGUF source: no
// checkpoint, no option but where to write.
func splitExport(c *cli.Context, req export.Request, start time.Time) error {
	if req.Target != "gguf" {
		return usagef("--src %s is a GGUF file: only --target gguf reads one (it writes the MTP-only sidecar of the head it holds)", c.String("src"))
	}
	for _, f := range c.FlagNames() {
		switch f {
		case "src", "target", "out", "force", "json", "quiet":
		default:
			if c.IsSet(f) {
				return usagef("--%s does not apply to a GGUF source: its sidecar keeps the head's tensors as they are", f)
			}
		}
	}
	if req.Dest.Dir == "" {
		return usagef("--out is required")
	}
	oc, err := ggufsplit.Split(c.Context, c.String("src"), req.Dest.Dir, req.Force, version)
	if err != nil {
		return err
	}
	return printExport(c, req, oc, nil, start)
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

// printDryRun prints the plan without writing anything: every tensor, and
// every file with the size the export would write.
func printDryRun(c *cli.Context, oc *export.Outcome, jobs int, card bool) error {
	type row struct {
		Name      string `json:"name"`
		File      string `json:"file"`
		Precision string `json:"precision"`
		Bytes     int64  `json:"bytes"`
	}
	p := oc.Plan
	var rows []row
	for _, t := range p.Tensors {
		var b int64
		for _, e := range t.Entries() {
			b += plan.EntryBytes(e)
		}
		prec := string(t.DType)
		if t.Quant != nil {
			prec = fmt.Sprintf("%s %d-bit g%d (%s)", t.Quant.Mode, t.Quant.Bits, t.Quant.GroupSize, t.DType)
		}
		rows = append(rows, row{t.Name, t.File, prec, b})
	}
	var total int64
	for _, f := range oc.Planned {
		total += f.Bytes
	}
	if c.Bool("json") {
		return printJSON(c, map[string]any{"target": p.Target, "tensors": rows, "files": oc.Planned, "total_bytes": total, "estimated_peak_memory_bytes": oc.PeakMemory, "notes": oc.Notes})
	}
	out := c.App.Writer
	for _, r := range rows {
		fmt.Fprintf(out, "%-70s %-40s %12d  %s\n", r.Name, r.Precision, r.Bytes, r.File)
	}
	fmt.Fprintln(out)
	for _, f := range oc.Planned {
		fmt.Fprintf(out, "file %-40s %14d bytes\n", f.Name, f.Bytes)
	}
	plus := manifests.FileName
	if card { // no card with --no-card, nor in a folder added into
		plus += " and " + manifests.CardFile
	}
	jobsWords := fmt.Sprintf("--jobs %d", jobs)
	if jobs <= 0 { // the default: as export.Export resolves it
		jobsWords = fmt.Sprintf("%s at once (every core, the default; --jobs sets it)", words.Count(runtime.GOMAXPROCS(0), "chunk"))
	}
	fmt.Fprintf(out, "total %d bytes in %s (plus %s); estimated peak memory %d MiB with %s\n",
		total, words.Count(len(oc.Planned), "file"), plus, oc.PeakMemory>>20, jobsWords)
	for _, n := range oc.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	return nil
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
