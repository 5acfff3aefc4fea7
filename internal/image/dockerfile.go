package image

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
)

// Dockerfile is what a Dockerfile declares about its final image, read by ParseDockerfile.
type Dockerfile struct {
	Spec
	// Files are the paths the final stage copies the built binaries to.
	Files []string
}

// ParseDockerfile reads the subset of Dockerfile syntax olmguard's Dockerfile uses: FROM (with
// AS), RUN, COPY --from, USER, ENTRYPOINT in exec form, LABEL, comments and line continuations.
// The Go build is the RUN line of a stage that runs `go build`; everything else is taken from the
// last stage. An instruction it does not know is an error, so a new one cannot go unnoticed.
func ParseDockerfile(r io.Reader) (Dockerfile, error) {
	var d Dockerfile
	d.Labels = map[string]string{}
	lines, err := instructions(r)
	if err != nil {
		return d, err
	}
	final := false
	for i, line := range lines {
		op, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(op) {
		case "FROM":
			base, _, _ := strings.Cut(args, " ")
			d.Base, final = base, !laterFrom(lines[i+1:])
			if final {
				d.Files, d.User, d.Entrypoint, d.Labels = nil, "", nil, map[string]string{}
			}
		case "WORKDIR", "ARG", "ENV":
		case "RUN":
			words, err := shellWords(args)
			if err != nil {
				return d, fmt.Errorf("RUN %s: %w", args, err)
			}
			if env, flags, pkgs, ok := goBuild(words); ok {
				d.BuildEnv, d.BuildFlags, d.Packages = env, flags, pkgs
			}
		case "COPY":
			words, err := shellWords(args)
			if err != nil {
				return d, err
			}
			if final && len(words) > 2 && strings.HasPrefix(words[0], "--from=") {
				dest := words[len(words)-1]
				for _, src := range words[1 : len(words)-1] {
					d.Files = append(d.Files, path.Join(dest, path.Base(src)))
				}
			}
		case "USER":
			d.User = args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &d.Entrypoint); err != nil {
				return d, fmt.Errorf("ENTRYPOINT must be in exec form (a JSON array): %w", err)
			}
		case "LABEL":
			words, err := shellWords(args)
			if err != nil {
				return d, err
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return d, fmt.Errorf("LABEL %s: want key=value", w)
				}
				d.Labels[k] = v
			}
		default:
			return d, fmt.Errorf("instruction %s is not understood by the image builder's parity check", op)
		}
	}
	if d.Base == "" {
		return d, fmt.Errorf("no FROM")
	}
	return d, nil
}

// instructions joins continued lines and drops comments and blank lines.
func instructions(r io.Reader) ([]string, error) {
	var out []string
	var cur strings.Builder
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out, s.Err()
}

func laterFrom(lines []string) bool {
	for _, l := range lines {
		if op, _, _ := strings.Cut(l, " "); strings.EqualFold(op, "FROM") {
			return true
		}
	}
	return false
}

// goBuild splits `[VAR=value...] go build [flags] -o <dir> <packages>`.
func goBuild(words []string) (env, flags, pkgs []string, ok bool) {
	i := 0
	for i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-") {
		env = append(env, words[i])
		i++
	}
	if i+1 >= len(words) || words[i] != "go" || words[i+1] != "build" {
		return nil, nil, nil, false
	}
	for i += 2; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-o" && i+1 < len(words):
			i++ // the output directory: where the binaries go, not how they are built
		case strings.HasPrefix(w, "-"):
			flags = append(flags, w)
		default:
			pkgs = append(pkgs, w)
		}
	}
	return env, flags, pkgs, true
}

// shellWords splits s into words as a POSIX shell does for the simple cases a Dockerfile holds:
// blanks separate words, single and double quotes group, a backslash escapes in double quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case '\'', '"':
			inWord = true
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if c == '"' && s[j] == '\\' && j+1 < len(s) {
					j++
				}
				w.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			i = j
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
