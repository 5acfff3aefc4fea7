package shellquote

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"configmap", "configmap"},
		{"job/ou-0a1b", "job/ou-0a1b"},
		{"olmguard.io/resync=1700000000", "olmguard.io/resync=1700000000"},
		{"a@b%c+d:e,f._-", "a@b%c+d:e,f._-"},
		{"", "''"},
		{"=cmd", "'=cmd'"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"x; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo ", "'x; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo '"},
		{"$(id)", "'$(id)'"},
		{"`id`", "'`id`'"},
		{"a\nb", "'a\nb'"},
		{"~root", "'~root'"},
		{"*", "'*'"},
		{`{"spec":{"address":"HOST:PORT"}}`, `'{"spec":{"address":"HOST:PORT"}}'`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "kubectl -n a delete job/x", want: []string{"kubectl", "-n", "a", "delete", "job/x"}},
		{in: `kubectl 'a b' "c d" e\ f ''`, want: []string{"kubectl", "a b", "c d", "e f", ""}},
		{in: `kubectl 'it'\''s'`, want: []string{"kubectl", "it's"}},
		{in: `kubectl "a\"b\\c\d"`, want: []string{"kubectl", `a"b\c\d`}},
		{in: "kubectl a; id", wantErr: true},
		{in: "kubectl a && id", wantErr: true},
		{in: "kubectl a | id", wantErr: true},
		{in: "kubectl a > f", wantErr: true},
		{in: "kubectl $(id)", wantErr: true},
		{in: "kubectl `id`", wantErr: true},
		{in: `kubectl "$(id)"`, wantErr: true},
		{in: "kubectl a\nid", wantErr: true},
		{in: "kubectl 'a", wantErr: true},
		{in: `kubectl "a`, wantErr: true},
		{in: "kubectl a*", wantErr: true},
		{in: "kubectl ~x", wantErr: true},
		{in: "kubectl #x", wantErr: true},
		{in: "kubectl =x", wantErr: true},
		{in: "kubectl {a,b}", wantErr: true},
		{in: "kubectl !!", wantErr: true},
		{in: "  ", wantErr: true},
	} {
		got, err := Split(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// shellWords runs the POSIX shell on line and returns the words it parses it into.
func shellWords(t testing.TB, line string) []string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	out, err := exec.Command(sh, "-c", `eval "set -- $1"; for a; do printf '%s\0' "$a"; done`, "_", line).Output()
	if err != nil {
		t.Fatalf("sh on %q: %v", line, err)
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

func TestJoinRoundTripsThroughSh(t *testing.T) {
	args := []string{"kubectl", "it's", "", "a b", "$(id)", "`id`", "a\nb", "~", "*", "x;y", `\`, `"`, "=x", "\x1b[2J", "ü"}
	line := Join(args)
	if got := shellWords(t, line); !slices.Equal(got, args) {
		t.Errorf("sh parsed %q into %q, want %q", line, got, args)
	}
	if got, err := Split(line); err != nil || !slices.Equal(got, args) {
		t.Errorf("Split(%q) = %q, %v; want %q", line, got, err, args)
	}
}

// FuzzQuote checks that a quoted argument is one word, the argument itself, for the shell and
// for Split.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a", "it's", "x; kubectl create clusterrolebinding pwn", "$(id)", "'\\''", "\x1b]8;;http://x\x1b\\", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		line := Join([]string{"kubectl", arg})
		got, err := Split(line)
		if err != nil || !slices.Equal(got, []string{"kubectl", arg}) {
			t.Fatalf("Split(%q) = %q, %v", line, got, err)
		}
		if strings.IndexByte(arg, 0) >= 0 {
			return // an argv cannot hold NUL
		}
		if sh := shellWords(t, line); !slices.Equal(sh, []string{"kubectl", arg}) {
			t.Fatalf("sh parsed %q into %q", line, sh)
		}
	})
}
