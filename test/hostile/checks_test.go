package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/olmguard/olmguard/test/install"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// after runs the checks every attack ends with: nothing outside the tenants' namespaces deleted or
// changed, the webhook still serving, no response to the tenant holding the victim's
// data, and doctor's output safe for a terminal and a shell.
func (e *env) after(t *testing.T, tn *tenant, before snapshot) {
	t.Helper()
	e.checkUnchanged(t, before)
	e.checkServing(t)
	for _, l := range tn.rec.leaks(e.secrets()) {
		t.Errorf("a response to tenant %s carried another namespace's data: %s", tn.ns, l)
	}
	e.checkDoctor(t)
}

// checkServing: a Subscription created in a scratch namespace still gets the webhook's admission
// (a dry-run InstallPlan comes back owned by it, F1), and the webhook process is alive.
func (e *env) checkServing(t *testing.T) {
	t.Helper()
	if e.olmguard.Webhook.Exited() {
		t.Errorf("the webhook process exited (log %s)", e.olmguard.Webhook.Log)
		return
	}
	if err := install.WebhookActive(context.Background(), e.c, testenv.Patience); err != nil {
		t.Errorf("after the attack: %v", err)
	}
}

// doctorFinding is doctor.Finding as `-o json` prints it, with the commands field the fix of
// item 1 adds (decoded here so that the tier compiles before it exists).
type doctorFinding struct {
	Check     string   `json:"check"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Fix       string   `json:"fix"`
	Commands  []string `json:"commands"`
}

// runDoctor runs the built `kubectl-olmguard doctor -A` on every namespace
// as the cluster admin, as a table and as JSON.
func (e *env) runDoctor(t *testing.T) (table string, findings []doctorFinding) {
	t.Helper()
	ctx := context.Background()
	code, table, errOut := procs.Doctor(t, ctx, e.c.Kubeconfig, "-A")
	if code == 2 {
		t.Fatalf("doctor: exit 2: %s", errOut)
	}
	_, js, errJS := procs.Doctor(t, ctx, e.c.Kubeconfig, "-A", "-o", "json")
	var report struct {
		Findings []doctorFinding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(js), &report); err != nil {
		t.Fatalf("doctor -A -o json: %v\n%s\n%s", err, js, errJS)
	}
	return table, report.Findings
}

// checkDoctor: the table holds no control character, and every command of the JSON report parses
// as a POSIX shell would into exactly one simple command, kubectl, with no shell operator. A
// finding whose fix names a kubectl command lists it in commands, or says why there is none.
func (e *env) checkDoctor(t *testing.T) {
	t.Helper()
	table, findings := e.runDoctor(t)
	if bad := controlCharacters(table); len(bad) > 0 {
		t.Errorf("doctor's table holds control characters %q:\n%q", bad, table)
	}
	for _, f := range findings {
		for _, cmd := range f.Commands {
			if err := oneKubectl(cmd); err != nil {
				t.Errorf("doctor's command for %s %s/%s (%s) is not one kubectl invocation: %v\n%q", f.Kind, f.Namespace, f.Name, f.Check, err, cmd)
			}
		}
		if len(f.Commands) == 0 && strings.Contains(f.Fix, "kubectl ") && !strings.Contains(f.Fix, "no command") {
			t.Errorf("doctor's fix for %s %s/%s (%s) names a kubectl command but lists none in commands (built from validated, quoted names): %q",
				f.Kind, f.Namespace, f.Name, f.Check, f.Fix)
		}
	}
}

// controlCharacters returns the characters a terminal may interpret: C0 but newline and tab, DEL,
// C1, and the bidirectional overrides and isolates.
func controlCharacters(s string) []rune {
	var out []rune
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f),
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			out = append(out, r)
		}
	}
	return out
}

// oneKubectl parses cmd as a POSIX shell does and accepts exactly one simple command whose argv[0]
// is kubectl: no ;, &&, ||, |, &, redirection, assignment, substitution or expansion, and no
// unquoted glob.
func oneKubectl(cmd string) error {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return err
	}
	if len(f.Stmts) != 1 {
		return fmt.Errorf("%d statements", len(f.Stmts))
	}
	st := f.Stmts[0]
	if st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 {
		return fmt.Errorf("negation, background or redirection")
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		return fmt.Errorf("not a simple command: %T", st.Cmd)
	}
	if len(call.Assigns) > 0 || len(call.Args) == 0 {
		return fmt.Errorf("assignments or no words")
	}
	var argv []string
	for _, w := range call.Args {
		s, err := literal(w)
		if err != nil {
			return err
		}
		argv = append(argv, s)
	}
	if argv[0] != "kubectl" {
		return fmt.Errorf("argv[0] is %q", argv[0])
	}
	return nil
}

// literal returns the value of a word made only of literal text and quotes.
func literal(w *syntax.Word) (string, error) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[") {
				return "", fmt.Errorf("unquoted glob in %q", p.Value)
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", fmt.Errorf("$'...' is not POSIX")
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", fmt.Errorf("expansion inside double quotes: %T", q)
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", fmt.Errorf("expansion or substitution: %T", p)
		}
	}
	return b.String(), nil
}
