// The local control plane: starting and stopping it, and setting up its
// admission modes (none, the default install's policies, webhook mode).

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// start starts the local control plane with no admission (the baseline
// runs first), keeps webhook mode's configurations for later, and installs
// the manager's shipped RBAC and a kubeconfig with its ServiceAccount's
// token.
func (b *bench) start(ctx context.Context) error {
	// One API server for both modes: the webhook configurations and serving
	// certificates of webhook mode, on an API server that also serves
	// MutatingAdmissionPolicy (which testenv turns off for webhook mode, as
	// on a cluster before 1.36; with no mutating policy installed, its
	// plugin costs next to nothing: the table shows its time).
	hooks, err := testenv.WithWebhooks(testenv.New(), testenv.WebhookMode)
	if err != nil {
		return err
	}
	b.env = testenv.New()
	b.env.WebhookInstallOptions = hooks.WebhookInstallOptions
	args := b.env.ControlPlane.GetAPIServer().Configure()
	if maxInflight > 0 {
		args.Set("max-requests-inflight", strconv.Itoa(maxInflight))
	}
	if maxMutatingInflight > 0 {
		args.Set("max-mutating-requests-inflight", strconv.Itoa(maxMutatingInflight))
	}
	_ = os.Remove(filepath.Join(b.outDir, "manager.log")) // the last run's
	cfg, _, err := testenv.Start(b.env)
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 10000, 20000
	b.cfg = cfg
	if b.c, err = client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	if b.hooks, err = b.removeWebhooks(ctx); err != nil {
		return err
	}
	if b.install, err = testenv.DefaultInstall(); err != nil {
		return err
	}
	if err := b.install.InstallManagerRBAC(ctx, b.c); err != nil {
		return err
	}
	saNamespace, saName := b.install.ManagerServiceAccount()
	token, _, err := testenv.RequestToken(ctx, b.c, saNamespace, saName, 3*time.Hour) // longer than the bench's 60 min
	if err != nil {
		return err
	}
	data, err := testenv.TokenKubeconfig(cfg, b.install.ManagerUsername(), token, "")
	if err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(os.TempDir(), fmt.Sprintf("hitl-bench-%d.kubeconfig", os.Getpid()))
	if err := os.WriteFile(b.kubeconfig, data, 0o600); err != nil {
		return err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	b.obs = newObserver()
	return b.obs.run(ctx, b.c, ns)
}

func (b *bench) stop() {
	b.stopManager()
	_ = b.env.Stop()
	_ = os.Remove(b.kubeconfig)
	if b.adminKube != "" {
		_ = os.Remove(b.adminKube)
	}
}

// use sets admission up as mode installs it and runs the manager to match:
// the admission policies of config/default (Policies), or webhook mode's
// validating policies and webhooks, served by a manager started with
// --enable-webhooks (WebhookMode). Between modes, what the next mode adds
// is created before what it drops is deleted, so that a question or reply
// is never admitted unstamped.
func (b *bench) use(ctx context.Context, mode testenv.Admission) error {
	if b.mode == mode && (b.manager != nil || mode == none) {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: admission: %s\n", modeName(mode))
	if mode == none {
		return b.useNone(ctx)
	}
	if !b.rbacReady {
		if err := b.waitForManagerRBAC(ctx); err != nil {
			return err
		}
		b.rbacReady = true
	}
	if mode.Webhooks() { // the webhook server first: the mutating webhooks fail closed
		b.stopManager()
		if err := b.startManager(true); err != nil {
			return err
		}
	}
	objs, err := testenv.AdmissionObjects(mode)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := b.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if mode == testenv.WebhookMode {
		if err := b.restoreWebhooks(ctx, b.hooks); err != nil {
			return err
		}
	}
	if err := testenv.WaitForPolicies(ctx, b.c, b.install.Namespace, true, 30*time.Second); err != nil {
		return err
	}
	if mode == testenv.WebhookMode {
		all, err := testenv.AdmissionObjects(testenv.Policies)
		if err != nil {
			return err
		}
		for _, o := range all {
			if strings.HasPrefix(o.GetKind(), "Mutating") {
				if err := client.IgnoreNotFound(b.c.Delete(ctx, o)); err != nil {
					return err
				}
			}
		}
	} else if _, err := b.removeWebhooks(ctx); err != nil {
		return err
	}
	// The API server learns of admission configurations from watches.
	time.Sleep(2 * time.Second)
	if !mode.Webhooks() {
		b.stopManager()
		if err := b.startManager(false); err != nil {
			return err
		}
	}
	select {
	case <-b.synced:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the manager's workers never started")
	}
	b.mode = mode
	return b.quiet(ctx)
}

// useNone takes admission away for the baseline, and stops the manager:
// the validating policies go first (the reply-identity policy would refuse
// a reply that no mutation stamped), the mutating webhooks before the
// server that serves them.
func (b *bench) useNone(ctx context.Context) error {
	all, err := testenv.AdmissionObjects(testenv.Policies)
	if err != nil {
		return err
	}
	for _, mutating := range []bool{false, true} {
		for _, o := range all {
			if o.GetKind() == "ConfigMap" || strings.HasPrefix(o.GetKind(), "Mutating") != mutating {
				continue
			}
			if err := client.IgnoreNotFound(b.c.Delete(ctx, o)); err != nil {
				return err
			}
		}
		if !mutating {
			if _, err := b.removeWebhooks(ctx); err != nil {
				return err
			}
		}
	}
	time.Sleep(2 * time.Second) // the API server learns of it from watches
	b.stopManager()
	b.mode = none
	return nil
}

// waitForManagerRBAC waits until the manager's ServiceAccount may list
// questions: the API server's RBAC authorizer learns of new bindings from
// a watch.
func (b *bench) waitForManagerRBAC(ctx context.Context) error {
	data, err := os.ReadFile(b.kubeconfig)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: hitlv1.GroupVersion.Group, Resource: "userquestions", Verb: "list"},
		}}
		err := c.Create(ctx, review)
		if err == nil && review.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager's ServiceAccount may not list userquestions after 30s (err %v, reason %q)", err, review.Status.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type webhookConfigs struct {
	mutating   []admissionv1.MutatingWebhookConfiguration
	validating []admissionv1.ValidatingWebhookConfiguration
}

func (b *bench) removeWebhooks(ctx context.Context) (*webhookConfigs, error) {
	var h webhookConfigs
	var m admissionv1.MutatingWebhookConfigurationList
	var v admissionv1.ValidatingWebhookConfigurationList
	if err := b.c.List(ctx, &m); err != nil {
		return nil, err
	}
	if err := b.c.List(ctx, &v); err != nil {
		return nil, err
	}
	for i := range m.Items {
		h.mutating = append(h.mutating, m.Items[i])
		if err := b.c.Delete(ctx, &m.Items[i]); err != nil {
			return nil, err
		}
	}
	for i := range v.Items {
		h.validating = append(h.validating, v.Items[i])
		if err := b.c.Delete(ctx, &v.Items[i]); err != nil {
			return nil, err
		}
	}
	return &h, nil
}

func (b *bench) restoreWebhooks(ctx context.Context, h *webhookConfigs) error {
	for i := range h.mutating {
		w := h.mutating[i].DeepCopy()
		w.ResourceVersion, w.UID = "", ""
		if err := b.c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for i := range h.validating {
		w := h.validating[i].DeepCopy()
		w.ResourceVersion, w.UID = "", ""
		if err := b.c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
