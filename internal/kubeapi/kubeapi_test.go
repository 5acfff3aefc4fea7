package kubeapi

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestWithLimits(t *testing.T) {
	in := &rest.Config{Host: "https://x"}
	out := WithLimits(in)
	if out.QPS != DefaultQPS || out.Burst != DefaultBurst || in.QPS != 0 {
		t.Errorf("unset limits: got %g/%d, input changed to %g", out.QPS, out.Burst, in.QPS)
	}
	set := &rest.Config{QPS: 7, Burst: 9}
	if got := WithLimits(set); got.QPS != 7 || got.Burst != 9 {
		t.Errorf("explicit limits overridden: %g/%d", got.QPS, got.Burst)
	}
	if WithLimits(nil) != nil {
		t.Error("nil config")
	}
}

func TestUserAgentNamesTheFieldManager(t *testing.T) {
	// The apiserver's field manager is the user agent up to its first slash.
	got := UserAgent("olmguard-controller")
	if manager, _, _ := strings.Cut(got, "/"); manager != "olmguard-controller" {
		t.Errorf("UserAgent = %q: field manager %q, want olmguard-controller", got, manager)
	}
}
