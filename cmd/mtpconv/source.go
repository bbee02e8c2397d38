package main

import (
	"encoding/json"
	"fmt"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/urfave/cli/v2"
)

// openSource resolves a source (folder, HF cache id, or hf:// repo) and
// returns it and, for a remote one, its handle (to prefetch and count bytes).
// flag is where src came from ("--src"; "" for inspect's argument), for the errors.
func openSource(c *cli.Context, flag, src string) (source.Source, *source.Remote, error) {
	s, err := source.Resolve(src, source.RemoteOptions{Context: c.Context, Log: c.App.ErrWriter})
	if err != nil {
		if flag != "" {
			err = fmt.Errorf("%s %w", flag, err)
		}
		return nil, nil, err
	}
	r, _ := s.(*source.Remote)
	return s, r, nil
}

// loadModel resolves a source (as openSource) and describes the checkpoint. The caller calls
// the returned close when done (it closes the shards and any remote spool).
func loadModel(c *cli.Context, flag, src string) (*model.Model, *source.Remote, func(), error) {
	s, remote, err := openSource(c, flag, src)
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
