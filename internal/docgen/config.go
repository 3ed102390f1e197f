package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/cli"
)

// envFlag is one flag a deployment variable sets.
type envFlag struct {
	command string // "serve", "cassandra repair"
	flag    *pflag.Flag
}

// genConfig renders the deployment variables (cli.DeploymentEnv, the one list the code reads)
// with the flags each one sets, found by walking the command tree.
func genConfig(_ string, pages map[string][]byte) error {
	root := cli.NewRootCmd(cli.IO{})
	byEnv := map[string][]envFlag{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		stableDefaults(c.LocalFlags())
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if env := cli.FlagEnv(f); env != "" {
				cmd := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
				byEnv[env] = append(byEnv[env], envFlag{cmd, f})
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	var b strings.Builder
	b.WriteString(header("Configuration variables", "`deploymentEnv` in internal/cli/env.go and the flags that read each variable"))
	b.WriteString("The environment sets only what a deployment sets once per host; every other setting is a flag\n" +
		"([CLI reference](cli/shardmart.md)). A flag given on the command line wins over its variable.\n" +
		"No other `SHARDMART_*` variable sets a flag.\n\n")
	b.WriteString("| variable | flags it sets | default | meaning |\n|---|---|---|---|\n")
	for _, env := range cli.DeploymentEnv() {
		flags := byEnv[env]
		if len(flags) == 0 {
			usage := cli.FlaglessEnvUsage(env)
			if usage == "" {
				return fmt.Errorf("%s sets no flag and has no description in internal/cli/env.go", env)
			}
			fmt.Fprintf(&b, "| `%s` | none: read directly, so it never appears on a command line | none | %s |\n", env, text(usage))
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", env, flagList(flags), defaults(flags), text(meaning(primary(flags).flag, env)))
	}
	b.WriteString("\nThe local launchers (`shardmart cassandra up`, `shardmart mongo up`) also read " +
		"`SHARDMART_CACHE_DIR` (where their downloads are cached, `~/.cache/shardmart` by default) and " +
		"`SHARDMART_MONGOD` (a mongod binary to use instead of the downloaded one); " +
		"`SHARDMART_CASSANDRA_CDS=off` starts local Cassandra nodes without their class-data sharing archive. " +
		"Tracing reads the standard `OTEL_TRACES_SAMPLER*` and `OTEL_EXPORTER_OTLP_*` variables " +
		"(see `--trace-sample-ratio` and `--otlp-endpoint` in [serve](cli/shardmart_serve.md)).\n")
	pages[path.Join(refDir, "configuration.md")] = []byte(b.String())
	return nil
}

// flagList groups the commands by flag name: "serve, seed `--data-dir`; mongo `--uri`".
func flagList(flags []envFlag) string {
	var names []string
	cmds := map[string][]string{}
	for _, f := range flags {
		if !slices.Contains(names, f.flag.Name) {
			names = append(names, f.flag.Name)
		}
		cmds[f.flag.Name] = append(cmds[f.flag.Name], f.command)
	}
	var parts []string
	for _, n := range names {
		parts = append(parts, strings.Join(cmds[n], ", ")+" `--"+n+"`")
	}
	return strings.Join(parts, "; ")
}

// defaults is the flags' default, or the most common one followed by the commands whose
// default differs.
func defaults(flags []envFlag) string {
	show := func(d string) string {
		if strings.HasPrefix(d, "[") && strings.HasSuffix(d, "]") { // a list flag: "[a,b]", "[]"
			d = d[1 : len(d)-1]
		}
		if d == "" {
			return "none"
		}
		return "`" + cell(d) + "`"
	}
	var seen []string
	count := map[string]int{}
	for _, f := range flags {
		d := show(f.flag.DefValue)
		if count[d] == 0 {
			seen = append(seen, d)
		}
		count[d]++
	}
	common := seen[0]
	for _, d := range seen {
		if count[d] > count[common] {
			common = d
		}
	}
	var others []string
	for _, d := range seen {
		if d == common {
			continue
		}
		var cmds []string
		for _, f := range flags {
			if show(f.flag.DefValue) == d {
				cmds = append(cmds, f.command)
			}
		}
		others = append(others, strings.Join(cmds, ", ")+": "+d)
	}
	if len(others) == 0 {
		return common
	}
	return common + " (" + strings.Join(others, "; ") + ")"
}

// primary is the flag whose help describes the variable: serve's when serve reads it.
func primary(flags []envFlag) envFlag {
	for _, f := range flags {
		if f.command == "serve" {
			return f
		}
	}
	return flags[0]
}

// meaning is the flag's help without the "(env ...)" note the table already gives.
func meaning(f *pflag.Flag, env string) string {
	return strings.TrimSpace(strings.TrimSuffix(f.Usage, " (env "+env+")"))
}
