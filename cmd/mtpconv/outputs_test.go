package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

var updateOutputs = flag.Bool("update-outputs", false, "rewrite testdata/golden/outputs.sha256 from this build")

// outputCase is one target × precision export of the output matrix.
type outputCase struct {
	name      string
	fixture   string
	args      []string
	tokenizer bool // the fixture with testdata/tokenizer-tiny linked in (the gguf target needs a vocabulary)
}

// outputMatrix is every target × precision × fixture whose model files are
// pinned by sha256: a refactor may not change one byte of them.
func outputMatrix() []outputCase {
	all := []string{fixtures.Qwen36, fixtures.Qwen35, fixtures.Next}
	moe := []string{fixtures.Qwen36, fixtures.Qwen35}
	var cs []outputCase
	add := func(fxs []string, name string, args ...string) {
		for _, f := range fxs {
			cs = append(cs, outputCase{name: name, fixture: f, args: args})
		}
	}
	for _, p := range []string{"bf16", "f16", "int8", "int4"} {
		add(all, "mlx-"+p, "--target", "mlx", "--head-precision", p)
	}
	add(all, "mlx-int4-g32-cpu", "--target", "mlx", "--head-precision", "int4", "--group-size", "32", "--mlx-rounding", "cpu")
	add(all, "mlx-int8-g128-router0", "--target", "mlx", "--head-precision", "int8", "--group-size", "128", "--router-bits", "0")
	for _, tp := range []string{"bf16", "f16", "int8", "int4"} {
		add(moe, "combined-"+tp+"-bf16", "--target", "combined", "--trunk-precision", tp, "--head-precision", "bf16")
	}
	add(moe, "combined-int4-int4-cpu", "--target", "combined", "--trunk-precision", "int4", "--head-precision", "int4", "--mlx-rounding", "cpu")
	add(moe, "combined-bf16-int8-shards", "--target", "combined", "--head-precision", "int8", "--max-shard-size", "20MB")
	add(all, "openvino-f16", "--target", "openvino", "--head-precision", "f16", "--lm-head-precision", "f16")
	add(all, "openvino-int8", "--target", "openvino", "--head-precision", "int8")
	add(all, "openvino-int8-sym", "--target", "openvino", "--head-precision", "int8", "--sym")
	add(all, "openvino-int4-g64", "--target", "openvino", "--head-precision", "int4", "--group-size", "64")
	// Coverage: a dense head and an FP8 release.
	add([]string{fixtures.Qwen36Dense, fixtures.Qwen36FP8}, "mlx-bf16", "--target", "mlx", "--head-precision", "bf16")
	add([]string{fixtures.Qwen36Dense, fixtures.Qwen36FP8}, "mlx-int4", "--target", "mlx", "--head-precision", "int4")
	add([]string{fixtures.Qwen36Dense, fixtures.Qwen36FP8}, "combined-int4-bf16", "--target", "combined", "--trunk-precision", "int4", "--head-precision", "bf16")
	add([]string{fixtures.Qwen36Dense, fixtures.Qwen36FP8}, "openvino-f16", "--target", "openvino", "--head-precision", "f16", "--lm-head-precision", "f16")
	add([]string{fixtures.Qwen36Dense, fixtures.Qwen36FP8}, "openvino-int4-g64", "--target", "openvino", "--head-precision", "int4", "--group-size", "64")
	add(all, "openvino-int4-g128-sym-lm4", "--target", "openvino", "--head-precision", "int4", "--group-size", "128", "--sym", "--lm-head-precision", "int4")
	for _, p := range []string{"bf16", "f16", "int8", "int4"} {
		add(all, "gguf-"+p, "--target", "gguf", "--head-precision", p)
	}
	for _, ft := range []string{"BF16", "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"} {
		add(all, "gguf-type-"+ft, "--target", "gguf", "--gguf-type", ft)
	}
	for i := range cs {
		cs[i].tokenizer = cs[i].args[1] == "gguf"
	}
	// DeepSeek-V4's release layout (its own tokenizer): the FP4 experts
	// moved raw into the sidecar's MXFP4 and the drafter's mxfp4.
	add([]string{fixtures.DeepSeekV4}, "gguf-bf16", "--target", "gguf")
	add([]string{fixtures.DeepSeekV4}, "mlx-bf16", "--target", "mlx")
	add([]string{fixtures.Hy4}, "mlx-bf16", "--target", "mlx")
	// Its block-FP8 release: the ue8m0-scaled matrices dequantized into Q8_0.
	add([]string{fixtures.DeepSeekV4FP8}, "gguf-bf16", "--target", "gguf")
	// Block FP8 moved into the drafters' mxfp8 (each block's scale
	// repeated): DeepSeek-V4's, and 0731's DSpark stages, a shard a stage.
	add([]string{fixtures.DeepSeekV4FP8Blocks, fixtures.DSparkV4Flash}, "mlx-bf16", "--target", "mlx")
	return cs
}

// modelFile reports whether a file is one whose bytes are pinned (not the manifest or card).
func modelFile(name string) bool {
	return strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".bin") || strings.HasSuffix(name, ".xml") || strings.HasSuffix(name, ".gguf") ||
		name == "config.json" || name == "model.safetensors.index.json"
}

// TestOutputsUnchanged exports the whole matrix and compares every model
// file's sha256 with testdata/golden/outputs.sha256 (go test -run
// TestOutputsUnchanged -update-outputs rewrites it).
func TestOutputsUnchanged(t *testing.T) {
	t.Parallel()
	golden := filepath.Join(fixtures.Root(), "testdata", "golden", "outputs.sha256")
	want := map[string]string{}
	if f, err := os.Open(golden); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if sum, key, ok := strings.Cut(sc.Text(), "  "); ok {
				want[key] = sum
			}
		}
		f.Close()
	} else if !*updateOutputs {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range outputMatrix() {
		// Model files name the source by its folder's name, never its path:
		// the pinned bytes do not depend on where the clone lives.
		src := fixtures.Ensure(t, c.fixture)
		if c.tokenizer {
			src = filepath.Join(t.TempDir(), c.fixture)
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			testfs.LinkDir(t, fixtures.Ensure(t, c.fixture), src)
			testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), src)
		}
		out := filepath.Join(t.TempDir(), "o")
		args := append([]string{"export", "--src", src, "--out", out, "--quiet"}, c.args...)
		code, dry, stderr := runCLI(t, append(args, "--dry-run", "--json")...)
		if code != 0 {
			t.Fatalf("%s %s: dry run: exit %d: %s", c.name, c.fixture, code, stderr)
		}
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%s %s: exit %d: %s", c.name, c.fixture, code, stderr)
		}
		ents, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		checkDryRunSizes(t, c.fixture+"/"+c.name, dry, out, ents)
		for _, e := range ents {
			if !modelFile(e.Name()) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(out, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(b)
			got[c.fixture+"/"+c.name+"/"+e.Name()] = hex.EncodeToString(s[:])
		}
	}
	if *updateOutputs {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s  %s\n", got[k], k)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	sameStrings(t, want, got)
}

// sameStrings reports every key whose value differs, is missing or is new.
func sameStrings(t *testing.T, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: gone (was %q)", k, v)
		} else if g != v {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: new (%q)", k, v)
		}
	}
}

// checkDryRunSizes asserts that dry run listed every file the export wrote
// but the manifest and card, each with its exact size.
func checkDryRunSizes(t *testing.T, name, dryJSON, out string, written []os.DirEntry) {
	t.Helper()
	var plan struct {
		Files []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(dryJSON), &plan); err != nil {
		t.Fatalf("%s: dry run: %v", name, err)
	}
	planned := map[string]int64{}
	for _, f := range plan.Files {
		planned[f.Name] = f.Bytes
	}
	for _, e := range written {
		if e.Name() == "mtpconv-manifest.json" || e.Name() == "README.md" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		want, ok := planned[e.Name()]
		switch {
		case !ok:
			t.Errorf("%s: %s written (%d bytes) but not in the dry run", name, e.Name(), fi.Size())
		case want != fi.Size():
			t.Errorf("%s: %s: dry run said %d bytes, the export wrote %d", name, e.Name(), want, fi.Size())
		}
		delete(planned, e.Name())
	}
	for f := range planned {
		t.Errorf("%s: dry run lists %s, the export did not write it", name, f)
	}
}
