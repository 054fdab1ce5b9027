// Package ctlmain holds what the mains of the workload controllers built for Chamber's
// integration tests share: the flags that turn their HTTP endpoints off unless asked for, the
// check that a test names its cluster, and how a failure ends the process.
package ctlmain

import (
	"flag"
	"fmt"
	"os"
)

// KubeconfigFlag is controller-runtime's own flag (registered on flag.CommandLine by
// sigs.k8s.io/controller-runtime/pkg/client/config); here it is required.
const KubeconfigFlag = "kubeconfig"

// Endpoints are the addresses of a controller's HTTP endpoints; "0" turns one off, so that
// tests running side by side never compete for a port.
type Endpoints struct {
	Metrics string // the (plain HTTP) metrics endpoint
	Probe   string // /healthz and /readyz
}

// RegisterEndpoints registers --metrics-bind-address and --health-probe-bind-address on fs,
// both off by default.
func RegisterEndpoints(fs *flag.FlagSet) *Endpoints {
	e := &Endpoints{}
	fs.StringVar(&e.Metrics, "metrics-bind-address", "0",
		"Address of the (plain HTTP) metrics endpoint, e.g. 127.0.0.1:0; \"0\" turns it off.")
	fs.StringVar(&e.Probe, "health-probe-bind-address", "0",
		"Address of the /healthz and /readyz endpoints; \"0\" turns them off.")
	return e
}

// CheckArgs, after fs.Parse, refuses positional arguments and a missing --kubeconfig: a test
// names its cluster, and a controller never falls back to in-cluster credentials or
// ~/.kube/config.
func CheckArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f := fs.Lookup(KubeconfigFlag); f == nil || f.Value.String() == "" {
		return fmt.Errorf("--%s is required", KubeconfigFlag)
	}
	return nil
}

// Main runs run and, when it fails, prints "<name>: <error>" and exits with status 1.
func Main(name string, run func() error) {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
