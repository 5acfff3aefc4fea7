package pagedlist

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// pages serves n ConfigMaps in pages of the requested limit and records each request, and how
// many objects had been trimmed when each page was asked for.
type pages struct {
	n        int
	requests []metav1.ListOptions
	trimmed  *int
	atAsk    []int
}

func (p *pages) List(opts metav1.ListOptions) (runtime.Object, error) {
	p.requests = append(p.requests, opts)
	p.atAsk = append(p.atAsk, *p.trimmed)
	start := 0
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	end := min(start+int(opts.Limit), p.n)
	if opts.Limit == 0 {
		end = p.n
	}
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprintf("rv-%d", len(p.requests))}}
	for i := start; i < end; i++ {
		l.Items = append(l.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Annotations: map[string]string{"big": "x"}}})
	}
	if end < p.n {
		l.Continue = strconv.Itoa(end)
	}
	return l, nil
}

func (p *pages) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// TestListReadsConsistentPagesTrimmedOneAtATime: fails without the paging (one request of every
// object, at the reflector's resourceVersion "0") and without the per-page transform (objects
// trimmed only after the whole list was read).
func TestListReadsConsistentPagesTrimmedOneAtATime(t *testing.T) {
	trimmed := 0
	src := &pages{n: 23, trimmed: &trimmed}
	lw := New(src, 10)
	lw.SetTransform(func(in any) (any, error) {
		cm := in.(*corev1.ConfigMap)
		cm.Annotations = nil
		trimmed++
		return cm, nil
	})
	out, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	// As the reflector reads it.
	items, err := meta.ExtractListWithAlloc(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 23 {
		t.Fatalf("%d items, want 23", len(items))
	}
	for i, o := range items {
		if cm := o.(*corev1.ConfigMap); cm.Name != fmt.Sprintf("cm-%d", i) || cm.Annotations != nil {
			t.Errorf("item %d: %s %v, want cm-%d trimmed", i, cm.Name, cm.Annotations, i)
		}
	}
	lm, err := meta.ListAccessor(out)
	if err != nil {
		t.Fatal(err)
	}
	if lm.GetResourceVersion() != "rv-3" || lm.GetContinue() != "" {
		t.Errorf("list resourceVersion %q continue %q, want the last page's rv-3 and none", lm.GetResourceVersion(), lm.GetContinue())
	}
	if len(src.requests) != 3 {
		t.Fatalf("%d requests, want 3 pages", len(src.requests))
	}
	for i, r := range src.requests {
		if r.Limit != 10 || r.ResourceVersion != "" || r.ResourceVersionMatch != "" {
			t.Errorf("request %d: limit %d resourceVersion %q match %q, want 10 and a consistent read", i, r.Limit, r.ResourceVersion, r.ResourceVersionMatch)
		}
		if wantCont := map[int]string{0: "", 1: "10", 2: "20"}[i]; r.Continue != wantCont {
			t.Errorf("request %d: continue %q, want %q", i, r.Continue, wantCont)
		}
		if src.atAsk[i] != 10*i {
			t.Errorf("request %d: %d objects trimmed before it, want %d (each page before the next)", i, src.atAsk[i], 10*i)
		}
	}
	if !lw.IsWatchListSemanticsUnSupported() {
		t.Error("a watch-list stream would bypass the pages")
	}
}

func TestListTransformErrors(t *testing.T) {
	trimmed := 0
	for name, tr := range map[string]toolscache.TransformFunc{
		"error":      func(any) (any, error) { return nil, fmt.Errorf("boom") },
		"not object": func(any) (any, error) { return "a string", nil },
	} {
		lw := New(&pages{n: 3, trimmed: &trimmed}, 2)
		lw.SetTransform(tr)
		if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestInformerHandsItsTransformToTheList: controller-runtime sets the transform on the informer
// after NewInformer; without the hand-over pages would be kept whole until the end of the list.
func TestInformerHandsItsTransformToTheList(t *testing.T) {
	trimmed := 0
	inf := NewInformer(5)(&pages{n: 7, trimmed: &trimmed}, &corev1.ConfigMap{}, time.Duration(0), toolscache.Indexers{})
	pi, ok := inf.(*informer)
	if !ok {
		t.Fatalf("informer %T, want the paged one", inf)
	}
	if err := inf.SetTransform(func(in any) (any, error) { trimmed++; return in, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := pi.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if trimmed != 7 {
		t.Errorf("%d objects trimmed by the list, want 7", trimmed)
	}
	if _, ok := NewInformer(0)(&pages{trimmed: &trimmed}, &corev1.ConfigMap{}, 0, toolscache.Indexers{}).(*informer); ok {
		t.Error("page size 0 should leave client-go's informer as it is")
	}
}

// TestListWaitsForASlot: with slots, a page is read only while holding one; fails when the list
// reads regardless of them.
func TestListWaitsForASlot(t *testing.T) {
	trimmed := 0
	src := &pages{n: 3, trimmed: &trimmed}
	slots := make(chan struct{}, 1)
	slots <- struct{}{} // another reader holds the only slot
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(src, 2).WithSlots(slots).ListWithContext(ctx, metav1.ListOptions{}); err == nil || len(src.requests) != 0 {
		t.Fatalf("error %v after %d requests, want the context's error and none read without a slot", err, len(src.requests))
	}
	<-slots
	if _, err := New(src, 2).WithSlots(slots).ListWithContext(context.Background(), metav1.ListOptions{}); err != nil || len(slots) != 0 {
		t.Fatalf("error %v, %d slots still held, want the list read and every slot given back", err, len(slots))
	}
}
