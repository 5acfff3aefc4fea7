package csvcleanup

import (
	"testing"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/controller"
)

// The flag's values and the cleanup decision's modes are the same strings.
func TestOperandCleanupModesAgree(t *testing.T) {
	pairs := map[controller.OperandCleanup]cleanup.OperandCleanup{
		controller.OperandCleanupOptIn:  cleanup.OperandCleanupOptIn,
		controller.OperandCleanupAlways: cleanup.OperandCleanupAlways,
		controller.OperandCleanupNever:  cleanup.OperandCleanupNever,
	}
	for flag, mode := range pairs {
		if cleanup.OperandCleanup(flag) != mode {
			t.Errorf("--operand-cleanup=%s does not map to %s", flag, mode)
		}
	}
}
