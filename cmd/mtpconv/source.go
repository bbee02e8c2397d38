package main

import (
	"encoding/json"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/urfave/cli/v2"
)

// openSource resolves --src (folder, HF cache id, or hf:// repo) and returns
// the source and, for a remote one, its handle (to prefetch and count bytes).
func openSource(c *cli.Context, src string) (source.Source, *source.Remote, error) {
	s, err := source.Resolve(src, source.RemoteOptions{Context: c.Context, Log: c.App.ErrWriter})
	if err != nil {
		return nil, nil, err
	}
	r, _ := s.(*source.Remote)
	return s, r, nil
}

// loadModel resolves --src and describes the checkpoint. The caller calls
// the returned close when done (it closes the shards and any remote spool).
func loadModel(c *cli.Context, src string) (*model.Model, *source.Remote, func(), error) {
	s, remote, err := openSource(c, src)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := model.Load(s)
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
