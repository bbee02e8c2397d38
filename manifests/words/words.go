// Package words spells counts in the messages users read: "1 file",
// "2 files", never "1 files".
package words

import "strconv"

// Count is n and the noun, plural unless n is 1: Count(1, "file") is
// "1 file", Count(3, "file") "3 files". A noun whose plural is not noun+"s"
// passes it as plural.
func Count(n int, noun string, plural ...string) string {
	if n == 1 {
		return "1 " + noun
	}
	if len(plural) > 0 {
		return strconv.Itoa(n) + " " + plural[0]
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
