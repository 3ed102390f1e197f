package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// mongoUpOptions are `mongo up`'s settings.
type mongoUpOptions struct {
	Dir         string
	Nodes       int
	Port        int
	Name        string
	Shards      int // 0: a plain replica set
	ChunkSizeMB int // sharded clusters only
	Security    mongoSecurityFlags
}

// mongoSecurityFlags turn on authorization and TLS for `mongo up`.
type mongoSecurityFlags struct {
	Auth              bool
	AdminUser         string
	AdminPasswordFile string // default <dir>/admin.password, made when missing
	KeyFile           string
	TLS               bool
	TLSCAFile         string
	TLSCertKeyFile    string
}

func (f *mongoSecurityFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Auth, "auth", false, "require a login: members share a keyFile, and an admin user (root) is created through the localhost exception")
	fs.StringVar(&f.AdminUser, "admin-user", "admin", "with --auth: the admin user's name")
	fs.StringVar(&f.AdminPasswordFile, "admin-password-file", "", "with --auth: file holding the admin password (default <dir>/admin.password, made with a random password when missing)")
	fs.StringVar(&f.KeyFile, "keyfile", "", "with --auth: your own keyFile (default: made in <dir>)")
	fs.BoolVar(&f.TLS, "tls", false, "accept TLS connections only (--tlsMode requireTLS). TLS authenticates the server only: clients log in with a password and need no certificate (one they present must chain to the CA), so any host reaching the port can try a login; members authenticate to each other with the keyFile, not x.509")
	fs.StringVar(&f.TLSCAFile, "tls-ca-file", "", "with --tls: your own CA (PEM), with --tls-cert-key-file (default: a CA and a member certificate for 127.0.0.1 made in <dir>/tls)")
	fs.StringVar(&f.TLSCertKeyFile, "tls-cert-key-file", "", "with --tls: the members' certificate and key (PEM), signed by --tls-ca-file")
}

func (f mongoSecurityFlags) validate() error {
	if !f.Auth && (f.KeyFile != "" || f.AdminPasswordFile != "") {
		return errors.New("--keyfile and --admin-password-file need --auth")
	}
	if !f.TLS && (f.TLSCAFile != "" || f.TLSCertKeyFile != "") {
		return errors.New("--tls-ca-file and --tls-cert-key-file need --tls")
	}
	if (f.TLSCAFile == "") != (f.TLSCertKeyFile == "") {
		return errors.New("--tls-ca-file and --tls-cert-key-file go together (or neither: the launcher makes both)")
	}
	return nil
}

// security is the launcher's Security for the set or cluster in dir, with the admin password
// read from its file (made with a random password when it is the default one and missing).
func (f mongoSecurityFlags) security(dir string) (launcher.Security, error) {
	sec := launcher.Security{Auth: f.Auth, AdminUser: f.AdminUser, KeyFile: f.KeyFile, TLS: f.TLS,
		CAFile: f.TLSCAFile, CertKeyFile: f.TLSCertKeyFile}
	if !f.Auth {
		return sec, nil
	}
	path := f.AdminPasswordFile
	if path == "" {
		path = adminPasswordFile(dir)
		if err := launcher.MakePasswordFile(path); err != nil {
			return sec, fmt.Errorf("admin password: %w", err)
		}
	}
	pw, err := launcher.ReadPasswordFile(path)
	if err != nil {
		return sec, fmt.Errorf("--admin-password-file: %w", err)
	}
	sec.AdminPassword = pw
	return sec, nil
}

// adminPasswordFile is where `mongo up --auth` keeps the admin password by default.
func adminPasswordFile(dir string) string { return filepath.Join(dir, "admin.password") }

func newCmdMongoUp(stdio IO, runF func(context.Context, mongoUpOptions) error) *cobra.Command {
	var o mongoUpOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local replica set on 127.0.0.1 (real mongod " + launcher.DefaultVersion + "); prints its URI last",
		Long: `Starts a replica set of 1 or 3 members on 127.0.0.1 (ports --port, --port+1, …), each
with its own data directory under --dir and a 0.25 GB WiredTiger cache, waits for a PRIMARY,
and prints the connection string as the last line of standard output, for
serve --mongo-uri. The mongods keep running after the command; stop them with
'shardmart mongo down'. This is a replica set, not a sharded cluster: there is no mongos.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Nodes != 1 && o.Nodes != 3 {
				return fmt.Errorf("--nodes %d: want 1 or 3", o.Nodes)
			}
			if o.Port < 1024 || o.Port > 65535-o.Nodes-10*o.Shards {
				return fmt.Errorf("--port %d: want 1024 to %d", o.Port, 65535-o.Nodes-10*o.Shards)
			}
			if o.Shards < 0 || o.Shards > 8 {
				return fmt.Errorf("--shards %d: want 0 (a replica set) to 8", o.Shards)
			}
			if o.ChunkSizeMB < 0 || o.ChunkSizeMB > 1024 || o.ChunkSizeMB > 0 && o.Shards == 0 {
				return fmt.Errorf("--chunk-size-mb %d: want 1 to 1024, with --shards", o.ChunkSizeMB)
			}
			if err := o.Security.validate(); err != nil {
				return err
			}
			return runOrRunF(cmd.Context(), stdio, o, mongoUp, runF)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", defaultMongoDir, "set directory: per-member data, logs, pidfiles")
	f.IntVar(&o.Nodes, "nodes", 1, "replica set members: 1 or 3")
	f.IntVar(&o.Port, "port", launcher.UserPort, "port of member 0; member N listens on port+N")
	f.StringVar(&o.Name, "set", "rs0", "replica set name")
	f.IntVar(&o.Shards, "shards", 0, "start a sharded cluster instead: a config server and this many shards of --nodes members (no router: the mongod package mongo up installs has no mongos)")
	f.IntVar(&o.ChunkSizeMB, "chunk-size-mb", 0, "with --shards: the cluster's chunk size in MB (0: MongoDB's 128)")
	o.Security.bind(f)
	return cmd
}

func mongoUp(ctx context.Context, stdio IO, o mongoUpOptions) error {
	log := slog.New(slog.NewTextHandler(stdio.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if o.Shards > 0 {
		return mongoUpCluster(ctx, stdio, o, log)
	}
	if err := launcher.CheckDir(o.Dir, launcher.Topology{Members: o.Nodes, Name: o.Name, BasePort: o.Port}); err != nil {
		return err
	}
	sec, err := o.Security.security(o.Dir)
	if err != nil {
		return err
	}
	s, err := launcher.New(launcher.Options{Dir: o.Dir, Name: o.Name, Members: o.Nodes, BasePort: o.Port, Logger: log, Security: sec})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	fmt.Fprintf(stdio.Err, "starting mongod %s replica set %s (%d member(s)) in %s\n", launcher.DefaultVersion, o.Name, o.Nodes, o.Dir)
	if err := s.Up(ctx); err != nil {
		return err
	}
	for _, st := range s.Status(ctx) {
		fmt.Fprintf(stdio.Out, "  member %d %s %s\n", st.Index, st.Host, st.State)
	}
	fmt.Fprintf(stdio.Out, "replica set %s up in %s (no mongos: a replica set, not a sharded cluster; stop with: shardmart mongo down)\n",
		o.Name, time.Since(start).Round(100*time.Millisecond))
	printSecurity(stdio, o, s.Security())
	fmt.Fprintln(stdio.Out, s.URI())
	return nil
}

// mongoUpCluster starts a config server and o.Shards shards and prints the config server's URI
// last. There is no router: the application cannot serve from this cluster; it is for watching
// the balancer, zones and range moves, which tests drive through the config server.
func mongoUpCluster(ctx context.Context, stdio IO, o mongoUpOptions, log *slog.Logger) error {
	if err := launcher.CheckDir(o.Dir, launcher.Topology{Shards: o.Shards, Members: o.Nodes, BasePort: o.Port}); err != nil {
		return err
	}
	sec, err := o.Security.security(o.Dir)
	if err != nil {
		return err
	}
	c, err := launcher.NewCluster(launcher.ClusterOptions{Dir: o.Dir, Shards: o.Shards, MembersPerShard: o.Nodes,
		BasePort: o.Port, ChunkSizeMB: o.ChunkSizeMB, Logger: log, Security: sec})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	fmt.Fprintf(stdio.Err, "starting mongod %s: a config server and %d shard(s) of %d member(s) in %s\n", launcher.DefaultVersion, o.Shards, o.Nodes, o.Dir)
	if err := c.Up(ctx); err != nil {
		return err
	}
	printClusterStatus(ctx, stdio, c)
	fmt.Fprintf(stdio.Out, "sharded cluster up in %s with NO router: the mongod package has no mongos, so the application cannot serve from it; "+
		"the config server and the shards are real (balancer, zones, range moves). Stop with: shardmart mongo down\n",
		time.Since(start).Round(100*time.Millisecond))
	printSecurity(stdio, o, c.Config.Security())
	fmt.Fprintln(stdio.Out, c.ConfigURI())
	return nil
}

// printSecurity says how to log in: where the admin password and the CA are, and the next
// step (the application's own users).
func printSecurity(stdio IO, o mongoUpOptions, sec launcher.Security) {
	if sec.Auth {
		pw := o.Security.AdminPasswordFile
		if pw == "" {
			pw = adminPasswordFile(o.Dir)
		}
		fmt.Fprintf(stdio.Out, "authorization on: admin user %q (root, in admin), password in %s; members share the keyFile %s\n", sec.AdminUser, pw, sec.KeyFile)
		fmt.Fprintf(stdio.Out, "create the application's least-privilege users with: shardmart mongo users --dir %s\n", o.Dir)
	}
	if sec.TLS {
		fmt.Fprintf(stdio.Out, "TLS required: CA %s, member certificate %s (the URI below carries tls=true and tlsCAFile)\n", sec.CAFile, sec.CertKeyFile)
	}
}
