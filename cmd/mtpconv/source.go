package main

import (
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/mtpconv/mtpconv/convert"
	"github.com/mtpconv/mtpconv/formats/hub"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// openSource resolves --src (folder, HF cache id, or hf:// repo) and returns
// the source and, for a remote one, its handle (to prefetch and count bytes).
func openSource(c *cli.Context, src string) (st.Source, *hub.Remote, error) {
	s, err := hub.Resolve(src, hub.RemoteOptions{Context: c.Context, Log: c.App.ErrWriter})
	if err != nil {
		return nil, nil, err
	}
	r, _ := s.(*hub.Remote)
	return s, r, nil
}

// prefetch fetches the byte ranges a plan reads from a remote source.
func prefetch(r *hub.Remote, p *convert.Plan, ck *st.Checkpoint) error {
	ranges := map[string][]hub.Range{}
	for file, rs := range p.SourceRanges(ck) {
		for _, x := range rs {
			ranges[file] = append(ranges[file], hub.Range{Begin: x[0], End: x[1]})
		}
	}
	return r.Prefetch(ranges)
}

// loadModel resolves --src and describes the checkpoint. The caller calls
// the returned close when done (it closes the shards and any remote spool).
func loadModel(c *cli.Context, src string) (*convert.Model, *hub.Remote, func(), error) {
	source, remote, err := openSource(c, src)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := convert.Load(source)
	if err != nil {
		remote.Close()
		return nil, nil, nil, err
	}
	return m, remote, func() { m.Checkpoint.Close(); remote.Close() }, nil
}

// printJSON writes v indented to the command's output.
func printJSON(c *cli.Context, v any) error {
	enc := json.NewEncoder(c.App.Writer)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
