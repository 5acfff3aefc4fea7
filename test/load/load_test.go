package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/pkg/admit"
)

// An apiserver stand-in answering every create with the object back and, for names carrying a
// warning, that warning in a Warning header, as the kube-apiserver relays an admission warning.
func warningServer(t *testing.T, warnings map[string]string) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cm corev1.ConfigMap
		if err := json.NewDecoder(r.Body).Decode(&cm); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if msg, ok := warnings[cm.Name]; ok {
			w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
		}
		cm.Kind, cm.APIVersion = "ConfigMap", "v1"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&cm)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
}

// recorder stands in for the test a Check judges.
type recorder struct {
	testing.TB
	errors, logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func TestLoadTellsLookupTimeoutsFromUnansweredAdmissions(t *testing.T) {
	timedOut := admit.LookupFailedWarning + "Subscriptions, ownerReferences left for the controller to repair: context deadline exceeded"
	forbidden := admit.LookupFailedWarning + "Subscriptions, ownerReferences left for the controller to repair: subscriptions is forbidden"
	cases := []struct {
		name     string
		warnings map[string]string // by admission: its warning
		mutated  func(i int64) bool
		excused  int64
		wantErr  string // in the Check's errors; empty: none
		wantLog  string
	}{
		{name: "all mutated", mutated: func(int64) bool { return true }},
		{
			name:     "a lookup timed out: reported, not failed",
			warnings: map[string]string{"a-2": timedOut},
			mutated:  func(i int64) bool { return i != 2 },
			wantLog:  "1 answered unchanged (lookup timed out)",
		},
		{
			name:     "a lookup forbidden: failed",
			warnings: map[string]string{"a-2": forbidden},
			mutated:  func(i int64) bool { return i != 2 },
			wantErr:  "1 admissions came back without olmguard's answer",
		},
		{
			name:    "unanswered without a warning: failed",
			mutated: func(i int64) bool { return i != 3 },
			wantErr: "1 admissions came back without olmguard's answer",
		},
		{
			name:    "unanswered, excused by the caller",
			mutated: func(i int64) bool { return i != 3 },
			excused: 1,
			wantLog: "each accounted for by",
		},
		{
			name:     "none mutated, every lookup timed out: failed",
			warnings: map[string]string{"a-1": timedOut, "a-2": timedOut, "a-3": timedOut, "a-4": timedOut},
			mutated:  func(int64) bool { return false },
			wantErr:  "olmguard mutated none",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := kubernetes.NewForConfig(Config(warningServer(t, tc.warnings)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var l *Load
			started := make(chan struct{}) // l is assigned only once Start returns
			l = Start(ctx, func(ctx context.Context, i int64) (string, bool, error) {
				<-started
				if i >= 4 {
					l.stopping.Store(true) // four admissions, one worker: a fixed sequence
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", i)}}
				if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					return "ConfigMap", false, err
				}
				return "ConfigMap", tc.mutated(i), nil
			}, 1)
			close(started)
			l.wg.Wait() // the worker stops itself after the fourth
			l.Stop()
			r := &recorder{TB: t}
			l.CheckExcusing(r, "load", tc.excused, "a cause the test established")
			errs, logs := strings.Join(r.errors, "\n"), strings.Join(r.logs, "\n")
			switch {
			case tc.wantErr == "" && errs != "":
				t.Errorf("Check failed: %s", errs)
			case tc.wantErr != "" && !strings.Contains(errs, tc.wantErr):
				t.Errorf("Check errors %q, want one with %q", errs, tc.wantErr)
			}
			if tc.wantLog != "" && !strings.Contains(logs, tc.wantLog) {
				t.Errorf("Check logged %q, want %q", logs, tc.wantLog)
			}
			if l.Sent() != 4 {
				t.Errorf("sent %d admissions, want 4", l.Sent())
			}
		})
	}
}
