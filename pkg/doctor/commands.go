package doctor

import (
	"strconv"
	"time"

	"github.com/olmguard/olmguard/internal/kubectlcmd"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Names of the objects the commands name that are not read from the cluster.
const (
	olmguardNamespace = "olmguard-system"
	// operatorGroupFile is the file the NoOperatorGroup fix tells the admin to save the
	// OperatorGroup in: a command never carries a manifest built from names.
	operatorGroupFile = "operatorgroup.json"
)

// kubectl starts a command in namespace ns (validated).
func kubectl(ns string, args ...string) kubectlcmd.Command { return kubectlcmd.In(ns, args...) }

// withCommands gives f the commands of its fix: every one, each a single kubectl invocation built
// from validated names and quoted, or, when one of the names is not a valid Kubernetes name (a
// tenant can write any string in an ownerReference, a label or a status), none: the finding is
// still reported and its fix says why no command is printed.
func withCommands(f Finding, cmds ...kubectlcmd.Command) Finding {
	out, err := kubectlcmd.Build(cmds...)
	if err != nil {
		f.Commands = nil
		f.Fix += "; no command printed: " + err.Error()
		return f
	}
	f.Commands = append(f.Commands, out...)
	return f
}

// checkOlmguard is the command that shows whether olmguard's controller runs.
func checkOlmguard() kubectlcmd.Command {
	return kubectl(olmguardNamespace, "get", "deploy")
}

// resync is the command that makes OLM resolve a Subscription again: olmguard's resync
// annotation set to now (Unix seconds), a new value each audit, so that the update is not a
// no-op.
func resync(ns, sub string, now time.Time) kubectlcmd.Command {
	return kubectl(ns, "annotate", "subscription").Name("", olm.SubscriptionKind, sub).
		Args(olmguard.ResyncAnnotation+"="+strconv.FormatInt(now.Unix(), 10), "--overwrite")
}
