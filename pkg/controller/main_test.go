package controller_test

import (
	"testing"

	"github.com/olmguard/olmguard/test/testenv"
)

// The Lease tests share one control plane (testenv.Shared), each in a namespace of its own; the
// tests that count what a manager reads start their own (testenv.Start).
func TestMain(m *testing.M) { testenv.Main(m, nil) }
