package loadgen

import (
	"context"
	"math/rand/v2"
	"sync"
)

// BenchPassword is the password of every user the bench provisions: they are throwaway
// accounts of a load test, and one known password lets them all share one bcrypt hash.
const BenchPassword = "shardmart-bench-password"

// Provisioner creates a user for each email with password and a session for each, and
// answers the sessions' bearer tokens in the order of emails. It exists so that thousands
// of users cost seconds: through the API each would cost two bcrypt operations.
type Provisioner func(ctx context.Context, emails []string, password string) (tokens []string, err error)

// idleUsers are the users with no request in flight; a request takes one uniformly at
// random and gives it back when answered.
type idleUsers struct {
	mu   sync.Mutex
	free []int
}

func newIdleUsers(n int) *idleUsers {
	p := &idleUsers{free: make([]int, n)}
	for i := range p.free {
		p.free[i] = i
	}
	return p
}

// take removes a random idle user; false when every user is busy.
func (p *idleUsers) take(rng *rand.Rand) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return 0, false
	}
	k := rng.IntN(n)
	i := p.free[k]
	p.free[k] = p.free[n-1]
	p.free = p.free[:n-1]
	return i, true
}

func (p *idleUsers) put(i int) {
	p.mu.Lock()
	p.free = append(p.free, i)
	p.mu.Unlock()
}
