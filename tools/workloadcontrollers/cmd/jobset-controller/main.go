// jobset-controller runs the upstream JobSet controllers (sigs.k8s.io/jobset, the release that
// go.mod pins) against a cluster named by --kubeconfig, for Chamber's integration tests on the
// test control plane. It wires what upstream's main.go wires, less everything that needs
// certificates:
//
//   - the field indexes and the reconcilers for JobSets and for pods (exclusive placement),
//     as upstream sets them up;
//   - no webhooks (JobSet defaulting and validation, pod mutation and admission) and no cert
//     rotator: the test control plane has no certificates for them and no
//     Mutating/ValidatingWebhookConfiguration pointing at them;
//   - no leader election; the metrics server and the health probes are off unless a bind
//     address is given, so that tests running side by side never compete for a port.
//
// Defaults: upstream's mutating webhook fills in fields the reconciler then reads without a nil
// check. Calling the webhook's Default function from here would mean applying it in a
// reconciler, after the object was stored, which the real webhook never does; instead, tests
// create fully specified JobSets, writing out what the webhook would have set:
//
//	spec.successPolicy:   {operator: All}
//	spec.startupPolicy:   {startupPolicyOrder: AnyOrder}
//	spec.network:         {enableDNSHostnames: true, publishNotReadyAddresses: true}
//	                      (or enableDNSHostnames: false; a nil network crashes the reconcile)
//	replicatedJobs[*].template.spec.completionMode:                Indexed
//	replicatedJobs[*].template.spec.template.spec.restartPolicy:   OnFailure (or Never)
//
// Nor is the webhook's validation run: a JobSet the real webhook would reject is accepted here.
package main

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/jobset/pkg/controllers"
	"sigs.k8s.io/jobset/pkg/metrics"
	"sigs.k8s.io/jobset/pkg/util/useragent"
	"sigs.k8s.io/jobset/pkg/version"

	"chamber.io/tools/workloadcontrollers/ctlmain"
)

var setupLog = ctrl.Log.WithName("setup")

func main() { ctlmain.Main("jobset-controller", run) }

func run() error {
	var featureGates string
	var qps float64
	var burst int
	endpoints := ctlmain.RegisterEndpoints(flag.CommandLine)
	flag.Float64Var(&qps, "kube-api-qps", 500, "Queries per second to the apiserver (upstream's default).")
	flag.IntVar(&burst, "kube-api-burst", 500, "Burst of queries to the apiserver (upstream's default).")
	flag.StringVar(&featureGates, "feature-gates", "",
		"JobSet feature gates, as key=value pairs separated by commas.")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if err := ctlmain.CheckArgs(flag.CommandLine); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.Set(featureGates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(jobset.AddToScheme(scheme))
	metrics.Register()

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	kubeConfig.UserAgent = useragent.Default()
	kubeConfig.QPS = float32(qps)
	kubeConfig.Burst = burst
	setupLog.Info("Initializing", "gitVersion", version.GitVersion, "host", kubeConfig.Host)

	mgr, err := ctrl.NewManager(kubeConfig, ctrl.Options{
		Scheme:                 scheme,
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: endpoints.Metrics},
		HealthProbeBindAddress: endpoints.Probe,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	if err := controllers.SetupJobSetIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("setting up the JobSet reconciler's indexes: %w", err)
	}
	if err := controllers.SetupPodIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("setting up the pod reconciler's indexes: %w", err)
	}
	jobSetController := controllers.NewJobSetReconciler(mgr.GetClient(), mgr.GetScheme(),
		mgr.GetEventRecorderFor("jobset"))
	if err := jobSetController.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the JobSet controller: %w", err)
	}
	podController := controllers.NewPodReconciler(mgr.GetClient(), mgr.GetScheme(),
		mgr.GetEventRecorderFor("pod"))
	if err := podController.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pod controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the ready check: %w", err)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}
