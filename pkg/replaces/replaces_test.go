package replaces

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// chain builds name prefix0 replaces prefix1 ... prefix(n-1) replaces last.
func chain(prefix string, n int, last string) map[string]string {
	m := map[string]string{}
	for i := 0; i < n; i++ {
		next := fmt.Sprintf("%s%d", prefix, i+1)
		if i == n-1 {
			next = last
		}
		m[fmt.Sprintf("%s%d", prefix, i)] = next
	}
	return m
}

func TestFind(t *testing.T) {
	hostile := "x\x1b[2J\n; rm -rf /"
	long := strings.Repeat("a", 1<<16)
	for _, tc := range []struct {
		name, csv, replaces string
		others              map[string]string
		want                Result
	}{
		{name: "no replaces", csv: "a.v1", others: map[string]string{"b": "a.v1"}},
		{name: "no name (generateName)", csv: "", replaces: "", others: map[string]string{"": ""}},
		{name: "self-reference", csv: "a.v1", replaces: "a.v1", want: Result{Cycle: []string{"a.v1"}}},
		{name: "self-reference, its stored replaces is not read", csv: "a.v1", replaces: "a.v1", others: map[string]string{"a.v1": "a.v0"},
			want: Result{Cycle: []string{"a.v1"}}},
		{name: "normal upgrade: predecessor present", csv: "a.v2", replaces: "a.v1", others: map[string]string{"a.v1": "a.v0"}},
		{name: "normal upgrade: predecessor gone", csv: "a.v2", replaces: "a.v1"},
		{name: "update fixing a self-reference: the stored replaces is not read", csv: "a.v1", replaces: "a.v0", others: map[string]string{"a.v1": "a.v1"}},
		{name: "two-CSV cycle", csv: "a.v1", replaces: "a.v2", others: map[string]string{"a.v2": "a.v1"},
			want: Result{Cycle: []string{"a.v1", "a.v2"}}},
		{name: "three-CSV cycle", csv: "a", replaces: "b", others: map[string]string{"b": "c", "c": "a", "d": "a"},
			want: Result{Cycle: []string{"a", "b", "c"}}},
		{name: "chain into a cycle of others: not this CSV's", csv: "a", replaces: "b", others: map[string]string{"b": "c", "c": "d", "d": "c"}},
		{name: "chain into a self-reference of another: not this CSV's", csv: "a", replaces: "b", others: map[string]string{"b": "b"}},
		{name: "long chain back to the CSV, within the bound", csv: "x", replaces: "c0", others: chain("c", MaxWalk, "x"),
			want: Result{Cycle: append([]string{"x"}, keys("c", MaxWalk)...)}},
		{name: "long chain back to the CSV, past the bound", csv: "x", replaces: "c0", others: chain("c", MaxWalk+1, "x"),
			want: Result{Undecided: true}},
		{name: "long chain ending, within the bound", csv: "x", replaces: "c0", others: chain("c", MaxWalk, "")},
		{name: "long chain ending past the bound is undecided", csv: "x", replaces: "c0", others: chain("c", 3*MaxWalk, ""),
			want: Result{Undecided: true}},
		{name: "hostile names", csv: hostile, replaces: "b\x00", others: map[string]string{"b\x00": hostile},
			want: Result{Cycle: []string{hostile, "b\x00"}}},
		{name: "hostile long replaces naming nothing", csv: "a", replaces: long},
		{name: "empty name in the namespace's map is never a link", csv: "a", replaces: "b", others: map[string]string{"b": "", "": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Find(tc.csv, tc.replaces, tc.others)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Find(%.40q, %.40q) = %+v, want %+v", tc.csv, tc.replaces, got, tc.want)
			}
		})
	}
}

func keys(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// The walk asks for each name at most once and never for the CSV itself, and stops at an error.
func TestWalkLookups(t *testing.T) {
	csvs := map[string]string{"b": "c", "c": "b", "a": "zzz"}
	asked := map[string]int{}
	r, err := Walk("a", "b", func(n string) (string, bool, error) {
		asked[n]++
		v, ok := csvs[n]
		return v, ok, nil
	})
	if err != nil || r.Cycle != nil || r.Undecided {
		t.Fatalf("Walk = %+v, %v", r, err)
	}
	if !reflect.DeepEqual(asked, map[string]int{"b": 1, "c": 1}) {
		t.Fatalf("lookups %v, want b and c once each", asked)
	}
	boom := errors.New("boom")
	if _, err := Walk("a", "b", func(string) (string, bool, error) { return "", false, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
}

func TestCycles(t *testing.T) {
	for _, tc := range []struct {
		name string
		csvs map[string]string
		want [][]string
	}{
		{name: "none", csvs: map[string]string{"a.v2": "a.v1", "a.v1": "", "b": "gone"}},
		{name: "self and a pair, with a tail into the pair", csvs: map[string]string{"s": "s", "q": "p", "p": "q", "t": "p"},
			want: [][]string{{"p", "q"}, {"s"}}},
		{name: "rotated to the least name", csvs: map[string]string{"c": "a", "a": "b", "b": "c"}, want: [][]string{{"a", "b", "c"}}},
		{name: "a long ring within the bound", csvs: chain("r", MaxWalk, "r0"), want: [][]string{rotate(keys("r", MaxWalk))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cycles(tc.csvs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Cycles = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		cycle []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a replaces a"},
		{[]string{"a", "b"}, "a replaces b, b replaces a"},
		{keys("c", 8), "c0 replaces c1, c1 replaces c2, c2 replaces c3, c3 replaces c4, c4 replaces c5, c5 replaces c6, and 2 more"},
	} {
		if got := Describe(tc.cycle); got != tc.want {
			t.Errorf("Describe(%q) = %q, want %q", tc.cycle, got, tc.want)
		}
	}
}
