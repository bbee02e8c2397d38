package words

import "testing"

func TestCount(t *testing.T) {
	cases := []struct {
		n      int
		noun   string
		plural []string
		want   string
	}{
		{0, "file", nil, "0 files"},
		{1, "file", nil, "1 file"},
		{2, "file", nil, "2 files"},
		{1, "weight file", nil, "1 weight file"},
		{7, "stored entry", []string{"stored entries"}, "7 stored entries"},
		{1, "stored entry", []string{"stored entries"}, "1 stored entry"},
	}
	for _, c := range cases {
		if got := Count(c.n, c.noun, c.plural...); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
