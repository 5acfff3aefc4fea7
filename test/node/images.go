package node

import (
	"context"
	"path/filepath"

	"github.com/olmguard/olmguard/internal/image"
)

// PauseSpec is the sandbox image: test/node/pause alone.
var PauseSpec = image.Spec{
	Base:       "scratch",
	User:       "65535:65535",
	Entrypoint: []string{"/pause"},
	Packages:   []string{"./test/node/pause"},
	BuildEnv:   []string{"CGO_ENABLED=0"},
	BuildFlags: []string{"-trimpath", "-ldflags=-s -w"},
}

// BuildPause writes the sandbox image archive into dir and returns its path.
func BuildPause(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "pause.tar")
	return out, image.Build(ctx, PauseSpec, image.Options{Root: root, Name: SandboxImage, Out: out})
}
