package flags

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	noX := func(s string) error {
		if strings.Contains(s, "x") {
			return errors.New("no x please")
		}
		return nil
	}
	for name, tc := range map[string]struct {
		list    List
		initial []string
		args    []string
		want    []string // nil: the list must be nil
		wantErr string   // substring of the parse error
	}{
		"trimmed, empty items dropped": {args: []string{"--l= a, b,,c ,"}, want: []string{"a", "b", "c"}},
		"replaces the default":         {initial: []string{"d"}, args: []string{"--l=a"}, want: []string{"a"}},
		"last use wins":                {args: []string{"--l=a", "--l=b"}, want: []string{"b"}},
		"empty value: empty, not nil":  {initial: []string{"d"}, args: []string{"--l="}, want: []string{}},
		"only commas: empty":           {args: []string{"--l=,"}, want: []string{}},
		"not given: default kept":      {initial: []string{"d"}, want: []string{"d"}},
		"not given, no default: nil":   {},
		"required":                     {list: List{Required: "at least one user is required"}, args: []string{"--l=,"}, wantErr: "at least one user is required"},
		"required, given":              {list: List{Required: "lists nothing"}, args: []string{"--l=a"}, want: []string{"a"}},
		"appends":                      {list: List{Append: true}, initial: []string{"d"}, args: []string{"--l=a, b", "--l=c"}, want: []string{"d", "a", "b", "c"}},
		"checked items":                {list: List{Check: noX}, args: []string{"--l=a,b"}, want: []string{"a", "b"}},
		"checked, one bad":             {list: List{Check: noX}, args: []string{"--l=a,x"}, wantErr: `invalid value "a,x" for flag -l: no x please`},
		"check skips empty items":      {list: List{Check: func(s string) error { return errors.New("called") }}, args: []string{"--l=,"}, want: []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			items := tc.initial
			l := tc.list
			l.Items = &items
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(new(strings.Builder))
			fs.Var(l, "l", "a list")
			err := fs.Parse(tc.args)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if (tc.want == nil) != (items == nil) || !slices.Equal(items, tc.want) {
				t.Errorf("list %#v, want %#v", items, tc.want)
			}
		})
	}
}

func TestListDefault(t *testing.T) {
	items := []string{"a", "b"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(List{Items: &items}, "l", "a list")
	if got := fs.Lookup("l").DefValue; got != "a,b" {
		t.Errorf("default %q, want a,b", got)
	}
	if got := (List{}).String(); got != "" {
		t.Errorf("zero List prints %q", got)
	}
}
