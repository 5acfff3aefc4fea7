package olmsim_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func() error, error) { env = e; return nil, nil })
}

var seq atomic.Int32

// newSim returns a simulator of the given OLM version with its own OLM namespace, so tests do
// not see each other's objects.
func newSim(t *testing.T, v olmsim.Version) (*olmsim.Sim, context.Context) {
	t.Helper()
	env = testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.Patience)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("olm-%d", seq.Add(1))
	sim, err := olmsim.Start(ctx, env.Config, env.Scheme, olmsim.Options{Version: v, Namespace: ns, CompleteJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	return sim, ctx
}

// uniqueNS returns a fresh namespace name.
func uniqueNS(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }
