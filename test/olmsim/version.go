package olmsim

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an OLM v0 minor release (v0.<Minor>). The simulator changes behaviour at the
// releases olm-facts.md names.
type Version struct{ Minor int }

// Releases where behaviour the simulator reproduces changed.
var (
	V0_22 = Version{22} // oldest supported
	V0_25 = Version{25} // no InstallPlan before every bundle is unpacked; Jobs looked up by name only
	V0_26 = Version{26} // Jobs looked up by bundle-unpack-ref label only
	V0_27 = Version{27} // CSV finalizer operators.coreos.com/csv-cleanup
	V0_28 = Version{28} // ensurePod force-deletes pods the taint manager deleted (polling catalogs only)
	V0_29 = Version{29} // Jobs looked up by label plus exact name; dead catalog pods detected in health check
	V0_32 = Version{32} // any DisruptionTarget=True makes a catalog pod dead
	V0_39 = Version{39} // unpack Jobs run as the <name> ServiceAccount
	V0_43 = Version{43} // unpack Jobs get ttlSecondsAfterFinished: 300
	V0_46 = Version{46} // newest
)

// ParseVersion reads "v0.28", "0.28.1" or "v0.28.0".
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) < 2 || parts[0] != "0" {
		return Version{}, fmt.Errorf("OLM version %q: want v0.<minor>[.<patch>]", s)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil || minor < V0_22.Minor || minor > V0_46.Minor {
		return Version{}, fmt.Errorf("OLM version %q: minor must be %d to %d", s, V0_22.Minor, V0_46.Minor)
	}
	return Version{minor}, nil
}

// AtLeast reports whether v is at or after o.
func (v Version) AtLeast(o Version) bool { return v.Minor >= o.Minor }

func (v Version) String() string { return fmt.Sprintf("v0.%d", v.Minor) }
