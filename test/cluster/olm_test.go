package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestUnpackBinary: a binary is decompressed once, checked against SHA256SUMS and made
// executable; concurrent unpacks into one cold cache all succeed and leave no temporary file; an
// unpack does not touch a temporary file another one is writing (the "text file busy" a shared
// temporary name caused when two real-OLM tests started at once).
func TestUnpackBinary(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz is not installed")
	}
	src, cache := t.TempDir(), t.TempDir()
	content := []byte("#!/bin/sh\necho olm\n")
	if err := os.WriteFile(filepath.Join(src, "olm"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("xz", filepath.Join(src, "olm")).CombinedOutput(); err != nil {
		t.Fatalf("xz: %v\n%s", err, out)
	}
	sum := sha256.Sum256(content)
	sums := fmt.Sprintf("%s  olm\n%s  catalog\n", hex.EncodeToString(sum[:]), hex.EncodeToString(sum[:]))
	if err := os.WriteFile(filepath.Join(src, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(cache, "olm")

	// Another unpack's temporary file, as the old shared name would be, is left alone.
	foreign := dst + ".tmp"
	if err := os.WriteFile(foreign, []byte("half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = unpackBinary(src, "olm", dst)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("unpack %d: %v", i, err)
		}
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != string(content) {
		t.Fatalf("unpacked %q (%v), want %q", got, err, content)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("the binary must be executable: %v %v", fi.Mode(), err)
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != "half written" {
		t.Errorf("another unpack's temporary file was touched: %q %v", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(cache, "olm.*.tmp"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// A wrong sum is refused and leaves the binary in place untouched.
	if err := os.WriteFile(filepath.Join(src, "SHA256SUMS"), []byte("00  olm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unpackBinary(src, "olm", dst); err == nil {
		t.Error("a sum that does not match must be an error")
	}
	if b, _ := os.ReadFile(dst); string(b) != string(content) {
		t.Errorf("a refused unpack changed the binary: %q", b)
	}
}
