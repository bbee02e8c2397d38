package vllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text exposition format: a metric name,
// its labels and its value.
type sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// parseMetrics reads the Prometheus text format (version 0.0.4) that vLLM's
// /metrics serves: comment lines (# HELP, # TYPE) are skipped; every other
// non-blank line is `name{label="value",...} value [timestamp]`, label values
// escaped with \\, \" and \n. A line it cannot read is an error naming its
// line number: a counter read wrong would be reported as the runtime's own.
func parseMetrics(text string) ([]sample, error) {
	var out []sample
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", i+1, truncate(line, 120), err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (sample, error) {
	end := strings.IndexAny(line, "{ \t")
	if end <= 0 {
		return sample{}, fmt.Errorf("no value after the metric name")
	}
	s := sample{Name: line[:end]}
	rest := line[end:]
	if rest[0] == '{' {
		labels, n, err := parseLabels(rest)
		if err != nil {
			return sample{}, err
		}
		s.Labels, rest = labels, rest[n:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return sample{}, fmt.Errorf("want a value and an optional timestamp, got %d fields", len(fields))
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return sample{}, err
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `{a="x",b="y"}` at the start of s and returns the labels
// and the bytes it consumed.
func parseLabels(s string) (map[string]string, int, error) {
	labels := map[string]string{}
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, 0, fmt.Errorf("labels not closed")
		}
		if s[i] == '}' {
			return labels, i + 1, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 {
			return nil, 0, fmt.Errorf("label without '='")
		}
		name := strings.TrimSpace(s[i : i+eq])
		i += eq + 1
		if i >= len(s) || s[i] != '"' {
			return nil, 0, fmt.Errorf("label %s: value not quoted", name)
		}
		i++
		var b strings.Builder
		for ; ; i++ {
			if i >= len(s) {
				return nil, 0, fmt.Errorf("label %s: value not closed", name)
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case '\\', '"':
					b.WriteByte(s[i])
				default:
					return nil, 0, fmt.Errorf("label %s: unknown escape \\%c", name, s[i])
				}
				continue
			}
			b.WriteByte(c)
		}
		if _, dup := labels[name]; dup {
			return nil, 0, fmt.Errorf("label %s twice", name)
		}
		labels[name] = b.String()
	}
}

func parseValue(f string) (float64, error) {
	switch f {
	case "NaN":
		return math.NaN(), nil
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", f)
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
