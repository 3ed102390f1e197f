package launcher

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// nodeMarker is what the command line of the JVM of node directory dir contains.
func nodeMarker(dir string) string {
	return "-Dcassandra.config=file://" + Node{Dir: dir}.yamlPath() + "\x00"
}

// DownDir stops every Cassandra node dir holds, whatever left it there: the cluster its state
// file describes (nil when there is none), then any other node JVM whose pidfile lies under dir
// (nodes of a larger cluster the state file no longer lists), SIGTERM then SIGKILL. Only a JVM
// whose command line names its node directory's config is signalled. others counts the latter.
func DownDir(ctx context.Context, dir string, log *slog.Logger) (c *Cluster, others int, err error) {
	var all []error
	c, err = Open(dir, log)
	switch {
	case errors.Is(err, ErrNoCluster):
	case err != nil:
		all = append(all, err)
	default:
		all = append(all, c.Down(ctx))
	}
	others, err = serverproc.StopAll(ctx, dir, "cassandra.pid", nodeMarker, []string{"data"}, 45*time.Second, log)
	return c, others, errors.Join(append(all, err)...)
}
