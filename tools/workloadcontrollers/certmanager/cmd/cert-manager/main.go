// cert-manager runs upstream cert-manager's controllers and its CA injector
// (github.com/cert-manager/cert-manager, the release that go.mod pins) in one process against a
// cluster named by --kubeconfig, for Chamber's chart tests on the test control plane. Upstream's
// own mains (its controller and cainjector binaries) are modules of their own that the module
// proxy does not serve; this main wires the same library packages, less what the tests do not
// use:
//
//   - the Issuer and ClusterIssuer controllers, with the selfSigned and CA issuer types;
//   - the Certificate controllers (trigger, key manager, request manager, issuing, readiness,
//     revision manager), with upstream's defaults: the private key is not kept across
//     re-issuance, backoff after a failed request from 1 h to 32 h;
//   - the CertificateRequest approver and the selfSigned and CA signers;
//   - the CA injector for MutatingWebhookConfigurations and ValidatingWebhookConfigurations
//     (cert-manager.io/inject-ca-from, with the Certificate data source on), its manager set up
//     as upstream's (Secrets not cached);
//   - no ACME, Vault or Venafi issuers, no ingress or Gateway shims, no
//     CertificateSigningRequest signers, no certificate metrics;
//   - no webhook of cert-manager's own: its defaulting and validation of cert-manager objects do
//     not run, so a test writes each object in full (the CRDs' schemas still apply);
//   - no leader election; the CA injector's metrics and probes are off unless a bind address is
//     given, so that tests running side by side never compete for a port.
package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/api"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	"chamber.io/tools/workloadcontrollers/ctlmain"
)

// Upstream's defaults (its controller configuration's defaults.go).
const (
	workersPerController = 5
	minimumBackoff       = time.Hour
	maximumBackoff       = 32 * time.Hour
)

func main() { ctlmain.Main("cert-manager", run) }

func run() error {
	var qps float64
	var burst int
	var clusterResourceNamespace string
	endpoints := ctlmain.RegisterEndpoints(flag.CommandLine)
	flag.Float64Var(&qps, "kube-api-qps", 20, "Maximum QPS to the apiserver (upstream's default).")
	flag.IntVar(&burst, "kube-api-burst", 50, "Maximum burst to the apiserver (upstream's default).")
	flag.StringVar(&clusterResourceNamespace, "cluster-resource-namespace", "cert-manager",
		"Namespace of the Secrets that ClusterIssuers name (upstream's default).")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&opts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if err := ctlmain.CheckArgs(flag.CommandLine); err != nil {
		return err
	}
	kubeconfig := flag.CommandLine.Lookup(ctlmain.KubeconfigFlag).Value.String()

	ctx := logf.NewContext(ctrl.SetupSignalHandler(), logger, "cert-manager")
	logger.Info("Initializing", "version", util.AppVersion)

	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   float32(qps),
		KubernetesAPIBurst: burst,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: minimumBackoff,
			CertificateRequestMaximumBackoffDuration: maximumBackoff,
		},
	})
	if err != nil {
		return fmt.Errorf("building the controllers' context: %w", err)
	}

	// Every controller that the imports above registered, in a stable order for the log.
	known := controllerpkg.Known()
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range known {
			if !yield(name) {
				return
			}
		}
	})
	logger.Info("controllers", "names", strings.Join(names, ","))
	loops := make(map[string]controllerpkg.Interface, len(names))
	for _, name := range names {
		loop, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("creating the %s controller: %w", name, err)
		}
		loops[name] = loop
	}
	// The informers every controller registered while it was made, started once.
	shared, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building the informers' context: %w", err)
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	injector, err := newInjector(ctx, kubeconfig, endpoints)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	errs := make(chan error, len(loops)+1)
	for name, loop := range loops {
		wg.Go(func() {
			if err := loop.Run(workersPerController, ctx); err != nil {
				errs <- fmt.Errorf("the %s controller: %w", name, err)
			}
		})
	}
	wg.Go(func() {
		if err := injector.Start(ctx); err != nil {
			errs <- fmt.Errorf("the CA injector: %w", err)
		}
	})
	wg.Wait()
	close(errs)
	return <-errs
}

// newInjector is upstream's cainjector for webhook configurations: a controller-runtime manager
// with the injectors registered.
func newInjector(ctx context.Context, kubeconfig string, endpoints *ctlmain.Endpoints) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))
	utilruntime.Must(cmapi.AddToScheme(scheme))

	config, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig %s: %w", kubeconfig, err)
	}
	config = util.RestConfigWithUserAgent(config, "cainjector")
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		// As upstream's: Secrets are watched by their metadata only and read from the API
		// server at each reconcile, so a renewed Secret's new CA is what gets injected (a cache
		// of whole Secrets may still hold the old one when the metadata event arrives).
		Cache: cache.Options{ReaderFailOnMissingInformer: true},
		Client: client.Options{
			Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}},
		},
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: endpoints.Metrics},
		HealthProbeBindAddress: endpoints.Probe,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the CA injector's manager: %w", err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	}); err != nil {
		return nil, fmt.Errorf("registering the CA injectors: %w", err)
	}
	return mgr, nil
}
