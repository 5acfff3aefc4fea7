package catalogpods

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter bounds catalog pod force-deletions twice: per namespace
// (--catalog-pod-deletions-per-minute-per-namespace) and for the whole cluster
// (--catalog-pod-deletions-per-minute). Each bound is a token bucket refilled evenly over a
// minute, whose burst is its per-minute count. A namespace takes at most its own share of the
// cluster's budget, so pods stranded in one namespace (a tenant's CatalogSource with many pods
// bound to a dead node) cannot hold back the recovery of another's; a deletion refused by either
// bucket takes no token from the other.
type Limiter struct {
	mu     sync.Mutex
	global *rate.Limiter
	nsRate rate.Limit
	nsMax  int
	perNS  map[string]*rate.Limiter
}

// NewLimiter allows globalPerMinute deletions a minute in all, and perNamespacePerMinute in each
// namespace.
func NewLimiter(globalPerMinute, perNamespacePerMinute int) *Limiter {
	return &Limiter{global: rate.NewLimiter(rate.Limit(float64(globalPerMinute)/60), globalPerMinute),
		nsRate: rate.Limit(float64(perNamespacePerMinute) / 60), nsMax: perNamespacePerMinute, perNS: map[string]*rate.Limiter{}}
}

// Take takes one deletion in namespace at now. When a bucket is empty it takes nothing and
// returns how long to wait before asking again.
func (l *Limiter) Take(namespace string, now time.Time) (wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns, ok := l.perNS[namespace]
	if !ok {
		ns = rate.NewLimiter(l.nsRate, l.nsMax)
		l.perNS[namespace] = ns
	}
	local := ns.ReserveN(now, 1)
	if d := local.DelayFrom(now); d > 0 {
		local.CancelAt(now)
		return d
	}
	global := l.global.ReserveN(now, 1)
	if d := global.DelayFrom(now); d > 0 {
		global.CancelAt(now)
		local.CancelAt(now)
		return d
	}
	l.forget(now)
	return 0
}

// forget drops the buckets that are full again: they are the same as new ones, and the map
// stays as small as the number of namespaces with recent deletions.
func (l *Limiter) forget(now time.Time) {
	for ns, b := range l.perNS {
		if b.TokensAt(now) >= float64(l.nsMax) {
			delete(l.perNS, ns)
		}
	}
}
