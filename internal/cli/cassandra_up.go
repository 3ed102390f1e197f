package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// cassandraUpOptions are `cassandra up`'s settings.
type cassandraUpOptions struct {
	Cluster  cassandraClusterOptions
	Nodes    int
	BaseAddr string
	HeapMB   int
	// PaxosVariant is cassandra.yaml's paxos_variant ("": Cassandra's default).
	PaxosVariant string
	// DCs data centres of NodesPerDC nodes each ("3" or, per DC, "3,1").
	DCs        int
	NodesPerDC []int
	Auth       bool
	TLS        bool
	// TLSKeystore and TLSCA are the user's own PEM files (else the launcher makes them).
	TLSKeystore, TLSCA string
	RequireClientCert  bool
}

func newCmdCassandraUp(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraUpOptions) error) *cobra.Command {
	var o cassandraUpOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster (jars from Maven Central) and wait until every node sees the others",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Cluster = *cl
			if o.DCs > 1 {
				if cmd.Flags().Changed("nodes") {
					return errors.New("--nodes with --dcs: give --nodes-per-dc instead")
				}
				if len(o.NodesPerDC) == 1 {
					for len(o.NodesPerDC) < o.DCs {
						o.NodesPerDC = append(o.NodesPerDC, o.NodesPerDC[0])
					}
				}
				if len(o.NodesPerDC) != o.DCs {
					return fmt.Errorf("--nodes-per-dc %v: want one count, or one per data centre (%d)", o.NodesPerDC, o.DCs)
				}
				for _, n := range o.NodesPerDC {
					if n < 1 || n > 3 {
						return fmt.Errorf("--nodes-per-dc %v: want 1 to 3 nodes per data centre", o.NodesPerDC)
					}
				}
			} else if o.Nodes != 1 && o.Nodes != 3 {
				return fmt.Errorf("--nodes %d: want 1 or 3", o.Nodes)
			}
			if (o.TLSKeystore == "") != (o.TLSCA == "") {
				return errors.New("--tls-keystore and --tls-ca go together")
			}
			return runOrRunF(cmd.Context(), stdio, o, cassandraUp, runF)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 1, "number of nodes: 1 or 3")
	f.StringVar(&o.BaseAddr, "base-addr", launcher.UserAddr, "address of node 1; node N listens on the next addresses")
	f.IntVar(&o.HeapMB, "heap-mb", 512, "JVM heap per node, MiB")
	f.IntVar(&o.DCs, "dcs", 1, "data centres (dc1, dc2, ...; GossipingPropertyFileSnitch); 1 keeps datacenter1")
	f.IntSliceVar(&o.NodesPerDC, "nodes-per-dc", []int{1}, "with --dcs 2+: nodes per data centre, one count for all or one per DC (3,1)")
	f.BoolVar(&o.Auth, "auth", false, "require a login: PasswordAuthenticator + CassandraAuthorizer (superuser cassandra/cassandra; change it for anything but local use)")
	f.BoolVar(&o.TLS, "tls", false, "client traffic over TLS only; the launcher makes a CA and certificates under <cassandra-dir>/tls unless --tls-keystore/--tls-ca")
	f.StringVar(&o.TLSKeystore, "tls-keystore", "", "your own PEM keystore for the nodes: unencrypted PKCS#8 key followed by the certificate chain (implies --tls)")
	f.StringVar(&o.TLSCA, "tls-ca", "", "your own PEM CA the nodes trust (with --tls-keystore)")
	f.BoolVar(&o.RequireClientCert, "require-client-cert", false, "require a client certificate signed by the CA (mTLS)")
	f.StringVar(&o.PaxosVariant, "paxos-variant", "", "cassandra.yaml paxos_variant, v1 or v2 (default: Cassandra's, v1); a restart with another value rewrites it")
	return cmd
}

func cassandraUp(ctx context.Context, stdio IO, o cassandraUpOptions) error {
	// The launcher refuses a directory holding a cluster of another size or on other addresses.
	lo := launcher.Options{Dir: o.Cluster.Dir, Nodes: o.Nodes, BaseAddr: o.BaseAddr, HeapMB: o.HeapMB, Logger: cassandraLogger(stdio),
		Auth: o.Auth, TLS: o.TLS, RequireClientCert: o.RequireClientCert, PaxosVariant: o.PaxosVariant}
	if o.DCs > 1 {
		lo.Nodes, lo.DCNodes = 0, o.NodesPerDC
	}
	if o.TLSKeystore != "" {
		lo.UserTLS = &launcher.TLSFiles{Keystore: o.TLSKeystore, CA: o.TLSCA}
	}
	c, err := launcher.New(lo)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	start := time.Now()
	if err := c.Up(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "cassandra %s: %d node(s) up in %s\n", launcher.DefaultVersion, len(c.Nodes()), time.Since(start).Round(100*time.Millisecond))
	boot := c.BootTimes()
	for _, n := range c.Nodes() {
		if d, ok := boot[n.Index]; ok {
			fmt.Fprintf(stdio.Out, "  node%d %s:%d %s boot %s\n", n.Index+1, n.Addr, launcher.CQLPort, n.DC, d.Round(100*time.Millisecond))
		}
	}
	fmt.Fprintf(stdio.Out, "contact points: %s (stop with: shardmart cassandra down)\n", strings.Join(c.Hosts(), ","))
	if o.Auth {
		fmt.Fprintf(stdio.Out, "login: superuser %s, password %s (local use only; create the shop's role, docs/production.md)\n", launcher.SuperUser, launcher.SuperPassword)
	}
	if f := c.TLS(); f != nil {
		fmt.Fprintf(stdio.Out, "TLS: --cassandra-tls-ca %s", f.CA)
		if f.ClientCert != "" {
			fmt.Fprintf(stdio.Out, " (client certificate: --cassandra-tls-cert %s --cassandra-tls-key %s)", f.ClientCert, f.ClientKey)
		}
		fmt.Fprintln(stdio.Out)
	}
	return nil
}
