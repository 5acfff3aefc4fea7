package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kwokctl runs `kubectl --kubeconfig <file> get --raw /version` (and /healthz) to see whether a
// cluster serves, and would download kubectl when none is on PATH. No download may happen, and
// kubectl need not be installed: kwokctl finds ours instead, a link named kubectl to the running
// executable (the test binary, or the olmguard-cluster command) that serves just those requests
// with client-go. envShim marks the processes kwokctl starts that way.
const envShim = "OLMGUARD_KUBECTL_SHIM"

func init() {
	if os.Getenv(envShim) == "1" && filepath.Base(os.Args[0]) == "kubectl" {
		os.Exit(kubectl(os.Args[1:]))
	}
}

// kubectl implements `kubectl [--kubeconfig F] get --raw PATH`.
func kubectl(args []string) int {
	kubeconfig := ""
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--kubeconfig" && i+1 < len(args):
			kubeconfig = args[i+1]
			i++
		case strings.HasPrefix(a, "--kubeconfig="):
			kubeconfig = strings.TrimPrefix(a, "--kubeconfig=")
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) != 3 || rest[0] != "get" || rest[1] != "--raw" {
		fmt.Fprintf(os.Stderr, "olmguard's kubectl stand-in only serves `get --raw PATH`, not %q\n", args)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath(rest[2]).DoRaw(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, _ = os.Stdout.Write(body)
	return 0
}
