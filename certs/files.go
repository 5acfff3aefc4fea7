package certs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// File names in a certificate directory, as a mounted kubernetes.io/tls Secret lays them out.
const (
	CertFile   = "tls.crt"
	KeyFile    = "tls.key"
	CACertFile = "ca.crt"
)

// WriteFiles writes tls.crt, tls.key and ca.crt into dir (created if needed). Files whose content
// is unchanged are not rewritten, so the certificate watcher sees no spurious events. Each file is
// replaced atomically; ca.crt and the key are written before the certificate, so that a reader
// who sees the new certificate finds its key and its CA.
func WriteFiles(dir string, b *Bundle) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: creating %s: %w", dir, err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CACertFile, b.CACert, 0o644},
		{KeyFile, b.Key, 0o600},
		{CertFile, b.Cert, 0o644},
	} {
		if err := writeIfChanged(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	return nil
}

// ReadCABundle returns ca.crt from dir, or nil when the directory has none.
func ReadCABundle(dir string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("certs: reading CA bundle: %w", err)
	}
	return data, nil
}
