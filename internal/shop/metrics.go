package shop

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/outbox"
)

// RegisterMetrics exports the shop's own state: how far this process's card cache is behind
// the outbox and the projector's drain leases.
func (s *Shop) RegisterMetrics(reg prometheus.Registerer) {
	s.registerCacheMetrics(reg)
	registerLeaseMetrics(reg, s.Projector)
}

// registerCacheMetrics exports how far this process's card cache is behind the outbox.
func (s *Shop) registerCacheMetrics(reg prometheus.Registerer) {
	if s.Tail == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardmart_card_cache_tail_behind_seconds",
			Help: "Time since this process's outbox tail last read every change (the card cache's staleness bound in effect)."},
			func() float64 { return s.Tail.State().Behind.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardmart_card_cache_bypassed",
			Help: "1 while search bypasses the card cache because the tail is too far behind (or failing), else 0."},
			func() float64 {
				if s.CacheFollowing() != nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shardmart_card_cache_tail_resets_total",
			Help: "Times the card cache was emptied because its tail found outbox rows pruned before it read them."},
			func() float64 { return float64(s.Tail.State().Resets) }),
	)
}

// registerLeaseMetrics exports this process's projector's drain leases (a shared outbox is
// drained by one process at a time; outbox/lease.go).
func registerLeaseMetrics(reg prometheus.Registerer, p *outbox.Projector) {
	counter := func(name, help string, v func(outbox.LeaseStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(p.LeaseStats())) })
	}
	reg.MustRegister(
		counter("shardmart_outbox_drain_lease_acquired_total", "Outbox drains this process ran under the shared drain lease.",
			func(st outbox.LeaseStats) int64 { return st.Acquired }),
		counter("shardmart_outbox_drain_lease_busy_total", "Drain attempts that found another process holding the lease (its drain did the work).",
			func(st outbox.LeaseStats) int64 { return st.Busy }),
		counter("shardmart_outbox_drain_lease_taken_over_total", "Leases this process took from a holder that let it expire (died or stalled mid-drain).",
			func(st outbox.LeaseStats) int64 { return st.TakenOver }),
	)
}
