// Package local runs hitl's manager in process against the local control
// plane (internal/controlplane), as make run's helpers, the envtest suites
// and the benchmarks do. It is apart from internal/manager so that the
// manager binary links neither envtest nor the local control plane.
package local

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hitl-dev/hitl/internal/controlplane"
	"github.com/hitl-dev/hitl/internal/manager"
)

// RunManager starts, against a started env, a manager wired as the manager
// binary wires it (with the webhooks when env installs them), waits until
// it serves, and returns a function that stops it and waits for it to end.
func RunManager(env *envtest.Environment, cfg *rest.Config, c manager.Config) (stop func(), err error) {
	c.Webhooks = controlplane.ServesWebhooks(env)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  manager.CacheOptions(),
		WebhookServer:          webhook.NewServer(controlplane.WebhookOptions(env)),
		// Restart tests set the controller up again in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := manager.Setup(mgr, c); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() {
		cancel()
		<-done
	}
	if c.Webhooks {
		if err := controlplane.WaitForWebhooks(env, 30*time.Second); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// Cluster is a started local control plane with hitl's admission installed
// (as Options say) and a manager running, as the SDK, CLI and webhook suites
// use it.
type Cluster struct {
	Env    *envtest.Environment
	Config *rest.Config
	// Client acts as the cluster's admin and can watch.
	Client client.WithWatch
	stop   func()
}

// Options say how StartCluster sets admission up.
type Options struct {
	// Admission is the admission mode; the zero value is the default
	// install's admission policies.
	Admission controlplane.Admission
	// MaxTimeout, when not zero, replaces the largest timeout of the
	// admission policies' parameters.
	MaxTimeout time.Duration
}

// StartCluster starts a Cluster whose manager runs with c.
func StartCluster(c manager.Config, o Options) (*Cluster, error) {
	env, err := controlplane.WithWebhooks(controlplane.New(), o.Admission)
	if err != nil {
		return nil, err
	}
	if o.Admission == controlplane.WebhookMode {
		controlplane.WithoutMutatingPolicies(env)
	}
	cfg, _, err := controlplane.Start(env)
	if err != nil {
		return nil, err
	}
	k := &Cluster{Env: env, Config: cfg}
	if k.Client, err = client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme}); err == nil {
		// The manager first: in webhook mode nothing is admitted until
		// it serves the mutating webhooks, the policies' probes included.
		if k.stop, err = RunManager(env, cfg, c); err == nil {
			if err = controlplane.InstallAdmission(context.Background(), k.Client, o.Admission, o.MaxTimeout); err != nil {
				k.stop()
			}
		}
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return k, nil
}

// Stop stops the manager, then the control plane.
func (k *Cluster) Stop() error {
	k.stop()
	return k.Env.Stop()
}
