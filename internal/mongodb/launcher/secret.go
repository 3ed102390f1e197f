package launcher

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MakeSecretFile creates path, readable by its owner only (perm 0400 or 0600), holding
// encode of n random bytes, in a directory made 0700 when missing. O_EXCL: an existing file is
// kept as it is (a set restarts with its keys, a user with its password), and a file another
// process creates meanwhile is never overwritten nor written with wider permissions first.
func MakeSecretFile(path string, perm os.FileMode, n int, encode func([]byte) string) error {
	if perm&0o077 != 0 {
		return fmt.Errorf("secret file %s: mode %04o lets group or others read it", path, perm)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("secret file: %w", err)
	}
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("secret file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("secret file: %w", err)
	}
	_, err = f.WriteString(encode(raw) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // a truncated secret would be taken for a whole one next time
		return fmt.Errorf("secret file: %w", err)
	}
	return nil
}

// MakePasswordFile makes a random password (18 bytes, URL-safe base64) at path, mode 0600,
// unless the file exists.
func MakePasswordFile(path string) error {
	return MakeSecretFile(path, 0o600, 18, base64.RawURLEncoding.EncodeToString)
}

// ReadPasswordFile reads a password file: its first line, without surrounding white space. A
// file that group or others may read is refused: the password is no longer a secret.
func ReadPasswordFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return "", fmt.Errorf("%s has mode %04o: group or others may read it (chmod 600 %s)", path, m, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	if pw = strings.TrimSpace(pw); pw == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return pw, nil
}
