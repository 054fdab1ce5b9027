// kuberay-operator runs the upstream KubeRay reconcilers for RayClusters and RayJobs
// (github.com/ray-project/kuberay/ray-operator, the release that go.mod pins) against a cluster
// named by --kubeconfig, for Chamber's integration tests on the test control plane. It wires
// what upstream's ray-operator/main.go wires, less what the tests do not use:
//
//   - the RayCluster reconciler (with its pod index) and the RayJob reconciler, with upstream's
//     configuration defaults and its cache selector for the submitter Jobs; not the RayService
//     reconciler (its CRD is not applied);
//   - no batch scheduler (volcano, yunikorn): pods get no gang-scheduling PodGroups;
//   - no webhooks (upstream's RayCluster webhook, off by default there too, only validates);
//   - no leader election; the metrics server and the health probes are off unless a bind
//     address is given, so that tests running side by side never compete for a port; no
//     control-plane metrics (upstream's --enable-metrics default).
//
// Defaults: KubeRay has no defaulting webhook; what the reconcilers need they default
// themselves. The CRD's own defaults and required fields apply. Nor is the webhook's validation
// run: a RayCluster the real webhook would reject is accepted here. The RayJob reconciler
// validates the spec itself: a RayJob with spec.suspend true must set
// spec.shutdownAfterJobFinishes true, or every reconcile fails (nothing is created or deleted).
//
// Suspension, as the tests see it: a RayCluster's spec.suspend deletes its pods (not its head
// service) and sets the condition RayClusterSuspended; a RayJob's deletes its RayCluster and
// moves status.jobDeploymentStatus to Suspended, and resuming it creates a new RayCluster under
// a new name.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configapi "github.com/ray-project/kuberay/ray-operator/apis/config/v1alpha1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/pkg/features"

	"chamber.io/tools/workloadcontrollers/ctlmain"
)

var setupLog = ctrl.Log.WithName("setup")

func main() { ctlmain.Main("kuberay-operator", run) }

func run() error {
	var featureGates string
	var reconcileConcurrency int
	var useKubernetesProxy bool
	endpoints := ctlmain.RegisterEndpoints(flag.CommandLine)
	flag.IntVar(&reconcileConcurrency, "reconcile-concurrency", configapi.DefaultReconcileConcurrency,
		"Concurrent reconciles of each controller (upstream's default).")
	flag.BoolVar(&useKubernetesProxy, "use-kubernetes-proxy", false,
		"Reach the Ray head's dashboard through the apiserver's service proxy.")
	flag.StringVar(&featureGates, "feature-gates", "",
		"KubeRay feature gates, as key=value pairs separated by commas.")
	opts := zap.Options{Development: true, TimeEncoder: zapcore.ISO8601TimeEncoder}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&opts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if err := ctlmain.CheckArgs(flag.CommandLine); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.Set(featureGates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	features.LogFeatureGates(setupLog)

	// Upstream's configuration as its flags' defaults make it, less what is turned off above.
	rayConfig := configapi.Configuration{
		MetricsAddr:          endpoints.Metrics,
		ProbeAddr:            endpoints.Probe,
		EnableLeaderElection: new(bool),
		ReconcileConcurrency: reconcileConcurrency,
		UseKubernetesProxy:   useKubernetesProxy,
		DeleteRayJobAfterJobFinishes: os.Getenv(
			utils.DELETE_RAYJOB_CR_AFTER_JOB_FINISHES) == "true",
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(rayv1.AddToScheme(scheme))
	utilruntime.Must(batchv1.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))

	// As upstream: cache only the batch Jobs KubeRay created (RayJob submitters).
	createdBy, err := labels.NewRequirement(utils.KubernetesCreatedByLabelKey, selection.Equals,
		[]string{utils.ComponentName})
	if err != nil {
		return fmt.Errorf("building the Job cache selector: %w", err)
	}

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	kubeConfig.UserAgent = "kuberay-operator/" + utils.KUBERAY_VERSION
	setupLog.Info("Initializing", "version", utils.KUBERAY_VERSION, "host", kubeConfig.Host)

	mgr, err := ctrl.NewManager(kubeConfig, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Label: labels.NewSelector().Add(*createdBy)},
		}},
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: endpoints.Metrics},
		HealthProbeBindAddress: endpoints.Probe,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	rayClusterOptions := ray.RayClusterReconcilerOptions{
		IsOpenShift: utils.GetClusterType(),
	}
	if err := ray.NewReconciler(ctx, mgr, rayClusterOptions, rayConfig).
		SetupWithManager(mgr, rayConfig.ReconcileConcurrency); err != nil {
		return fmt.Errorf("setting up the RayCluster controller: %w", err)
	}
	if err := ray.NewRayJobReconciler(ctx, mgr, ray.RayJobReconcilerOptions{}, rayConfig).
		SetupWithManager(mgr, rayConfig.ReconcileConcurrency); err != nil {
		return fmt.Errorf("setting up the RayJob controller: %w", err)
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
