// Package shellquote quotes arguments for a POSIX shell, so that a command olmguard prints runs,
// pasted into sh, bash or zsh, with exactly the arguments it was built from.
package shellquote

import "strings"

// Quote returns arg as one word of a POSIX shell command: bare when it holds only characters no
// shell gives a meaning to ([A-Za-z0-9@%+=:,./_-], not empty, and not starting with "=", which
// zsh expands), otherwise in single quotes, each embedded single quote written as quote,
// backslash, quote, quote. Inside single quotes a POSIX shell expands nothing, so the word is arg
// whatever it holds.
func Quote(arg string) string {
	if arg != "" && arg[0] != '=' && strings.IndexFunc(arg, special) < 0 {
		return arg
	}
	return "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}

// Join quotes each argument and joins them with spaces: one simple command.
func Join(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = Quote(a)
	}
	return strings.Join(quoted, " ")
}

func special(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("@%+=:,./_-", r)
}
