package report

import (
	"bytes"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mtpconv/mtpconv/manifests/words"
)

// VerdictLines are the three verdicts as people read them, one line each.
func (r *Report) VerdictLines() []string {
	s := r.Summary
	v := s.Verdict
	draft := "draft  " + v.Draft
	switch v.Draft {
	case DraftNotDrafting:
		draft += ": the runtime drafted nothing (no verify loop ran: is the head loaded, and MTP switched on?)"
	case DraftNearZero:
		draft += fmt.Sprintf(": acceptance %s of %d drafted; a broken, mis-declared or mis-quantized head (check it with `mtpconv inspect --strict`)", pct(s.Acceptance), s.Drafted)
	default:
		draft += fmt.Sprintf(": acceptance %s (%d of %d drafted)", pct(s.Acceptance), s.Accepted, s.Drafted)
	}
	speed := "speed  " + v.Speed
	if s.Speedup.Median > 0 {
		speed += fmt.Sprintf(": best draft length %d, ×%.2f [%.2f–%.2f]", s.BestDraftTokens, s.Speedup.Median, s.Speedup.Low, s.Speedup.High)
	}
	if v.Speed == SpeedNoGain && s.Speedup.Median > 0 {
		speed += " (the band holds 1: within noise)"
	}
	out := "output " + v.Output
	so := s.SameOutput
	switch v.Output {
	case OutputIdentical:
		out += fmt.Sprintf(": %d of %d prompts answered the same with MTP (greedy)", *so.Identical, so.Prompts)
	case OutputChanged:
		out += fmt.Sprintf(": %d of %d prompts answered differently with MTP (greedy)", so.Prompts-*so.Identical, so.Prompts)
	default:
		out += ": " + so.Why
	}
	return []string{draft, speed, out}
}

// Table is the report for people.
func (r *Report) Table() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "mtpconv bench: %s (version %s), model %s", r.Runtime, r.RuntimeVersion, r.Model)
	if r.Head != "" {
		fmt.Fprintf(&b, ", head %s", r.Head)
	}
	st := r.Settings
	src := "from the file"
	if st.Builtin {
		src = "built-in"
	}
	mode := "greedy"
	if !st.Greedy {
		mode = "sampling"
	}
	fmt.Fprintf(&b, "\n%s (%s, sha256 %.12s), up to %s, %s, concurrency %d, %s", words.Count(st.Prompts, "prompt"), src, r.PromptsSHA256,
		words.Count(st.MaxTokens, "token"), words.Count(st.Repeats, "repeat"), st.Concurrency, mode)
	if st.Context > 0 {
		fmt.Fprintf(&b, ", padded to about %d tokens", st.Context)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "arm\tdraft\ttok/s median\tmin–max\tTTFT ms\tpeak RSS\tdrafted\taccepted\tacceptance\tper position\taccepted/step\tspeedup\tband\t")
	for _, sp := range r.Speed {
		row := []string{sp.Arm, "-", f2(sp.TokensPerSecond.Median), f2(sp.TokensPerSecond.Min) + "–" + f2(sp.TokensPerSecond.Max),
			fmt.Sprintf("%.0f", sp.TTFTMillis), mib(sp.PeakRSSBytes), "", "", "", "", "", "", ""}
		for _, l := range r.Sweep {
			if sp.Arm == "mtp" && l.DraftTokens == sp.DraftTokens {
				row[1] = fmt.Sprint(l.DraftTokens)
				row[6], row[7], row[8] = fmt.Sprint(l.Drafted), fmt.Sprint(l.Accepted), pct(l.Acceptance)
				row[9] = perPos(l.AcceptancePerPosition)
				if l.MeanAcceptedPerStep != nil {
					row[10] = f2(*l.MeanAcceptedPerStep)
				}
				row[11] = "×" + f2(l.Speedup.Median)
				row[12] = f2(l.Speedup.Low) + "–" + f2(l.Speedup.High)
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	if len(r.Classes) > 0 {
		fmt.Fprintf(&b, "\nby class, draft length %d:\n", r.Summary.BestDraftTokens)
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "class\tprompts\tdrafted\taccepted\tacceptance\tspeedup\t")
		for _, c := range r.Classes {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t×%s\t\n", c.Class, c.Prompts, c.Drafted, c.Accepted, pct(c.Acceptance), f2(c.Speedup))
		}
		tw.Flush()
	}
	if ds := r.Summary.SameOutput.Divergences; len(ds) > 0 {
		b.WriteString("\nfirst divergences (⟨ marks where the answers part):\n")
		for _, d := range ds {
			at := fmt.Sprintf("byte %d", d.ByteIndex)
			if d.TokenIndex != nil {
				at = fmt.Sprintf("token %d", *d.TokenIndex)
			}
			other := d.Arm
			if d.Arm == "mtp" {
				other = fmt.Sprintf("mtp(%d)", d.DraftTokens)
			}
			fmt.Fprintf(&b, "  prompt %s, %s, repeat %d, at %s:\n    plain:   %q\n    %-8s %q\n", d.Prompt, other, d.Repeat+1, at, d.Plain, other+":", d.Other)
		}
	}
	b.WriteString("\n")
	for _, l := range r.VerdictLines() {
		b.WriteString("verdict: " + l + "\n")
	}
	return b.String()
}

// CardHeading starts the card's MTP performance section.
const CardHeading = "## MTP performance"

// CardSection is the card's "MTP performance" section, from its heading to a blank line.
func (r *Report) CardSection(reportFile, reportSHA256 string) string {
	var b strings.Builder
	b.WriteString(CardHeading + "\n\n")
	mode := "greedy"
	if !r.Settings.Greedy {
		mode = "sampling"
	}
	fmt.Fprintf(&b, "Measured by `mtpconv bench` with %s (version %s) on %s (%s): %s, up to %s, %s, concurrency %d, %s.\n",
		r.Runtime, r.RuntimeVersion, hw(r.Hardware), words.Count(r.Hardware.CPUs, "CPU"), words.Count(r.Settings.Prompts, "prompt"),
		words.Count(r.Settings.MaxTokens, "token"), words.Count(r.Settings.Repeats, "repeat"), r.Settings.Concurrency, mode)
	if len(r.Settings.RuntimeArgs) > 0 {
		fmt.Fprintf(&b, "Runtime arguments: `%s`.\n", strings.Join(r.Settings.RuntimeArgs, " "))
	}
	b.WriteString("\n| arm | draft tokens | tokens/s (median, min–max) | acceptance | accepted/step | speedup (band) |\n|---|---|---|---|---|---|\n")
	for _, sp := range r.Speed {
		acc, step, speed, k := "", "", "", "–"
		for _, l := range r.Sweep {
			if sp.Arm == "mtp" && l.DraftTokens == sp.DraftTokens {
				k, acc, speed = fmt.Sprint(l.DraftTokens), pct(l.Acceptance), fmt.Sprintf("×%s (%s–%s)", f2(l.Speedup.Median), f2(l.Speedup.Low), f2(l.Speedup.High))
				if l.MeanAcceptedPerStep != nil {
					step = f2(*l.MeanAcceptedPerStep)
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s (%s–%s) | %s | %s | %s |\n", sp.Arm, k, f2(sp.TokensPerSecond.Median), f2(sp.TokensPerSecond.Min), f2(sp.TokensPerSecond.Max), acc, step, speed)
	}
	b.WriteString("\n")
	for _, l := range r.VerdictLines() {
		fmt.Fprintf(&b, "- %s\n", strings.TrimSpace(l))
	}
	fmt.Fprintf(&b, "\nThe whole report is `%s` (sha256 `%s`, recorded in the manifest). These numbers are this machine's: run `mtpconv bench` on yours.\n", reportFile, reportSHA256)
	return b.String()
}

// ReplaceSection puts section (a "## " heading and its body) into a markdown
// card: in place of the section with the same heading when there is one,
// else before the heading named before (appended when that is absent too).
// Every other byte is kept.
func ReplaceSection(card []byte, section, before string) []byte {
	heading := section[:strings.IndexByte(section+"\n", '\n')]
	body := strings.TrimRight(section, "\n") + "\n"
	if i := headingAt(card, heading); i >= 0 {
		end := len(card)
		if j := bytes.Index(card[i+len(heading):], []byte("\n## ")); j >= 0 {
			end = i + len(heading) + j + 1
			body += "\n"
		}
		return append(append(append([]byte{}, card[:i]...), body...), card[end:]...)
	}
	if i := headingAt(card, before); i >= 0 {
		return append(append(append([]byte{}, card[:i]...), body+"\n"...), card[i:]...)
	}
	out := append([]byte{}, card...)
	if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
		if !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		out = append(out, '\n')
	}
	return append(out, body...)
}

// Section is the section of card under heading (through the line before the next "## " heading), or "".
func Section(card []byte, heading string) string {
	i := headingAt(card, heading)
	if i < 0 {
		return ""
	}
	end := len(card)
	if j := bytes.Index(card[i+len(heading):], []byte("\n## ")); j >= 0 {
		end = i + len(heading) + j + 1
	}
	return string(card[i:end])
}

// headingAt is the offset of a line that is exactly heading, or -1.
func headingAt(card []byte, heading string) int {
	if bytes.HasPrefix(card, []byte(heading+"\n")) {
		return 0
	}
	if i := bytes.Index(card, []byte("\n"+heading+"\n")); i >= 0 {
		return i + 1
	}
	return -1
}

func hw(h Hardware) string {
	if h.CPU != "" {
		return h.CPU
	}
	return h.OS + "/" + h.Arch
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

func mib(b int64) string {
	if b <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func perPos(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}
