package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cli"
	"github.com/shardmart/shardmart/internal/placement"
)

const (
	systemdDir = "systemd"
	// hardeningDropIn applies to every unit named shardmart-*.service.
	hardeningDropIn = "shardmart-.service.d/hardening.conf"
	// envFile is the example of /etc/shardmart/env, which every unit reads.
	envFile = "env"
	// sysusersFile creates the user the units run as.
	sysusersFile = "shardmart.sysusers"
	// maxExposure is the highest `systemd-analyze security` exposure a service may have, in its
	// tenths (the tool prints 1.3 for 13). Without the drop-in a unit scores above 9.
	maxExposure = 20
	// traceFlush is how long serve waits for the traces' export after its HTTP shutdown
	// (runServe's deferred tracing shutdown).
	traceFlush = 5 * time.Second
	// instance stands for a template's %i.
	instance = "8081"
)

// directive is one Key=Value line of a unit file.
type directive struct {
	file, section, key, value string
	line                      int
}

// unit is a unit file's directives, the shared drop-in's after its own for a service (systemd
// applies a drop-in after the unit file).
type unit struct {
	name       string
	directives []directive
}

// values are the values of section's key, in order.
func (u unit) values(section, key string) []string {
	var out []string
	for _, d := range u.directives {
		if d.section == section && d.key == key {
			out = append(out, d.value)
		}
	}
	return out
}

// value is the effective (last) value of section's key, "" if unset.
func (u unit) value(section, key string) string {
	v := u.values(section, key)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func parseUnitFile(path string) ([]directive, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []directive
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasSuffix(line, "\\"):
			return nil, fmt.Errorf("%s:%d: continued line (this check reads one line a directive)", path, n)
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				return nil, fmt.Errorf("%s:%d: not a Key=Value line of a section: %q", path, n, line)
			}
			out = append(out, directive{file: filepath.Base(path), section: section, key: strings.TrimSpace(k), value: strings.TrimSpace(v), line: n})
		}
	}
	return out, sc.Err()
}

// unitFiles are the unit files of dir (not the drop-in directory).
func unitFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "shardmart-*.*"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(files, func(f string) bool {
		st, err := os.Stat(f)
		return err != nil || st.IsDir()
	})
}

// loadUnits reads every unit of dir, with the shared drop-in applied to each service.
func loadUnits(t *testing.T, dir string) map[string]unit {
	t.Helper()
	dropIn, err := parseUnitFile(filepath.Join(dir, hardeningDropIn))
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]unit{}
	for _, f := range unitFiles(t, dir) {
		ds, err := parseUnitFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".service") {
			ds = append(ds, dropIn...)
		}
		units[filepath.Base(f)] = unit{name: filepath.Base(f), directives: ds}
	}
	if len(units) < 6 {
		t.Fatalf("%d units in %s, want serve, serve@, monitor, repair, firehose-roll service and timer", len(units), dir)
	}
	return units
}

// specifiers replaces the systemd specifiers the units use; another one is an error.
func specifiers(u unit, s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i++; i == len(s) {
			return "", fmt.Errorf("%s: %q ends in %%", u.name, s)
		}
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'i':
			b.WriteString(instance)
		case 'd':
			b.WriteString("/run/credentials/" + u.name)
		default:
			return "", fmt.Errorf("%s: specifier %%%c in %q: not one this check knows", u.name, s[i], s)
		}
	}
	return b.String(), nil
}

// words splits a command line as systemd does for the units' quoting: blanks separate words,
// double or single quotes group them, a backslash escapes the next character.
func words(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// envFileVars reads the environment file: the names it sets and those it leaves commented
// (#NAME=), in order, and the values it sets.
func envFileVars(path string) (names []string, values map[string]string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	values = map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		set := !strings.HasPrefix(line, "#")
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "#"), "=")
		if !ok || strings.ContainsAny(k, " \t") {
			if set && strings.TrimSpace(line) != "" {
				return nil, nil, fmt.Errorf("%s:%d: neither NAME=value nor a comment: %q", path, n+1, line)
			}
			continue
		}
		if slices.Contains(names, k) {
			return nil, nil, fmt.Errorf("%s:%d: %s given twice", path, n+1, k)
		}
		names = append(names, k)
		if set {
			values[k] = v
		}
	}
	return names, values, nil
}

// verifyUnits runs `systemd-analyze verify` on a copy of dir's units whose ExecStart= binary
// is an executable that exists (verify refuses a missing one; the arguments are checked by
// checkCommand). Verify only warns about an unknown directive or section and exits 0, so any
// output at all is a failure.
func verifyUnits(t *testing.T, dir string) error {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := copyUnits(t, dir, func(s string) string { return strings.ReplaceAll(s, binary, self) })
	out, err := analyze(t, append([]string{"verify", "--man=no", "--generators=no"}, unitFiles(t, tmp)...)...)
	if err != nil || out != "" {
		return fmt.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	return nil
}

// copyUnits copies dir (one level of subdirectories: the drop-in) to a temporary directory,
// passing each file's text through edit.
func copyUnits(t *testing.T, dir string, edit func(string) string) string {
	t.Helper()
	tmp := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return os.Mkdir(filepath.Join(tmp, rel), 0o755)
		}
		if strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, rel), []byte(edit(string(b))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return tmp
}

// analyze runs systemd-analyze offline (no systemd needs to run: it reads the unit files).
func analyze(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Missing, the check fails rather than skips: a skipped check would look like a pass in CI.
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (%v): install it with `apt-get install systemd` (.ci/run does)", err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestSystemdVerify(t *testing.T) {
	if err := verifyUnits(t, systemdDir); err != nil {
		t.Fatal(err)
	}
}

// The verify check fails on a misspelt directive, in a unit and in the shared drop-in, and on
// a section that does not exist.
func TestSystemdVerifyRefusesUnknownDirectives(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"misspelt in a unit": func(s string) string {
			return strings.Replace(s, "TimeoutStopSec=30s", "TimeoutStopSecs=30s", 1)
		},
		"misspelt in the drop-in": func(s string) string {
			return strings.Replace(s, "ProtectSystem=strict", "ProtectSytem=strict", 1)
		},
		"unknown section": func(s string) string {
			return strings.Replace(s, "[Install]", "[Instal]", 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			edited := false
			dir := copyUnits(t, systemdDir, func(s string) string {
				e := edit(s)
				edited = edited || e != s
				return e
			})
			if !edited {
				t.Fatal("the edit changed no file")
			}
			err := verifyUnits(t, dir)
			if err == nil {
				t.Fatal("verify passed the edited units")
			}
			t.Log(err)
		})
	}
}

// Every service runs in the shared sandbox: `systemd-analyze security` rates each at most
// maxExposure (a unit without the drop-in is rated 9 or more: the last case).
func TestSystemdSecurity(t *testing.T) {
	units := loadUnits(t, systemdDir)
	for name := range units {
		if !strings.HasSuffix(name, ".service") {
			continue
		}
		out, err := analyze(t, "security", "--offline=true", fmt.Sprintf("--threshold=%d", maxExposure), filepath.Join(systemdDir, name))
		if err != nil {
			t.Errorf("%s: exposure above %d.%d: %v\n%s", name, maxExposure/10, maxExposure%10, err, out)
			continue
		}
		t.Log(out[strings.LastIndex(out, "\n")+1:])
	}
	bare := filepath.Join(t.TempDir(), "shardmart-bare.service")
	if err := os.WriteFile(bare, []byte("[Service]\nExecStart=/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := analyze(t, "security", "--offline=true", fmt.Sprintf("--threshold=%d", maxExposure), bare); err == nil {
		t.Errorf("an unsandboxed unit passed the threshold:\n%s", out)
	}
}

// systemdDuration reads the time spans the units use (30s, 2min, 5min).
func systemdDuration(s string) (time.Duration, error) {
	return time.ParseDuration(strings.Replace(s, "min", "m", 1))
}

// checkUnits checks the units against shardmart itself; each returned error is one finding.
func checkUnits(t *testing.T, dir string) []error {
	t.Helper()
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	units := loadUnits(t, dir)
	known := knownEnv(t)

	envNames, envValues, err := envFileVars(filepath.Join(dir, envFile))
	if err != nil {
		return append(errs, err)
	}
	// The example sets or lists every variable of the configuration reference, in its order, and no
	// other (not the launchers' nor the repair scheduler's own).
	if want := cli.DeploymentEnv(); !slices.Equal(envNames, want) {
		fail("%s lists %v, want shardmart's variables in order: %v", envFile, envNames, want)
	}
	if pl, err := placement.Parse(envValues["SHARDMART_PLACEMENT"]); err != nil {
		fail("%s: SHARDMART_PLACEMENT: %v", envFile, err)
	} else if pl.Uses(placement.SQLite) {
		fail("%s: SHARDMART_PLACEMENT %q keeps a family on the embedded store: the serve@ instances would fight over its lock", envFile, envValues["SHARDMART_PLACEMENT"])
	}
	if f := envValues["SHARDMART_LOG_FORMAT"]; f != "" && f != "text" && f != "json" {
		fail("%s: SHARDMART_LOG_FORMAT %q: text or json", envFile, f)
	}

	users, err := os.ReadFile(filepath.Join(dir, sysusersFile))
	if err != nil {
		return append(errs, err)
	}
	shutdown, err := time.ParseDuration(flagDefault(t, []string{"serve"}, "shutdown-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	for name, u := range units {
		if strings.HasSuffix(name, ".timer") {
			svc := u.value("Timer", "Unit")
			if svc == "" {
				svc = strings.TrimSuffix(name, ".timer") + ".service"
			}
			if s, ok := units[svc]; !ok {
				fail("%s starts %s, which is not here", name, svc)
			} else if s.value("Service", "Type") != "oneshot" {
				fail("%s starts %s, which is not Type=oneshot", name, svc)
			}
			if u.value("Timer", "OnCalendar") == "" {
				fail("%s: no OnCalendar=", name)
			}
			continue
		}
		if user := u.value("Service", "User"); user == "" || !strings.Contains(string(users), "u "+user+" ") {
			fail("%s: runs as %q, which %s does not create", name, user, sysusersFile)
		}
		if ef := u.value("Service", "EnvironmentFile"); ef != "/etc/shardmart/env" {
			fail("%s: EnvironmentFile=%q, want /etc/shardmart/env (the example: %s)", name, ef, envFile)
		}
		for _, e := range u.values("Service", "Environment") {
			k, _, _ := strings.Cut(e, "=")
			if err := checkEnvName(k, known); err != nil {
				fail("%s: %v", name, err)
			}
		}
		starts := u.values("Service", "ExecStart")
		if len(starts) != 1 {
			fail("%s: %d ExecStart= lines, want 1", name, len(starts))
			continue
		}
		line, err := specifiers(u, starts[0])
		if err != nil {
			fail("%v", err)
			continue
		}
		argv, err := words(line)
		if err != nil {
			fail("%s: %v", name, err)
			continue
		}
		if err := checkCommand(argv); err != nil {
			fail("%s: %v", name, err)
		}
		if u.value("Service", "Type") == "oneshot" {
			continue
		}
		// A long-running part: restarted on failure, stopped with SIGTERM and the time it needs.
		if r := u.value("Service", "Restart"); r != "on-failure" {
			fail("%s: Restart=%q, want on-failure", name, r)
		}
		if k := u.value("Service", "KillSignal"); k != "SIGTERM" {
			fail("%s: KillSignal=%q, want SIGTERM (serve and monitor shut down gracefully on it)", name, k)
		}
		stop, err := systemdDuration(u.value("Service", "TimeoutStopSec"))
		if err != nil {
			fail("%s: TimeoutStopSec: %v", name, err)
		} else if argv[1] == "serve" && stop < shutdown+traceFlush {
			fail("%s: TimeoutStopSec=%s is shorter than serve's --shutdown-timeout (%s) plus the traces' flush (%s)", name, stop, shutdown, traceFlush)
		}
		if argv[1] == "serve" {
			// The embedded store's directory must be writable under ProtectSystem=strict.
			dataDir := envValues["SHARDMART_DATA_DIR"]
			writable := false
			for _, d := range append(u.values("Service", "StateDirectory"), u.values("Service", "ReadWritePaths")...) {
				if p := filepath.Join("/var/lib", d); dataDir == p || dataDir == d {
					writable = true
				}
			}
			if !writable {
				fail("%s: SHARDMART_DATA_DIR=%s is neither its StateDirectory= nor in ReadWritePaths=", name, dataDir)
			}
		}
	}
	return errs
}

func TestSystemdUnitsMatchShardmart(t *testing.T) {
	for _, err := range checkUnits(t, systemdDir) {
		t.Error(err)
	}
}

// The semantic checks find a flag serve does not have, a variable nothing reads, a variable
// missing from the environment file, a stop timeout shorter than serve's shutdown, a timer
// without its service, a data directory that is not writable, a stray argument, and a
// placement the several serve instances cannot share.
func TestSystemdChecksRefuse(t *testing.T) {
	for name, c := range map[string]struct{ file, from, to, want string }{
		"unknown flag":        {"shardmart-serve.service", "serve --seed=false", "serve --sead=false", "unknown flag: --sead"},
		"unknown variable":    {"shardmart-repair.service", "Environment=SHARDMART_CACHE_DIR=", "Environment=SHARDMART_CACHE=/x\nEnvironment=SHARDMART_CACHE_DIR=", "SHARDMART_CACHE is read by nothing"},
		"variable missing":    {envFile, "#SHARDMART_MIGRATIONS=false\n", "", "want shardmart's variables in order"},
		"short stop timeout":  {"shardmart-serve@.service", "TimeoutStopSec=30s", "TimeoutStopSec=10s", "shorter than serve's --shutdown-timeout (15s)"},
		"timer without unit":  {"shardmart-firehose-roll.timer", "[Timer]", "[Timer]\nUnit=shardmart-roll.service", "starts shardmart-roll.service, which is not here"},
		"data dir read-only":  {"shardmart-serve.service", "StateDirectory=shardmart", "StateDirectory=shardmart-cache", "neither its StateDirectory= nor in ReadWritePaths="},
		"not a shardmart cmd": {"shardmart-monitor.service", "shardmart monitor --addr=:9108", "shardmart monitor extra", `unknown command "extra"`},
		"user not created":    {hardeningDropIn, "User=shardmart", "User=shop", `runs as "shop", which`},
		"placement on sqlite": {envFile, "SHARDMART_PLACEMENT=orders=mongo,", "SHARDMART_PLACEMENT=orders=sqlite,", "keeps a family on the embedded store"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyUnits(t, systemdDir, func(s string) string { return s })
			p := filepath.Join(dir, c.file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), c.from) {
				t.Fatalf("%s has no %q", c.file, c.from)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), c.from, c.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			errs := checkUnits(t, dir)
			if len(errs) == 0 || slices.ContainsFunc(errs, func(err error) bool { return !strings.Contains(err.Error(), c.want) }) {
				t.Fatalf("findings %v, want only ones saying %q", errs, c.want)
			}
			t.Log(errs[0])
		})
	}
}
