package cassandrastore

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// hostHealth tracks, per coordinator, what the driver does not: whether the requests sent to it
// are answered. The driver marks a host down only when its connections fail and cannot be
// reopened, so a frozen process (a long GC pause, SIGSTOP, a stuck disk), whose sockets stay
// open, or a node cut off from its peers, which still answers heartbeats, stays a first choice
// for many seconds. A host is suspect while
//   - it has been sent requests for stallAfter without answering any of them (frozen), or
//   - a large share of its recent attempts failed: client or coordinator timeouts, unavailable,
//     connection errors, or lost to a speculative execution on another host (cut off, sick).
//
// Suspect hosts are tried after the healthy ones (host tier 1), never excluded: when every host
// is suspect the order is the usual one.
//
// Every statement reads and writes this record (a stream started, a response, an attempt, a
// coordinator choice), so there is no lock over all hosts: each host's record has its own, the
// waiting flag none, and the host list a read lock taken only to count or list hosts.
type hostHealth struct {
	now   func() time.Time
	hosts sync.Map // hostID -> *hostState
	mu    sync.RWMutex
	known map[hostID]*gocql.HostInfo
}

// The values are chosen in docs/cassandra.md ("Client policy").
const (
	// stallAfter: a host that has answered nothing at all for this long while requests wait on
	// it is frozen. A busy host answers something every few ms; 400 ms is above the LWT p50 at
	// load 50 (230 ms), so a lone slow LWT on an otherwise idle host can trip it, and then
	// costs only a reordering and a SERIAL read.
	stallAfter = 400 * time.Millisecond
	// casStallAfter: an LWT attempt is abandoned once its host has answered nothing for this
	// long (runCAS). Longer than stallAfter because abandoning is not free: the round goes on
	// in the cluster, and the SERIAL read that follows contends with it for the partition's
	// Paxos ballot. Measured in the sick-node tests at load 35-43: right after a frozen node
	// resumed, and with a node cut off, the two healthy coordinators each went 400-700 ms
	// without answering anything; at stallAfter every LWT in flight on them was abandoned and
	// the SERIAL reads that followed took 0.5-2.1 s (a 2.35 s stall of every write kind).
	casStallAfter = time.Second
	// failHalfLife is how fast the failure record decays: a host that failed and is then no
	// longer chosen becomes a first choice again after about two half-lives, and is probed.
	failHalfLife = time.Second
	// A host is failing when its decayed failures reach failMin and failShare of its attempts.
	failMin   = 2.0
	failShare = 0.2
)

type hostState struct {
	// pendingSince is the first request sent after the last answer, in Unix nanoseconds (0:
	// none waiting). No in-flight count: the driver does not end every stream it starts (a
	// request cancelled before it is written), and a leaked count would mark a healthy host
	// frozen forever.
	pendingSince atomic.Int64
	mu           sync.Mutex // guards the decayed counts
	fails, total float64    // decayed counts of attempts
	decayedAt    time.Time
}

func newHostHealth() *hostHealth {
	return &hostHealth{now: time.Now, known: map[hostID]*gocql.HostInfo{}}
}

// hostID identifies a host without allocating: its address, or its host id when it has none.
type hostID struct {
	addr netip.Addr
	id   string
}

func idOf(h *gocql.HostInfo) hostID {
	if h == nil {
		return hostID{}
	}
	if a, ok := netip.AddrFromSlice(h.ConnectAddress()); ok {
		return hostID{addr: a.Unmap()}
	}
	return hostID{id: h.HostID()}
}

func hostKey(h *gocql.HostInfo) string {
	if h == nil {
		return ""
	}
	if ip := h.ConnectAddress(); ip != nil {
		return ip.String()
	}
	return h.HostID()
}

// state returns the host's record, made on first use.
func (h *hostHealth) state(host *gocql.HostInfo) *hostState {
	id := idOf(host)
	if s, ok := h.hosts.Load(id); ok {
		return s.(*hostState)
	}
	s, _ := h.hosts.LoadOrStore(id, &hostState{})
	return s.(*hostState)
}

// lookup returns the host's record, nil when it has none.
func (h *hostHealth) lookup(host *gocql.HostInfo) *hostState {
	if s, ok := h.hosts.Load(idOf(host)); ok {
		return s.(*hostState)
	}
	return nil
}

// decay ages the counts to now; s.mu must be held.
func (s *hostState) decay(now time.Time) {
	if !s.decayedAt.IsZero() {
		f := math.Exp2(-float64(now.Sub(s.decayedAt)) / float64(failHalfLife))
		s.fails *= f
		s.total *= f
	}
	s.decayedAt = now
}

// waitedSince is when the oldest unanswered request was sent, and whether one waits.
func (s *hostState) waitedSince() (time.Time, bool) {
	ns := s.pendingSince.Load()
	return time.Unix(0, ns), ns != 0
}

// sent records a request written to host (heartbeats included).
func (h *hostHealth) sent(host *gocql.HostInfo) {
	s := h.state(host)
	if s.pendingSince.Load() == 0 {
		s.pendingSince.CompareAndSwap(0, h.now().UnixNano())
	}
}

// answered records a response from host, whatever it said.
func (h *hostHealth) answered(host *gocql.HostInfo) {
	s := h.state(host)
	if s.pendingSince.Load() != 0 {
		s.pendingSince.Store(0)
	}
}

// attempt records the outcome of one attempt of a statement on host.
func (h *hostHealth) attempt(host *gocql.HostInfo, bad bool) {
	s := h.state(host)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decay(h.now())
	s.total++
	if bad {
		s.fails++
	}
}

// stalled reports whether host has had a request waiting for longer than after with no answer.
func (h *hostHealth) stalled(host *gocql.HostInfo, after time.Duration) bool {
	s := h.lookup(host)
	if s == nil {
		return false
	}
	since, waiting := s.waitedSince()
	return waiting && h.now().Sub(since) > after
}

// sentTo records the host an attempt was written to (runCAS puts one in the attempt's
// context; streamWatch fills it in).
type sentTo struct {
	host atomic.Pointer[gocql.HostInfo]
}

type sentToKey struct{}

// abandonIfStalled cancels an attempt whose host stalls (no answer for casStallAfter), until
// done; only while another host is up and not suspect. Without one the next attempt would wait on a host no better: measured,
// in the first seconds after a node was killed every healthy coordinator took over a second per
// read, so each looked stalled, and abandoning their LWTs added a SERIAL read and a new Paxos
// round to every cart put.
func (h *hostHealth) abandonIfStalled(sent *sentTo, cancel context.CancelFunc, done <-chan struct{}) {
	t := time.NewTicker(stallAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if host := sent.host.Load(); host != nil && h.stalled(host, casStallAfter) && h.healthyBesides(host) {
				cancel()
				return
			}
		}
	}
}

// healthyBesides reports whether a host other than host is up and not suspect.
func (h *hostHealth) healthyBesides(host *gocql.HostInfo) bool {
	self := idOf(host)
	h.mu.RLock()
	var others []*gocql.HostInfo
	for k, hi := range h.known {
		if k != self && hi.IsUp() {
			others = append(others, hi)
		}
	}
	h.mu.RUnlock()
	for _, o := range others {
		if !h.suspect(o) {
			return true
		}
	}
	return false
}

// suspect reports whether host should be tried only after the healthy ones.
func (h *hostHealth) suspect(host *gocql.HostInfo) bool {
	s := h.lookup(host)
	if s == nil {
		return false
	}
	now := h.now()
	if since, waiting := s.waitedSince(); waiting && now.Sub(since) > stallAfter {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decay(now)
	return s.fails >= failMin && s.fails >= failShare*s.total
}

// upHosts counts the hosts the driver considers up.
func (h *hostHealth) upHosts() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, hi := range h.known {
		if hi.IsUp() {
			n++
		}
	}
	return n
}

// each lists the addresses of the suspect hosts among the known ones, for the gauge.
func (h *hostHealth) each(fn func(addr string, suspect bool)) {
	h.mu.RLock()
	hosts := make([]*gocql.HostInfo, 0, len(h.known))
	for _, hi := range h.known {
		hosts = append(hosts, hi)
	}
	h.mu.RUnlock()
	for _, hi := range hosts {
		fn(hostKey(hi), h.suspect(hi))
	}
}

// outcomeOf classifies an attempt's outcome for the host's health and the host metric:
// callerDone is whether the statement's own context had ended (then a cancelled attempt is
// the caller's doing, not the host's).
func outcomeOf(err error, callerDone bool) (outcome string, bad bool) {
	switch {
	case err == nil || errors.Is(err, gocql.ErrNotFound):
		return "ok", false
	case errors.Is(err, context.Canceled):
		// Lost to a speculative execution that finished first, unless the caller gave up.
		return "cancelled", !callerDone
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", true
	}
	if c, _ := transientClass(err); c != nil {
		return c.outcome, true
	}
	// The request itself was refused (invalid, syntax) or could not be built (marshalling):
	// not the host's fault, and no other host would do better.
	return "error", false
}

// streamWatch feeds hostHealth from the driver's stream events: a request written, a response
// read. The same value serves every stream.
type streamWatch struct{ h *hostHealth }

func (w streamWatch) StreamContext(ctx context.Context) gocql.StreamObserverContext {
	if sent, ok := ctx.Value(sentToKey{}).(*sentTo); ok {
		return casStream{w, sent}
	}
	return w
}
func (w streamWatch) StreamStarted(s gocql.ObservedStream)  { w.h.sent(s.Host) }
func (w streamWatch) StreamFinished(s gocql.ObservedStream) { w.h.answered(s.Host) }
func (w streamWatch) StreamAbandoned(gocql.ObservedStream)  {}

// casStream is streamWatch for an LWT attempt: it also tells runCAS the host.
type casStream struct {
	streamWatch
	sent *sentTo
}

func (c casStream) StreamStarted(s gocql.ObservedStream) {
	c.sent.host.Store(s.Host)
	c.streamWatch.StreamStarted(s)
}

// tieredHosts is the fallback policy under token-aware routing. Its host tiers put suspect
// hosts after healthy ones: with NonLocalReplicasFallback the token-aware policy then tries the
// healthy replicas first, the suspect replicas next, then the other hosts (this policy's own
// order, suspect ones last). It also keeps the host list for upHosts.
type tieredHosts struct {
	gocql.HostSelectionPolicy
	health *hostHealth
}

func (p *tieredHosts) HostTier(host *gocql.HostInfo) uint {
	var t uint
	if inner, ok := p.HostSelectionPolicy.(gocql.HostTierer); ok {
		t = inner.HostTier(host) * 2
	}
	if p.health.suspect(host) {
		t++
	}
	return t
}

func (p *tieredHosts) MaxHostTier() uint {
	if inner, ok := p.HostSelectionPolicy.(gocql.HostTierer); ok {
		return inner.MaxHostTier()*2 + 1
	}
	return 1
}

func (p *tieredHosts) Pick(q gocql.ExecutableStatement) gocql.NextHost {
	return p.health.deferSuspect(p.HostSelectionPolicy.Pick(q))
}

// deferSuspect passes next's hosts on, except that a host suspect at the moment it comes up is
// kept for after the others. The token-aware policy orders a statement's replicas once, when
// the statement starts; a speculative execution or a retry asks for the next host later, by
// when the host after the first may have become suspect (frozen since): it goes last then.
func (h *hostHealth) deferSuspect(next gocql.NextHost) gocql.NextHost {
	if h == nil {
		return next
	}
	var later []gocql.SelectedHost
	done := false
	return func() gocql.SelectedHost {
		for !done {
			sh := next()
			if sh == nil {
				done = true
				break
			}
			if h.suspect(sh.Info()) {
				later = append(later, sh)
				continue
			}
			return sh
		}
		if len(later) == 0 {
			return nil
		}
		sh := later[0]
		later = later[1:]
		return sh
	}
}

func (p *tieredHosts) AddHost(host *gocql.HostInfo) {
	p.health.mu.Lock()
	p.health.known[idOf(host)] = host
	p.health.mu.Unlock()
	p.HostSelectionPolicy.AddHost(host)
}

func (p *tieredHosts) RemoveHost(host *gocql.HostInfo) {
	p.health.mu.Lock()
	delete(p.health.known, idOf(host))
	p.health.mu.Unlock()
	p.HostSelectionPolicy.RemoveHost(host)
}

func (p *tieredHosts) HostUp(host *gocql.HostInfo) {
	p.health.mu.Lock()
	p.health.known[idOf(host)] = host
	p.health.mu.Unlock()
	p.HostSelectionPolicy.HostUp(host)
}
