package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// progress draws a live bar (bytes done, rate, ETA) on a terminal. Without a
// terminal it stays silent: CI logs get one line per finished file instead.
type progress struct {
	w     io.Writer
	total int64
	done  atomic.Int64
	start time.Time
	stop  chan struct{}
	ended chan struct{}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func startProgress(w io.Writer, total int64) *progress {
	p := &progress{w: w, total: total, start: time.Now(), stop: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw()
				fmt.Fprintln(p.w)
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.done.Add(n) }

func (p *progress) draw() {
	done := p.done.Load()
	secs := time.Since(p.start).Seconds()
	rate := float64(done) / max(secs, 1e-9)
	frac := float64(done) / float64(max(p.total, 1))
	const width = 30
	fill := min(width, int(frac*width))
	eta := "--"
	if rate > 0 && done < p.total {
		eta = fmt.Sprintf("%.0fs", float64(p.total-done)/rate)
	}
	bar := make([]byte, width)
	for i := range bar {
		if i < fill {
			bar[i] = '='
		} else {
			bar[i] = ' '
		}
	}
	fmt.Fprintf(p.w, "\r[%s] %6.2f / %.2f GB  %7.1f MB/s  ETA %s   ", bar, float64(done)/1e9, float64(p.total)/1e9, rate/1e6, eta)
}

func (p *progress) finish() {
	close(p.stop)
	<-p.ended
}
