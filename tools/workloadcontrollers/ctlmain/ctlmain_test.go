package ctlmain

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) (*flag.FlagSet, *Endpoints) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String(KubeconfigFlag, "", "")
	e := RegisterEndpoints(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return fs, e
}

func TestEndpointsAreOffUnlessGiven(t *testing.T) {
	_, e := parse(t, "--kubeconfig=k")
	if e.Metrics != "0" || e.Probe != "0" {
		t.Errorf("defaults: metrics %q, probe %q; want both \"0\"", e.Metrics, e.Probe)
	}
	_, e = parse(t, "--kubeconfig=k", "--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:8081")
	if e.Metrics != "127.0.0.1:0" || e.Probe != "127.0.0.1:8081" {
		t.Errorf("given: metrics %q, probe %q", e.Metrics, e.Probe)
	}
}

func TestCheckArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for no error, else a part of the message
	}{
		{[]string{"--kubeconfig=/tmp/k"}, ""},
		{nil, "--kubeconfig is required"},
		{[]string{"--kubeconfig="}, "--kubeconfig is required"},
		{[]string{"--kubeconfig=/tmp/k", "extra"}, "unexpected arguments: [extra]"},
	} {
		fs, _ := parse(t, c.args...)
		err := CheckArgs(fs)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: unexpected error %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
	// Without the flag registered at all (no controller-runtime config package linked in).
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	if err := CheckArgs(fs); err == nil || !strings.Contains(err.Error(), "--kubeconfig is required") {
		t.Errorf("no --kubeconfig flag: error %v", err)
	}
}
