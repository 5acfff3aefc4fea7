package csvcleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// pagedCopies serves CSVs' metadata as the apiserver pages a list: each page at most the list's
// limit, a continue token to the next.
type pagedCopies struct {
	client.Reader
	items []metav1.PartialObjectMetadata
	limit int64
}

func (p *pagedCopies) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	p.limit = o.Limit
	from := 0
	if o.Continue != "" {
		if _, err := fmt.Sscan(o.Continue, &from); err != nil {
			return err
		}
	}
	to := min(from+int(o.Limit), len(p.items))
	l := list.(*metav1.PartialObjectMetadataList)
	l.Items = append([]metav1.PartialObjectMetadata(nil), p.items[from:to]...)
	l.Continue = ""
	if to < len(p.items) {
		l.Continue = fmt.Sprint(to)
	}
	return nil
}

// patches records the patches sent.
type patches struct {
	client.Writer
	got map[string]string
}

func (p *patches) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	body, err := patch.Data(obj)
	if err != nil {
		return err
	}
	p.got[obj.GetNamespace()+"/"+obj.GetName()] = string(body)
	return nil
}

// TestTrackLabelledCSVsPages: the pass reads every page of CSVs labelled as copies and labels only
// the ones holding olmguard's finalizer, with a patch bound to the UID read; it reports what it
// read, labelled and how many pages (the log line an administrator times the pass by). Fails
// when a page is skipped (a finalized CSV past the first page stays unseen by the cache, and
// terminating for good once deleted) or when a copy without the finalizer is written.
func TestTrackLabelledCSVsPages(t *testing.T) {
	var items []metav1.PartialObjectMetadata
	for i := range 45 {
		m := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i), Name: "op.v1", UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{olm.CopiedFromLabel: "operators"}}}
		if i == 3 || i == 44 { // on the first page and on the last
			m.Finalizers = []string{olmguard.CleanupFinalizer}
		}
		items = append(items, m)
	}
	r, w := &pagedCopies{items: items}, &patches{got: map[string]string{}}
	pass, err := csvcleanup.TrackLabelledCSVs(context.Background(), r, w)
	if err != nil {
		t.Fatal(err)
	}
	if want := (csvcleanup.TrackPass{Read: 45, Labelled: 2, Pages: 3}); pass != want {
		t.Errorf("pass %+v, want %+v", pass, want)
	}
	if r.limit != 20 {
		t.Errorf("pages of %d, want 20: a page holds copies' whole annotations", r.limit)
	}
	if len(w.got) != 2 {
		t.Fatalf("patched %v, want team-3 and team-44 only", w.got)
	}
	for _, i := range []int{3, 44} {
		var ops []map[string]any
		if err := json.Unmarshal([]byte(w.got[fmt.Sprintf("team-%d/op.v1", i)]), &ops); err != nil {
			t.Fatal(err)
		}
		if len(ops) < 2 || ops[0]["op"] != "test" || ops[0]["path"] != "/metadata/uid" || ops[0]["value"] != fmt.Sprintf("uid-%d", i) {
			t.Errorf("team-%d: patch %v does not start with a test of the UID read", i, ops)
		}
	}
}

// failingCopies fails every List, after calling stop (when set): the leadership lost, or the
// process stopped, while the pass reads.
type failingCopies struct {
	client.Reader
	stop func()
}

func (f failingCopies) List(context.Context, client.ObjectList, ...client.ListOption) error {
	if f.stop != nil {
		f.stop()
	}
	return errors.New("connection refused")
}

// TestTrackerQuietWhenStopped: a pass cut short because this replica stopped leading (its context
// ended) logs nothing, since the next leader runs it again; a pass that fails while leading logs
// the error. Fails without Start's check of the context: every hand-over of leadership on a large
// cluster, where the pass reads for tens of seconds, would log an error about nothing.
func TestTrackerQuietWhenStopped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stop      bool
		wantError bool
	}{
		{name: "stopped while reading", stop: true},
		{name: "failing while leading", wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			logger := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
			ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
			defer cancel()
			r := failingCopies{}
			if tc.stop {
				r.stop = cancel
			}
			tr := &csvcleanup.Tracker{Reader: r, Client: &patches{got: map[string]string{}}}
			if err := tr.Start(ctx); err != nil {
				t.Fatalf("Start: %v, want nil (a failed pass waits for the next leadership)", err)
			}
			logged := strings.Contains(strings.Join(lines, "\n"), "connection refused")
			if logged != tc.wantError {
				t.Errorf("error logged: %v, want %v; log: %q", logged, tc.wantError, lines)
			}
		})
	}
}
