package launcher

import (
	"testing"
	"time"
)

// ShardMembers gives each shard its own member count (a fault test needs one 3-member shard, not
// all of them), and ElectionTimeout reaches the shard sets only; nothing is started.
func TestClusterShardMembersAndElectionTimeout(t *testing.T) {
	c, err := NewCluster(ClusterOptions{Dir: t.TempDir(), ShardMembers: []int{3, 1}, BasePort: 29000, ElectionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Shards) != 2 || len(c.Shards[0].Members()) != 3 || len(c.Shards[1].Members()) != 1 {
		t.Fatalf("shards %d, members %d and %d: want 2 shards of 3 and 1", len(c.Shards), len(c.Shards[0].Members()), len(c.Shards[1].Members()))
	}
	if got := c.Shards[0].Members()[2].Host; got != "127.0.0.1:29012" {
		t.Errorf("shard 0 member 2 at %s, want 127.0.0.1:29012", got)
	}
	for _, s := range c.Shards {
		if s.opts.ElectionTimeout != 2*time.Second {
			t.Errorf("shard %s election timeout %s, want 2s", s.Name(), s.opts.ElectionTimeout)
		}
	}
	if c.Config.opts.ElectionTimeout != 0 {
		t.Errorf("config server election timeout %s, want MongoDB's default", c.Config.opts.ElectionTimeout)
	}

	for _, o := range []ClusterOptions{
		{ShardMembers: []int{3, 2}},
		{Shards: 3, ShardMembers: []int{1, 1}},
	} {
		o.Dir = t.TempDir()
		if _, err := NewCluster(o); err == nil {
			t.Errorf("NewCluster(shards %d, members %v) succeeded, want an error", o.Shards, o.ShardMembers)
		}
	}
}
