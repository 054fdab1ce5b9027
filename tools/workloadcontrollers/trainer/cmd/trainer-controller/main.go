// trainer-controller runs the upstream Kubeflow Trainer v2 reconcilers
// (github.com/kubeflow/trainer/v2, the release that go.mod pins) against a cluster named by
// --kubeconfig, for Chamber's integration tests on the test control plane. It wires what
// upstream's cmd/trainer-controller-manager/main.go wires, less what the tests do not use:
//
//   - the TrainJob, TrainingRuntime and ClusterTrainingRuntime reconcilers with every runtime
//     plugin and its field indexes (upstream's runtimecore.New), and the manager's cache
//     reading unstructured objects as upstream's does (the TrainJob reconciler applies the
//     JobSet it builds as an unstructured object);
//   - no webhooks and no cert rotation: upstream starts its reconcilers only once its webhook
//     certificates are ready, here they start at once; so neither the TrainJob validation nor
//     the runtimes' validation runs (a TrainJob the real webhook would reject is accepted);
//   - no leader election; the metrics server and the health probes are off unless a bind
//     address is given (plain HTTP, not upstream's authenticated HTTPS), so that tests running
//     side by side never compete for a port.
//
// The JobSet CRD must be installed before it starts (the Trainer owns JobSets and watches them;
// without it the JobSet plugin logs "JobSet CRDs must be installed in advance" and the manager
// fails to start its watch). Without the scheduler-plugins PodGroup CRD the coscheduling plugin
// sets nothing up, which is what the tests want: Chamber is the gang scheduler.
//
// What the Trainer does with a TrainJob, as the tests see it: it builds a JobSet of the same name
// from the runtime's template (spec.trainer.numNodes sets the trainer step's parallelism and
// completions), owned by the TrainJob (controller: true), with spec.suspend copied from the
// TrainJob's; it creates that JobSet even while the TrainJob is suspended, and after that
// re-applies it only while the TrainJob or the JobSet is suspended, so that unsuspending the
// TrainJob unsuspends the JobSet and suspending it suspends the JobSet again. The TrainJob's
// Complete and Failed conditions are copied from the JobSet's.
package main

import (
	"flag"
	"fmt"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlpkg "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/controller"
	runtimecore "github.com/kubeflow/trainer/v2/pkg/runtime/core"

	"chamber.io/tools/workloadcontrollers/ctlmain"
)

var setupLog = ctrl.Log.WithName("setup")

func main() { ctlmain.Main("trainer-controller", run) }

func run() error {
	endpoints := ctlmain.RegisterEndpoints(flag.CommandLine)
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&opts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if err := ctlmain.CheckArgs(flag.CommandLine); err != nil {
		return err
	}

	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	setupLog.Info("Initializing", "host", kubeConfig.Host)

	mgr, err := ctrl.NewManager(kubeConfig, ctrl.Options{
		Scheme: scheme,
		// As upstream: the TrainJob reconciler applies unstructured objects.
		Client: client.Options{
			Cache: &client.CacheOptions{Unstructured: true},
		},
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: endpoints.Metrics},
		HealthProbeBindAddress: endpoints.Probe,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	runtimes, err := runtimecore.New(ctx, mgr.GetClient(), mgr.GetFieldIndexer())
	if err != nil {
		return fmt.Errorf("initializing the runtimes: %w", err)
	}
	if failed, err := controller.SetupControllers(mgr, runtimes, ctrlpkg.Options{}); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", failed, err)
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
