package cli

import "github.com/spf13/cobra"

// newCmdBackup groups the backups of each store: one subcommand per engine, each taking that
// engine's own consistent copy and sealing it with a manifest (internal/backup).
func newCmdBackup(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Take a consistent backup of a store into an empty directory, sealed with a checksum manifest",
	}
	cmd.AddCommand(newCmdBackupSQLite(stdio, nil), newCmdBackupMongo(stdio, nil), newCmdBackupCassandra(stdio, nil))
	return cmd
}

// newCmdRestore groups the restores: each loads a sealed backup into an empty store and
// verifies what it loaded against the manifest, exiting non-zero on any difference.
func newCmdRestore(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Restore a sealed backup into an empty store and verify it against the manifest",
	}
	cmd.AddCommand(newCmdRestoreSQLite(stdio, nil), newCmdRestoreMongo(stdio, nil), newCmdRestoreCassandra(stdio, nil))
	return cmd
}
