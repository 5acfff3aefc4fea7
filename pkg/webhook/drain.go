package webhook

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultShutdownDrain is --shutdown-drain's default. The pod's pre-stop delay (5 s in the
// manifests) has already taken it out of the Service's endpoints when SIGTERM comes; this is
// for the connections the kube-apiserver opened before and keeps alive: it sends reviews over
// them to whatever pod they reach, endpoints or not.
const DefaultShutdownDrain = 3 * time.Second

// drainer lets a stopping server finish its work without failing a review. Stopping at once has
// two costs, both an object admitted without olmguard's answer (failurePolicy Ignore):
//   - controller-runtime's webhook server derives every request's context from the manager's, so
//     a review in flight at SIGTERM saw its lookup cancelled and was answered unmutated (seen in
//     the real-node tier: an unpack Job kept OLM's name);
//   - the server then closes the kept-alive connections, and a review the kube-apiserver sends
//     on one as it closes fails.
//
// So reviews get a context that outlives the stop (each lookup has its own timeout,
// admit.DefaultLookupTimeout, and the kube-apiserver its call timeout), and for ShutdownDrain
// after the stop every answer closes its connection: the kube-apiserver's next call dials again,
// and reaches a replica its endpoints still list.
type drainer struct {
	draining atomic.Bool
	// after is time.After when nil; tests end the drain themselves.
	after func(time.Duration) <-chan time.Time
}

// wrap is the middleware of every admission path.
func (d *drainer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	})
}

// delayStop returns a context that ends drain after ctx does; meanwhile the server drains.
func (d *drainer) delayStop(ctx context.Context, drain time.Duration) context.Context {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		d.draining.Store(true)
		if drain > 0 {
			log(ctx).Info("stopping: draining connections first", "for", drain)
			after := d.after
			if after == nil {
				after = time.After
			}
			<-after(drain)
		}
		cancel()
	}()
	return out
}
