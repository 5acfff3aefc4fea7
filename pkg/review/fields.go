package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Fields returns the raw values of the named top-level members of a JSON object, without decoding
// the rest: a CSV can carry a megabyte of icon and description that no handler reads. Strings are
// skipped with bytes.IndexByte and containers by bracket matching, so skipping costs far less than
// decoding. Keys match case-sensitively, as the apiserver writes them; when a key repeats, the
// last one wins, as in encoding/json. Structure is checked (brackets, strings, separators), the
// skipped values' contents are not: the apiserver has parsed the body already.
func Fields(raw []byte, keys ...string) (map[string][]byte, error) {
	s := scanner{b: raw}
	s.ws()
	if !s.eat('{') {
		return nil, errors.New("malformed object: not a JSON object")
	}
	out := map[string][]byte{}
	s.ws()
	if s.eat('}') {
		return out, s.end()
	}
	for {
		s.ws()
		key, err := s.key()
		if err != nil {
			return nil, err
		}
		s.ws()
		if !s.eat(':') {
			return nil, s.errorf("expected ':' after key %q", key)
		}
		s.ws()
		start := s.i
		if err := s.skipValue(); err != nil {
			return nil, err
		}
		for _, k := range keys {
			if k == key {
				out[k] = raw[start:s.i]
			}
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return out, s.end()
		}
		return nil, s.errorf("expected ',' or '}'")
	}
}

// maxDepth bounds nesting, as encoding/json does (10000).
const maxDepth = 10000

type scanner struct {
	b []byte
	i int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("malformed object at offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.errorf("data after the object")
	}
	return nil
}

// key reads an object key; escaped keys are unquoted by encoding/json.
func (s *scanner) key() (string, error) {
	start := s.i
	if err := s.skipString(); err != nil {
		return "", err
	}
	k := s.b[start+1 : s.i-1]
	if bytes.IndexByte(k, '\\') < 0 {
		return string(k), nil
	}
	var out string
	if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
		return "", s.errorf("bad key: %v", err)
	}
	return out, nil
}

// skipString moves past the string starting at s.i.
func (s *scanner) skipString() error {
	if !s.eat('"') {
		return s.errorf("expected a string")
	}
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.i = len(s.b)
			return s.errorf("unterminated string")
		}
		q := s.i + j
		// A quote preceded by an odd number of backslashes is escaped.
		n := 0
		for k := q - 1; k >= s.i && s.b[k] == '\\'; k-- {
			n++
		}
		s.i = q + 1
		if n%2 == 0 {
			return nil
		}
	}
}

// skipValue moves past the value starting at s.i.
func (s *scanner) skipValue() error {
	if s.i >= len(s.b) {
		return s.errorf("expected a value")
	}
	switch c := s.b[s.i]; c {
	case '"':
		return s.skipString()
	case '{', '[':
		return s.skipContainer()
	default:
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				goto done
			}
			s.i++
		}
	done:
		lit := s.b[start:s.i]
		if len(lit) == 0 || !json.Valid(lit) {
			s.i = start
			return s.errorf("invalid value %q", truncate(lit))
		}
		return nil
	}
}

// skipContainer moves past an object or array, matching brackets and skipping strings.
func (s *scanner) skipContainer() error {
	stack := make([]byte, 0, 16)
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			if err := s.skipString(); err != nil {
				return err
			}
			continue
		case '{', '[':
			if len(stack) == maxDepth {
				return s.errorf("nested too deeply")
			}
			stack = append(stack, c)
		case '}', ']':
			open := byte('{')
			if c == ']' {
				open = '['
			}
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return s.errorf("unexpected %q", c)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				s.i++
				return nil
			}
		}
		s.i++
	}
	return s.errorf("unterminated object or array")
}

func truncate(b []byte) string {
	if len(b) > 20 {
		return string(b[:20]) + "..."
	}
	return string(b)
}
