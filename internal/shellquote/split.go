package shellquote

import (
	"errors"
	"fmt"
	"strings"
)

// Split parses cmd as a POSIX shell reads one simple command and returns its words. It accepts
// only words a shell takes literally: anything that would make sh, bash or zsh do more than
// split words (an operator ; & | < > ( ), a newline, an expansion $ ` ~ =, a glob * ? [, a brace,
// a history ! or a comment) outside single quotes is an error. Tests use it to check that a
// printed command is exactly one command with the arguments it was built from.
func Split(cmd string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(cmd[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			j := i + 1
			for ; j < len(cmd) && cmd[j] != '"'; j++ {
				switch d := cmd[j]; {
				case d == '$' || d == '`' || d == '!':
					return nil, fmt.Errorf("expansion %q inside double quotes at %d", d, j)
				case d == '\\' && j+1 < len(cmd) && strings.IndexByte("$`\"\\", cmd[j+1]) >= 0:
					j++
					w.WriteByte(cmd[j])
				case d == '\\' && j+1 < len(cmd) && cmd[j+1] == '\n':
					return nil, fmt.Errorf("line continuation at %d", j)
				default:
					w.WriteByte(d)
				}
			}
			if j >= len(cmd) {
				return nil, errors.New("unterminated double quote")
			}
			i = j
			inWord = true
		case c == '\\':
			if i+1 >= len(cmd) || cmd[i+1] == '\n' {
				return nil, fmt.Errorf("backslash at the end of a line at %d", i)
			}
			i++
			w.WriteByte(cmd[i])
			inWord = true
		case strings.IndexByte(";&|<>()\n\r`$*?[]{}!", c) >= 0:
			return nil, fmt.Errorf("shell metacharacter %q outside quotes at %d", c, i)
		case !inWord && strings.IndexByte("#~=", c) >= 0:
			return nil, fmt.Errorf("%q starting a word at %d", c, i)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, errors.New("no command")
	}
	return words, nil
}
