package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	convrun "github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/urfave/cli/v2"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "describe a checkpoint (family, dims, MTP head, expert layout, tensor groups and problems), an mtpconv output, an MLX model folder (does it hold an MTP head? if not, the command that adds one), or a GGUF file",
		ArgsUsage: "SRC | MLX_DIR | FILE.gguf",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable report"},
			&cli.BoolFlag{Name: "hash", Usage: "read every tensor and include the sha256 of its bytes"},
			&cli.StringFlag{Name: targets.OptRuntime, Usage: "an HF repo: vllm | sglang: judge how that runtime alone serves the MTP head (default both)"},
			&cli.BoolFlag{Name: "strict", Usage: "exit non-zero when the MTP head is incomplete, or vLLM or SGLang would build it so that it drafts at ~0 %"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect takes one SRC (a checkpoint folder, ORG/NAME, hf://ORG/NAME, an output or MLX folder, or a .gguf file), got %d arguments", c.NArg())
			}
			dir := c.Args().First()
			if fi := targets.FileInspectorFor(dir); fi != nil {
				return inspectFile(c, fi, dir)
			}
			var out *hfOutput
			if !strings.HasPrefix(dir, "hf://") {
				done, hfOut, err := inspectOutput(c, dir)
				if done || err != nil {
					return err
				}
				out = hfOut
			}
			s, remote, err := openSource(c, "", dir)
			if err != nil {
				return err
			}
			defer remote.Close()
			repos, err := targets.Repos()
			if err != nil {
				return err
			}
			m, err := repos.LoadRepo(s)
			if err != nil {
				// A family mtpconv does not read whose MTP class decides for
				// the whole head (LongCat-Flash, Nemotron-3.5-Transcribe):
				// judged by that rule alone.
				if r, ok, cerr := repos.ServingWithoutFamily(s, c.String(targets.OptRuntime)); ok || cerr != nil {
					if cerr != nil {
						return cerr
					}
					return inspectClassOnly(c, r)
				}
				return err
			}
			defer m.Checkpoint.Close()
			if out != nil && out.HeadOnly {
				// --target hf --out: the head alone, for a runtime that takes
				// the trunk from the base model; no trunk tensor is missing.
				m.TrunkProblems = nil
			}
			r, err := m.Inspect()
			if err != nil {
				return err
			}
			serving, err := convrun.Interruptible(c.Context, func() (targets.ServingReport, error) {
				return repos.Serving(m, c.String(targets.OptRuntime))
			})
			if err != nil {
				return err
			}
			if c.Bool("hash") {
				if err := hashTensors(c, m.Checkpoint, r); err != nil {
					return err
				}
			}
			// The head's stored values: read from a local checkpoint, and
			// from the Hub only for --strict (its head is fetched by range).
			var hr *health.Report
			if m.HeadError() == nil && (remote == nil || c.Bool("strict")) {
				if hr, err = m.HeadHealth(c.Context); err != nil {
					return err
				}
			}
			if c.Bool("json") {
				if err := printJSON(c, sourceReport{r, out, serving, hr}); err != nil {
					return err
				}
			} else {
				out.writeText(c.App.Writer)
				r.WriteText(c.App.Writer)
				serving.WriteText(c.App.Writer)
				if c.Bool("hash") {
					r.WriteHashes(c.App.Writer)
				}
				if hr != nil {
					hr.WriteText(c.App.Writer)
				}
			}
			if c.Bool("strict") {
				if err := serving.Err(); err != nil {
					return err
				}
				// A head the serving report judged is judged as the runtimes
				// load it: its quantized storage, its layers against the
				// declared depth (per runtime), what it lacks. HeadError's
				// float dtypes and exact depth are an export source's needs.
				if !serving.JudgedHead() {
					if err := m.HeadError(); err != nil {
						return err
					}
				}
				return strictHealth(c, hr)
			}
			return nil
		},
	}
}

// hfOutput is what inspect says of an HF repo mtpconv wrote (--target hf):
// the head added into a repo, or alone (a head-only repo, whose trunk the
// runtimes take from the base model).
type hfOutput struct {
	Version  string `json:"mtpconv_version"`
	HeadOnly bool   `json:"head_only"`
}

func (o *hfOutput) writeText(w io.Writer) {
	if o == nil {
		return
	}
	what := "the MTP head added into an HF repo"
	if o.HeadOnly {
		what = "the MTP head alone, for --speculative-draft-model-path; its trunk is the base model's"
	}
	fmt.Fprintf(w, "output:        mtpconv %s, target hf: %s\n", o.Version, what)
}

// sourceReport is inspect's report of a source checkpoint or HF repo: the
// checkpoint, how vLLM and SGLang would serve its MTP head, and the head's
// health from its stored values.
// inspectClassOnly prints the serving report of a repo judged by its MTP
// class's whole-head rule; --strict exits 1 on its problems.
func inspectClassOnly(c *cli.Context, r targets.ServingReport) error {
	if c.Bool("json") {
		if err := printJSON(c, struct {
			Serving targets.ServingReport `json:"serving"`
		}{r}); err != nil {
			return err
		}
	} else {
		r.WriteText(c.App.Writer)
	}
	if c.Bool("strict") {
		return r.Err()
	}
	return nil
}

type sourceReport struct {
	*model.Report
	Output     *hfOutput             `json:"mtpconv_output,omitempty"`
	Serving    targets.ServingReport `json:"serving"`
	HeadHealth *health.Report        `json:"head_health,omitempty"`
}

// hashTensors fills in the sha256 of every tensor of the report, reading
// each in chunks and stopping within a chunk when the command is interrupted.
func hashTensors(c *cli.Context, ck *st.Checkpoint, r *model.Report) error {
	delay := newTestDelay(c.App.ErrWriter)
	delay.arm()
	var buf []byte
	for i := range r.Tensors {
		tr := &r.Tensors[i]
		t := ck.Tensors[tr.Name]
		h := sha256.New()
		const chunk = 8 << 20
		for off := int64(0); off < t.Bytes(); off += chunk {
			if err := c.Context.Err(); err != nil {
				return err
			}
			delay.wait()
			var err error
			buf, err = ck.ReadRange(t, off, min(chunk, t.Bytes()-off), buf)
			if err != nil {
				return err
			}
			h.Write(buf)
		}
		tr.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return nil
}

// inspectOutput describes a folder written by mtpconv (it has a manifest), or
// warns about an MLX file from elsewhere that carries mtp.* tensors. It
// reports done when the folder was such an output; an HF repo mtpconv
// wrote is described as a source, and returned.
func inspectOutput(c *cli.Context, dir string) (bool, *hfOutput, error) {
	m, err := manifests.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fi := targets.FolderInspectorFor(dir)
		if fi == nil {
			return false, nil, foreignMLXWarning(c, dir)
		}
		if c.IsSet(targets.OptRuntime) {
			return true, nil, usagef("--runtime applies to an HF repo (how vLLM or SGLang serves it); %s is not one", dir)
		}
		ins, err := fi.InspectFolder(dir)
		if err != nil {
			return true, nil, err
		}
		return true, nil, printInspection(c, ins, func() { foreignMLXWarning(c, dir) })
	}
	if err != nil {
		return true, nil, fmt.Errorf("%s: %w", dir, err)
	}
	if targets.ReadAsRepo(m.Target) {
		// An HF repo (the head added into it, or alone): described as the
		// runtimes read it, with how they would serve its head.
		return false, &hfOutput{Version: m.Tool.Version, HeadOnly: m.Into == nil}, nil
	}
	if c.IsSet(targets.OptRuntime) {
		return true, nil, usagef("--runtime applies to an HF repo (how vLLM or SGLang serves it); %s is a --target %s output", dir, m.Target)
	}
	s := manifests.Summarize(m, targets.CardOf(m))
	hr, err := targets.HeadHealthOf(m.Target, dir)
	if err != nil {
		return true, nil, err
	}
	if c.Bool("json") {
		if err := printJSON(c, struct {
			*manifests.Summary
			HeadHealth *health.Report `json:"head_health,omitempty"`
		}{s, hr}); err != nil {
			return true, nil, err
		}
		if err := strictLost(c, s.LostHalves); err != nil {
			return true, nil, err
		}
		return true, nil, strictHealth(c, hr)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "output:        %s (mtpconv %s, target %s)\n", dir, s.Tool.Version, s.Target)
	about := "family " + s.Model.Family
	if s.Model.BaseModel != "" { // unknown for a local folder exported without --base-model
		about = "base model " + s.Model.BaseModel + ", " + about
	}
	fmt.Fprintf(w, "source:        %s (%s)\n", s.Source, about)
	experts := "dense"
	if s.Model.NumExperts > 0 {
		experts = fmt.Sprintf("%d experts top-%d", s.Model.NumExperts, s.Model.ExpertsPerTok)
	}
	fmt.Fprintf(w, "head:          MTP depth %d, %s, hidden %d\n", s.Model.MTPDepth, experts, s.Model.HiddenSize)
	fmt.Fprintf(w, "norms:         %s\n", s.Model.NormConvention)
	fmt.Fprintf(w, "tensors:       %d\n", s.Tensors)
	for _, p := range s.Precisions {
		fmt.Fprintf(w, "  %-6s %-45s %d\n", p.Component, p.Precision, p.Tensors)
	}
	for _, f := range s.Files {
		fmt.Fprintf(w, "file:          %s %d bytes sha256 %s\n", f.Name, f.Size, f.SHA256)
	}
	if in := s.Into; in != nil {
		fmt.Fprintf(w, "added into:    a folder mtpconv did not write; it owns %s\n", strings.Join(in.OwnedFiles, ", "))
		for _, u := range in.Updated {
			fmt.Fprintf(w, "  replaced     %s (the original is %s, sha256 %s)\n", u.Name, u.Original.Name, u.Original.SHA256)
		}
		for _, k := range in.Kept {
			fmt.Fprintf(w, "  builds on    %s %d bytes sha256 %s (checked by verify)\n", k.Name, k.Size, k.SHA256)
		}
	}
	if hr != nil {
		hr.WriteText(w)
	}
	for _, l := range s.LostHalves {
		fmt.Fprintf(w, "  unhealthy (recorded at export): %s\n", l)
	}
	for _, x := range s.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", x)
	}
	if err := strictLost(c, s.LostHalves); err != nil {
		return true, nil, err
	}
	return true, nil, strictHealth(c, hr)
}

// strictLost is --strict's verdict on the halves the manifest records lost.
func strictLost(c *cli.Context, lost []string) error {
	if !c.Bool("strict") || len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("the manifest records a half of the MTP head's concat projection lost at export (only --allow-lossy-head writes such a head): it would load and draft at about 0 %%: %s", strings.Join(lost, "; "))
}

// strictHealth is --strict's verdict on a head's stored values.
func strictHealth(c *cli.Context, hr *health.Report) error {
	if !c.Bool("strict") || hr == nil {
		return nil
	}
	return hr.Err()
}

// foreignMLXWarning warns when an MLX safetensors file (format mlx) in dir
// carries mtp.* tensors, whoever wrote it.
func foreignMLXWarning(c *cli.Context, dir string) error {
	names, _ := filepath.Glob(filepath.Join(dir, "model*.safetensors"))
	for _, n := range names {
		f, fi, err := st.OpenRegular(n)
		if err != nil {
			continue
		}
		h, err := st.ReadHeader(f, fi.Size(), filepath.Base(n))
		f.Close()
		if err != nil || h.Metadata["format"] != "mlx" {
			continue
		}
		for _, t := range h.Tensors {
			if strings.HasPrefix(t.Name, "mtp.") || strings.Contains(t.Name, ".mtp.") {
				fmt.Fprintf(c.App.ErrWriter, "warning: %s: %s\n", filepath.Base(n), manifests.OldMLXLMWarning)
				return nil
			}
		}
	}
	return nil
}

// inspectFile describes a file a target's consumer reads (a GGUF file,
// ours or anyone's: architecture, blocks, MTP layers, tensor types).
func inspectFile(c *cli.Context, fi targets.FileInspector, path string) error {
	if c.Bool("hash") || c.IsSet(targets.OptRuntime) {
		return usagef("inspect of a file such as %s takes --json and --strict only", filepath.Base(path))
	}
	ins, err := fi.InspectFile(c.Context, path)
	if err != nil {
		return err
	}
	return printInspection(c, ins, nil)
}

// printInspection prints a target's inspection, as JSON or for people (then
// calls afterText, when given), and returns --strict's verdict on it.
func printInspection(c *cli.Context, ins targets.Inspection, afterText func()) error {
	if c.Bool("json") {
		if err := printJSON(c, ins); err != nil {
			return err
		}
	} else {
		ins.WriteText(c.App.Writer)
		if afterText != nil {
			afterText()
		}
	}
	if !c.Bool("strict") {
		return nil
	}
	return ins.Strict()
}
