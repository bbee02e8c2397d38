package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// tokenFileLimit bounds the token file: a token is under 100 bytes.
const tokenFileLimit = 64 << 10

// FindToken finds the Hugging Face token as the Hugging Face tools do:
// $HF_TOKEN, else the file the Hugging Face CLI's login writes ($HF_TOKEN_PATH,
// else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else
// ~/.cache/huggingface/token), trimmed. No file means no token. The token
// itself never appears in an error.
func FindToken() (string, error) {
	if t := cleanToken(os.Getenv("HF_TOKEN")); t != "" {
		return t, checkToken(t, "$HF_TOKEN")
	}
	path := TokenPath()
	if path == "" {
		return "", nil
	}
	// Read as a regular file of at most 64 KiB: a FIFO or a device there
	// would block the open or the read forever. It is refused, not skipped:
	// the user put something at the token's path, and going on without the
	// token would fail later as a 401 or a "not found" for a gated model.
	b, err := st.ReadRegularFile(path, tokenFileLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the Hugging Face token file: %w (set $HF_TOKEN, or put the token in it as a plain file)", err)
	}
	t := cleanToken(string(b))
	return t, checkToken(t, "the token file "+path)
}

// checkToken refuses a token that cannot go into an HTTP header: a control
// character, a space or a non-ASCII byte inside it (a paste gone wrong)
// would fail every request as if the network did. The token itself is
// never shown.
func checkToken(t, from string) error {
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f {
			what := "a control character"
			switch {
			case c == ' ':
				what = "a space"
			case c >= 0x80:
				what = "a non-ASCII byte"
			}
			return fmt.Errorf("the Hugging Face token (from %s) has %s at position %d; a token is printable ASCII: set it again", from, what, i+1)
		}
	}
	return nil
}

// TokenPath is where the Hugging Face CLI keeps the token of its login.
func TokenPath() string {
	if p := os.Getenv("HF_TOKEN_PATH"); p != "" {
		return p
	}
	home := hfHome()
	if home == "" {
		return ""
	}
	return filepath.Join(home, "token")
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
func hfHome() string {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// cleanToken drops line breaks and surrounding space, as the Hugging Face tools do.
func cleanToken(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(s))
}

// Offline reports whether HF_HUB_OFFLINE asks for no network use (1, ON, YES or TRUE).
func Offline() bool {
	switch strings.ToUpper(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}
