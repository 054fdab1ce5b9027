// lws-controller runs the upstream LeaderWorkerSet reconcilers (sigs.k8s.io/lws, the release
// that go.mod pins) against a cluster named by --kubeconfig, for Chamber's integration tests on
// the test control plane. It wires what upstream's cmd/main.go wires, less what the tests do not
// use:
//
//   - the LeaderWorkerSet reconciler (with its StatefulSet owner index) and the pod reconciler,
//     with upstream's configuration defaults (client QPS and burst 500);
//   - no gang scheduling (upstream's default: no schedulerProvider, so no PodGroups and no
//     volcano scheme);
//   - no webhooks and no cert rotation, so neither upstream's LeaderWorkerSet webhook
//     (defaulting and validation) nor its pod webhook (see below) runs;
//   - no leader election; the metrics server and the health probes are off unless a bind
//     address is given (plain HTTP, not upstream's authenticated HTTPS), so that tests running
//     side by side never compete for a port.
//
// The pod webhook: upstream's mutating pod webhook gives each LWS pod the labels that its
// StatefulSet's template cannot carry (they differ per pod): leader pods
// leaderworkerset.sigs.k8s.io/group-index (the leader's ordinal) and .../group-key (a hash of
// namespace/name), worker pods .../worker-index (their ordinal), plus the sub-group labels
// where spec.leaderWorkerTemplate.subGroupPolicy is set. The reconcilers depend on them: the pod
// reconciler refuses a pod without worker-index, and builds a group's worker StatefulSet (whose
// selector is immutable) from its leader's group-index and group-key. So the pod reconciler here
// is wrapped: a LWS pod still missing one of the labels upstream's webhook would add (computed by
// that webhook's own Default) gets them by a patch first, and only a fully labelled pod goes on
// to upstream's reconciler. What the webhook does beyond labels is NOT done, because a running
// pod's spec cannot change: no LWS_LEADER_ADDRESS, LWS_GROUP_SIZE or LWS_WORKER_INDEX
// environment variables, no TPU variables, no exclusive-placement affinities
// (leaderworkerset.sigs.k8s.io/exclusive-topology), no per-replica subdomain.
//
// Defaults: the CRD defaults spec.replicas (1), spec.startupPolicy (LeaderCreated),
// spec.rolloutStrategy.type (RollingUpdate, once rolloutStrategy is given),
// spec.leaderWorkerTemplate.size (1) and .restartPolicy (RecreateGroupOnPodRestart). What only
// the missing webhook would default, tests must set themselves:
//
//	spec.rolloutStrategy:
//	  type: RollingUpdate
//	  rollingUpdateConfiguration: {maxUnavailable: 1, maxSurge: 0, partition: 0}
//
// (required: without rollingUpdateConfiguration every reconcile of the LeaderWorkerSet panics
// on a nil pointer and nothing is created). spec.networkConfig may be left out: the reconcilers
// treat it as subdomainPolicy Shared, the webhook's default. Nor is the webhook's validation
// run: a LeaderWorkerSet the real webhook would reject is accepted here.
//
// Restarts, as the tests see it: with restartPolicy RecreateGroupOnPodRestart, when the pod
// reconciler sees a pod of a group being deleted (a deletionTimestamp) or with a restarted
// container, it deletes the group's leader pod in the foreground, and with it the group's worker
// StatefulSet and pods; the leader StatefulSet recreates the leader and the pod reconciler the
// workers. On a control plane without kubelets a pod with no node, deleted, is marked deleted
// (grace period 0) and removed a moment later: the group is recreated if the reconciler reads it
// in between (as it did in the smoke test), else only the pod comes back from its StatefulSet.
// A pod held by a finalizer is seen terminating for sure.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configapi "sigs.k8s.io/lws/api/config/v1alpha1"
	leaderworkersetv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/lws/pkg/controllers"
	"sigs.k8s.io/lws/pkg/utils/useragent"
	"sigs.k8s.io/lws/pkg/version"
	"sigs.k8s.io/lws/pkg/webhooks"

	"chamber.io/tools/workloadcontrollers/ctlmain"
)

var setupLog = ctrl.Log.WithName("setup")

func main() { ctlmain.Main("lws-controller", run) }

func run() error {
	var qps float64
	var burst int
	endpoints := ctlmain.RegisterEndpoints(flag.CommandLine)
	flag.Float64Var(&qps, "kube-api-qps", 500, "Maximum QPS to the apiserver (upstream's default).")
	flag.IntVar(&burst, "kube-api-burst", 500, "Maximum burst to the apiserver (upstream's default).")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&opts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if err := ctlmain.CheckArgs(flag.CommandLine); err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(leaderworkersetv1.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	kubeConfig.QPS = float32(qps)
	kubeConfig.Burst = burst
	kubeConfig.UserAgent = useragent.Default()
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

	if err := controllers.SetupIndexes(mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("setting up the indexes: %w", err)
	}
	recorder := mgr.GetEventRecorderFor("leaderworkerset")
	if err := controllers.NewLeaderWorkerSetReconciler(mgr.GetClient(), mgr.GetScheme(), recorder).
		SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the LeaderWorkerSet controller: %w", err)
	}
	// No gang scheduling: a nil scheduler provider, as upstream without
	// gangSchedulingManagement.
	pods := &labellingPodReconciler{
		Client:   mgr.GetClient(),
		upstream: controllers.NewPodReconciler(mgr.GetClient(), mgr.GetScheme(), recorder, nil),
		webhook:  webhooks.NewPodWebhook(nil),
	}
	if err := pods.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pod controller: %w", err)
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

// labellingPodReconciler is upstream's pod reconciler behind a step that stands in for the
// labels of upstream's pod webhook (see the top of this file).
type labellingPodReconciler struct {
	client.Client
	upstream *controllers.PodReconciler
	webhook  *webhooks.PodWebhook
}

func (r *labellingPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := r.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok := pod.Labels[leaderworkersetv1.SetNameLabelKey]; ok && pod.DeletionTimestamp == nil {
		defaulted := pod.DeepCopy()
		if err := r.webhook.Default(ctx, defaulted); err != nil {
			return ctrl.Result{}, fmt.Errorf("computing the pod webhook's labels: %w", err)
		}
		if !maps.Equal(defaulted.Labels, pod.Labels) {
			// Only add labels, as the webhook does at creation; the patch's event brings the
			// pod back here, labelled, for upstream's reconciler.
			patched := pod.DeepCopy()
			maps.Copy(patched.Labels, defaulted.Labels)
			if err := r.Patch(ctx, patched, client.MergeFrom(&pod)); err != nil {
				return ctrl.Result{}, fmt.Errorf("labelling the pod: %w", err)
			}
			ctrl.LoggerFrom(ctx).V(2).Info("added the pod webhook's labels", "labels", patched.Labels)
			return ctrl.Result{}, nil
		}
	}
	return r.upstream.Reconcile(ctx, req)
}

// SetupWithManager watches what upstream's PodReconciler.SetupWithManager watches.
func (r *labellingPodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}).
		WithEventFilter(predicate.NewPredicateFuncs(func(object client.Object) bool {
			_, exist := object.GetLabels()[leaderworkersetv1.SetNameLabelKey]
			return exist
		})).
		Owns(&appsv1.StatefulSet{}).
		Complete(reconcile.Reconciler(r))
}
