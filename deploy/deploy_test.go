// Package deploy checks the service definitions in this directory: the systemd units
// (systemd/) with `systemd-analyze verify` and `systemd-analyze security`, the Kubernetes
// manifests (kubernetes/) decoded strictly into the official API types. Both are also checked
// against the command tree itself: every command line must parse with shardmart's own flags,
// and every variable set must be one shardmart reads. None of it starts a service.
package deploy

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/cli"
	"github.com/shardmart/shardmart/internal/serverproc"
)

// binary is where every unit and manifest runs shardmart from.
const binary = "/usr/local/bin/shardmart"

// otherProgramsEnv are the variables outside shardmart's that the files may set: Maven (which
// `cassandra fetch` runs) keeps its repository under HOME.
var otherProgramsEnv = []string{"HOME"}

// The repair scheduler is being extended beside these files so that it reaches the nodes of a
// production cluster: a file of targets and a JMX login. repairAssumed are the flag and
// variables the repair unit and manifest assume for it. Until `cassandra repair` has a flag
// beyond repairFlagsBefore they are accepted unchecked (and logged); from then on they are
// checked like every other name, so a name the extension does not have fails.
var (
	repairCommand      = []string{"cassandra", "repair"}
	repairFlagsBefore  = []string{"cassandra-dir", "keyspace", "tables", "skip", "incremental", "schedule"}
	repairAssumedFlags []string
	repairAssumedEnv   []string
)

func rootCmd() *cobra.Command {
	return cli.NewRootCmd(cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
}

// commandFlags lists the flags cmd accepts, its own and those it inherits.
func commandFlags(cmd *cobra.Command) []string {
	var names []string
	add := func(f *pflag.Flag) { names = append(names, f.Name) }
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return names
}

// repairPending reports whether the repair command still lacks the extension.
func repairPending(t *testing.T) bool {
	t.Helper()
	cmd, _, err := rootCmd().Find(repairCommand)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range commandFlags(cmd) {
		if f != "help" && !slices.Contains(repairFlagsBefore, f) {
			return false
		}
	}
	return true
}

// knownEnv are the variables the files may set: those shardmart reads for its settings, the
// launchers' cache directory, and, while the repair extension is pending, its assumed ones.
func knownEnv(t *testing.T) []string {
	t.Helper()
	env := append(cli.DeploymentEnv(), serverproc.CacheDirEnv)
	env = append(env, otherProgramsEnv...)
	if repairPending(t) {
		t.Logf("cassandra repair has no flag beyond %v yet: accepting the assumed %v and --%v unchecked",
			repairFlagsBefore, repairAssumedEnv, repairAssumedFlags)
		env = append(env, repairAssumedEnv...)
	}
	return env
}

// checkEnvName fails for a variable no program in the deployment reads.
func checkEnvName(name string, known []string) error {
	if !slices.Contains(known, name) {
		return fmt.Errorf("variable %s is read by nothing shardmart runs (known: %s)", name, strings.Join(known, ", "))
	}
	return nil
}

// checkCommand parses argv with the real command tree: the binary's path, a runnable
// subcommand, flags it has with values they accept, no stray arguments, and a --schedule cron
// expression can parse. pendingRepair drops the repair extension's assumed flags first.
func checkCommand(argv []string, pendingRepair bool) error {
	if len(argv) == 0 || argv[0] != binary {
		return fmt.Errorf("%q: want %s and a command", argv, binary)
	}
	args := argv[1:]
	root := rootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return fmt.Errorf("%q: %w", args, err)
	}
	if cmd == root || !cmd.Runnable() {
		return fmt.Errorf("%q: %q is not a command that runs", args, cmd.CommandPath())
	}
	if pendingRepair && slices.Equal(args[:min(len(args), len(repairCommand))], repairCommand) {
		rest = slices.DeleteFunc(slices.Clone(rest), func(a string) bool {
			for _, f := range repairAssumedFlags {
				if a == "--"+f || strings.HasPrefix(a, "--"+f+"=") {
					return true
				}
			}
			return false
		})
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s %q: %w", cmd.CommandPath(), rest, err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("%s %q: %w", cmd.CommandPath(), rest, err)
	}
	if f := cmd.Flags().Lookup("schedule"); f != nil && f.Changed {
		if _, err := cron.ParseStandard(f.Value.String()); err != nil {
			return fmt.Errorf("%s --schedule %q: %w", cmd.CommandPath(), f.Value.String(), err)
		}
	}
	return nil
}

// commandEnv lists the variables argv's command reads through its flags (and, while the repair
// extension is pending, the repair command's assumed ones). An unknown command reads none.
func commandEnv(argv []string, pendingRepair bool) []string {
	if len(argv) < 2 {
		return nil
	}
	cmd, _, err := rootCmd().Find(argv[1:])
	if err != nil {
		return nil
	}
	var env []string
	visit := func(f *pflag.Flag) {
		if e := cli.FlagEnv(f); e != "" {
			env = append(env, e)
		}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if pendingRepair && slices.Equal(argv[1:min(len(argv), 1+len(repairCommand))], repairCommand) {
		env = append(env, repairAssumedEnv...)
	}
	return env
}

// flagDefault is the default of a command's flag, as its --help shows it.
func flagDefault(t *testing.T, command []string, flag string) string {
	t.Helper()
	cmd, _, err := rootCmd().Find(command)
	if err != nil {
		t.Fatal(err)
	}
	f := cmd.Flags().Lookup(flag)
	if f == nil {
		t.Fatalf("%s has no --%s", cmd.CommandPath(), flag)
	}
	return f.DefValue
}

// TestCheckCommandRefuses proves the command-line check can fail: a misspelt flag, a flag of
// another command, a stray argument, a group that does not run, a bad cron expression, another
// binary.
func TestCheckCommandRefuses(t *testing.T) {
	for _, argv := range [][]string{
		{binary, "serve", "--sead=false"},
		{binary, "monitor", "--placement=orders=mongo"},
		{binary, "serve", "now"},
		{binary, "mongo", "firehose"},
		{binary, "cassandra", "repair", "--schedule=0 3 * *"},
		{"/usr/bin/shardmart", "serve"},
	} {
		if err := checkCommand(argv, false); err == nil {
			t.Errorf("%q: accepted, want an error", argv)
		} else {
			t.Logf("%q: %v", argv, err)
		}
	}
	if err := checkCommand([]string{binary, "mongo", "firehose", "roll", "--collection=events"}, false); err != nil {
		t.Errorf("a valid command refused: %v", err)
	}
	if err := checkEnvName("SHARDMART_SEED", knownEnv(t)); err == nil {
		t.Error("SHARDMART_SEED (read by nothing) accepted")
	}
	if err := errors.Join(checkEnvName("SHARDMART_DATA_DIR", knownEnv(t)), checkEnvName(serverproc.CacheDirEnv, knownEnv(t))); err != nil {
		t.Error(err)
	}
}
