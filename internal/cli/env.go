package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// deploymentEnv is the whole list of environment variables shardmart reads for its settings:
// what a deployment sets once per host (addresses, data directory, secrets, backends, log
// format). Every other setting is a flag only, so a variable meant for one command cannot
// reach another command's flag of the same name (SHARDMART_SEED once broke serve, and
// SHARDMART_FORCE reached both seed and mongo move-range). README "Configuration" lists them.
var deploymentEnv = []string{
	"SHARDMART_ADDR",
	"SHARDMART_DATA_DIR",
	"SHARDMART_ADMIN_TOKEN",
	"SHARDMART_PLACEMENT",
	"SHARDMART_LOG_FORMAT",
	"SHARDMART_MONGO_URI",
	"SHARDMART_MONGO_DB",
	"SHARDMART_MONGO_MONITOR_USER",
	"SHARDMART_MONGO_MONITOR_PASSWORD",
	"SHARDMART_CASSANDRA_HOSTS",
	"SHARDMART_CASSANDRA_KEYSPACE",
	"SHARDMART_CASSANDRA_LOCAL_DC",
	"SHARDMART_CASSANDRA_USER",
	passwordEnv,
	"SHARDMART_CASSANDRA_PASSWORD_FILE",
	"SHARDMART_CASSANDRA_TLS_CA",
	"SHARDMART_CASSANDRA_TLS_CERT",
	"SHARDMART_CASSANDRA_TLS_KEY",
	"SHARDMART_CASSANDRA_JMX_TARGETS",
	"SHARDMART_CASSANDRA_JMX_USER",
	jmxPasswordEnv,
	"SHARDMART_MIGRATIONS",
}

// DeploymentEnv returns the environment variables shardmart reads for its settings, in the
// README's order: the deployment files (deploy/) are checked against it.
func DeploymentEnv() []string { return slices.Clone(deploymentEnv) }

// FlagEnv names the variable that may set flag f, "" if none does.
func FlagEnv(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// flaglessEnv are the variables of deploymentEnv read directly, with no flag: secrets that must
// not appear on a command line.
var flaglessEnv = []string{passwordEnv, jmxPasswordEnv}

// envAnnotation is the flag annotation naming the variable that may set the flag.
const envAnnotation = "shardmart/env"

// fromEnv lets the flag be set by the deployment variable env when the command line does not
// give it, and says so in its help. It panics on a variable outside deploymentEnv or an
// unknown flag: both are mistakes in the command tree, caught by any test that builds it.
func fromEnv(f *pflag.FlagSet, flag, env string) {
	if !slices.Contains(deploymentEnv, env) {
		panic("cli: " + env + " is not in deploymentEnv")
	}
	fl := f.Lookup(flag)
	if fl == nil {
		panic("cli: fromEnv: no flag --" + flag)
	}
	fl.Usage += " (env " + env + ")"
	if fl.Annotations == nil {
		fl.Annotations = map[string][]string{}
	}
	fl.Annotations[envAnnotation] = []string{env}
}

// applyEnv sets each flag of cmd marked by fromEnv from its variable, unless the command
// line gave the flag: a flag wins over the environment.
func applyEnv(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if f.Changed || len(env) == 0 {
			return
		}
		v, ok := os.LookupEnv(env[0])
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("environment %s: %w", env[0], err))
			return
		}
		f.Changed = true
	})
	return errors.Join(errs...)
}
