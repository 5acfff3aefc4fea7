// Command supportmatrix prints the support matrix of the real-OLM tier's results, or writes it
// into README.md:
//
//	go run ./hack/supportmatrix <results dir>                   print it
//	go run ./hack/supportmatrix -write <results dir>            keep the results in
//	                                                            docs/support-matrix.jsonl and write
//	                                                            the matrix into README.md
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/olmguard/olmguard/test/supportmatrix"
)

func main() {
	write := flag.Bool("write", false, "keep the results in docs/support-matrix.jsonl and write the matrix into README.md")
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: supportmatrix [-write] [-root dir] <results dir>")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *root, *write); err != nil {
		fmt.Fprintf(os.Stderr, "supportmatrix: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, root string, write bool) error {
	results, err := supportmatrix.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("no results in %s (run the real-OLM tier with OLMGUARD_REALOLM_RESULTS=%s)", dir, dir)
	}
	matrix := supportmatrix.Render(results)
	if !write {
		fmt.Print(matrix)
		return nil
	}
	var raw strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		raw.Write(b)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "support-matrix.jsonl"), []byte(raw.String()), 0o644); err != nil {
		return err
	}
	readme := filepath.Join(root, "README.md")
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	out, err := supportmatrix.Replace(string(doc), matrix)
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return os.WriteFile(readme, []byte(out), 0o644)
}
