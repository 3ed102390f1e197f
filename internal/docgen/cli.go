package main

import (
	"bytes"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/cli"
)

// genCLI renders one page per command with cobra's own Markdown generator.
func genCLI(_ string, pages map[string][]byte) error {
	root := cli.NewRootCmd(cli.IO{})
	root.DisableAutoGenTag = true // the tag carries today's date
	var visit func(c *cobra.Command) error
	visit = func(c *cobra.Command) error {
		c.DisableAutoGenTag = true
		stableDefaults(c.Flags())
		stableDefaults(c.PersistentFlags())
		var b bytes.Buffer
		if err := doc.GenMarkdownCustom(c, &b, func(s string) string { return s }); err != nil {
			return err
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		pages[path.Join(refDir, "cli", name)] = b.Bytes()
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
				continue
			}
			if err := visit(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return visit(root)
}

// stableDefaults rewrites defaults that name this machine's directories, so the pages are the
// same wherever they are generated.
func stableDefaults(fs *pflag.FlagSet) {
	var repl []string
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		repl = append(repl, home, "$HOME")
	}
	if wd, err := os.Getwd(); err == nil && wd != "/" {
		repl = append(repl, wd, ".")
	}
	if tmp := os.TempDir(); tmp != "/" {
		repl = append(repl, tmp, "$TMPDIR")
	}
	r := strings.NewReplacer(repl...)
	fs.VisitAll(func(f *pflag.Flag) { f.DefValue = r.Replace(f.DefValue) })
}
