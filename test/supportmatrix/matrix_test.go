package supportmatrix

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	in := `{"build":"openshift-4.20","kubernetes":"v1.36.3","capability":"F1","test":"TestF1","result":"pass"}
{"build":"v0.46.0","kubernetes":"v1.36.3","capability":"F1","test":"TestF1","result":"fail"}
{"build":"v0.46.0","kubernetes":"v1.36.3","capability":"F1","test":"TestF1","result":"pass"}

{"build":"openshift-4.16","capability":"guard","test":"TestG","result":"skip","reason":"not a core scenario"}
{"build":"openshift-4.20","capability":"guard","test":"TestG","result":"skip","reason":"not a core scenario"}
{"build":"openshift-4.16","kubernetes":"v1.36.3","capability":"F1","test":"TestF1","result":"fail"}
`
	rs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := Render(rs)
	want := `| Capability (real-OLM tier) | v0.46.0 on Kubernetes v1.36.3 | openshift-4.16 on Kubernetes v1.36.3 | openshift-4.20 on Kubernetes v1.36.3 |
|---|---|---|---|
| F1 | pass | **FAIL** | pass |
| guard | not run | skipped (1) | skipped (1) |

1. not a core scenario
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestReadRefusesIncompleteResults(t *testing.T) {
	for _, in := range []string{`{"build":"v0.46.0"}`, `not json`, `{"capability":"F1"}`} {
		if _, err := Read(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

func TestReplace(t *testing.T) {
	doc := "a\n" + Begin + "\nold\n" + End + "\nb\n"
	out, err := Replace(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n" + Begin + "\nnew\n" + End + "\nb\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if s, _ := Section(out); s != "new\n" {
		t.Errorf("section %q", s)
	}
	if _, err := Replace("no markers", "x"); err == nil {
		t.Error("no error without markers")
	}
}
