// training-operator runs the upstream Kubeflow training operator's v1 job reconcilers
// (github.com/kubeflow/training-operator, the release that go.mod pins) against a cluster named
// by --kubeconfig, for Chamber's integration tests on the test control plane. It wires what
// upstream's cmd/training-operator.v1/main.go wires, less everything that needs certificates:
//
//   - the reconcilers of the kinds named by --enable-scheme (pytorchjob, tfjob, mpijob,
//     xgboostjob, paddlejob, mxjob; all of them when none is named, as upstream does; each
//     one's CRD must be applied before it starts), set up as upstream sets them up;
//   - gang scheduling off: no volcano or scheduler-plugins PodGroups are created (upstream's
//     default too, when --gang-scheduler-name is empty);
//   - no webhooks (upstream's are validation only) and no cert rotator: the test control plane
//     has no certificates for them and no ValidatingWebhookConfiguration pointing at them;
//   - no leader election; the metrics server and the health probes are off unless a bind
//     address is given, so that tests running side by side never compete for a port.
//
// Defaults: upstream registers its defaulting functions in the scheme and the reconcilers apply
// them to the jobs they read (upstream has no defaulting webhook), so a job needs nothing here
// that upstream's users would not write. Nor is the webhook's validation run: a job the real
// webhook would reject (for example a PyTorchJob without a container named "pytorch") is
// accepted here and fails in the reconciler instead.
package main

import (
	"flag"
	"fmt"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	trainingconfig "github.com/kubeflow/training-operator/pkg/config"
	controllerv1 "github.com/kubeflow/training-operator/pkg/controller.v1"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"

	"chamber.io/tools/workloadcontrollers/ctlmain"
)

var setupLog = ctrl.Log.WithName("setup")

func main() { ctlmain.Main("training-operator", run) }

func run() error {
	var enabledSchemes controllerv1.EnabledSchemes
	var controllerThreads int
	endpoints := ctlmain.RegisterEndpoints(flag.CommandLine)
	flag.Var(&enabledSchemes, "enable-scheme",
		"A kind to reconcile, e.g. --enable-scheme=pytorchjob (repeat it for more; case "+
			"insensitive). All supported kinds when none is given.")
	flag.IntVar(&controllerThreads, "controller-threads", 1,
		"Worker threads of each controller (upstream's default).")
	// Upstream's flags for what the reconcilers put into pods; without them the images would be
	// empty and the apiserver would reject the pods.
	flag.StringVar(&trainingconfig.Config.PyTorchInitContainerImage, "pytorch-init-container-image",
		trainingconfig.PyTorchInitContainerImageDefault, "The image of the PyTorch init container.")
	flag.StringVar(&trainingconfig.Config.PyTorchInitContainerTemplateFile,
		"pytorch-init-container-template-file", trainingconfig.PyTorchInitContainerTemplateFileDefault,
		"The template file of the PyTorch init container (upstream's built-in one when absent).")
	flag.IntVar(&trainingconfig.Config.PyTorchInitContainerMaxTries, "pytorch-init-container-max-tries",
		trainingconfig.PyTorchInitContainerMaxTriesDefault,
		"How often the PyTorch init container tries to resolve the master.")
	flag.StringVar(&trainingconfig.Config.MPIKubectlDeliveryImage, "mpi-kubectl-delivery-image",
		trainingconfig.MPIKubectlDeliveryImageDefault, "The image of the MPI launcher's init container.")
	opts := zap.Options{Development: true, StacktraceLevel: zapcore.DPanicLevel}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if err := ctlmain.CheckArgs(flag.CommandLine); err != nil {
		return err
	}
	if enabledSchemes.Empty() {
		enabledSchemes.FillAll()
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	// The reconcilers watch PodGroups when a cluster happens to serve their CRDs, as upstream's;
	// the types must be known for that even with gang scheduling off.
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	setupLog.Info("Initializing", "host", kubeConfig.Host, "schemes", enabledSchemes.String())

	mgr, err := ctrl.NewManager(kubeConfig, ctrl.Options{
		Scheme:                 scheme,
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: endpoints.Metrics},
		HealthProbeBindAddress: endpoints.Probe,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	// Upstream sets the reconcilers up once its certificates are ready; with none to wait for,
	// they are set up before the manager starts.
	gangSchedulingSetupFunc := common.GenNonGangSchedulerSetupFunc()
	for _, s := range enabledSchemes {
		setup, ok := controllerv1.SupportedSchemeReconciler[s]
		if !ok {
			return fmt.Errorf("scheme %s is not supported", s)
		}
		if err := setup(mgr, gangSchedulingSetupFunc, controllerThreads); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", s, err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the ready check: %w", err)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}
