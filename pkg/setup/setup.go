// Package setup assembles what olmguard runs: the handler of every admission path and the
// controller's reconcilers. The binaries, the end-to-end tests and the demo all use it, so they
// run the same olmguard.
package setup

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/controller/catalogpods"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/controller/installplans"
	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/controller/unpackjobs"
	"github.com/olmguard/olmguard/pkg/validate"
)

// Webhook is the configuration of olmguard's admission handlers.
type Webhook struct {
	Policies validate.Policies
	// UnpackJobTTL is given to unpack Jobs OLM creates without one.
	UnpackJobTTL time.Duration
	// CleanupUsers may remove olmguard.io/cleanup while a cleanup is pending.
	CleanupUsers []string
	// ConsistentSubscriptionReads makes the handlers list Subscriptions with a consistent read
	// (the default, which F1's guarantee rests on); false reads the apiserver's watch cache
	// (admit.LiveSubscriptions).
	ConsistentSubscriptionReads bool
}

// DefaultWebhook returns the flag defaults.
func DefaultWebhook() Webhook {
	return Webhook{Policies: validate.DefaultPolicies(), UnpackJobTTL: 10 * time.Minute, CleanupUsers: validate.DefaultCleanupUsers, ConsistentSubscriptionReads: true}
}

// BindFlags registers the policy flags and --unpack-job-ttl.
func (w *Webhook) BindFlags(fs *flag.FlagSet) {
	w.Policies.BindFlags(fs)
	fs.DurationVar(&w.UnpackJobTTL, "unpack-job-ttl", w.UnpackJobTTL, "ttlSecondsAfterFinished given to bundle unpack Jobs OLM creates without one (0 leaves them as they are)")
	fs.Var(userList{&w.CleanupUsers}, "cleanup-finalizer-users", "comma-separated users allowed to remove olmguard.io/cleanup during a cleanup: the controller's identity")
	fs.BoolVar(&w.ConsistentSubscriptionReads, "consistent-subscription-reads", w.ConsistentSubscriptionReads, "list Subscriptions (an InstallPlan's owners, the Subscription and InstallPlan policies) with a consistent read, which finds every Subscription committed before the request on any apiserver; false reads the serving apiserver's watch cache, which is cheaper under bursts of plans but can miss a Subscription created a moment before (the controller then repairs the plan)")
}

// Reconcilers returns every reconciler of the controller.
func Reconcilers() []controller.Setup {
	return []controller.Setup{installplans.Setup(), subscriptiondrift.Setup(), csvcleanup.Setup(), unpackjobs.Setup(), catalogpods.Setup()}
}

// userList is a comma-separated list flag.
type userList struct{ users *[]string }

func (u userList) String() string {
	if u.users == nil {
		return ""
	}
	return strings.Join(*u.users, ",")
}

func (u userList) Set(v string) error {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("at least one user is required")
	}
	*u.users = out
	return nil
}
