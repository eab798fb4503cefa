// Package helm checks the chart charts/hitl with Helm v4 as a library:
// `helm lint`, `helm template` for several value sets (each option on and
// off, and the values it refuses), that its objects are the objects config/
// renders (one source of truth: the generated templates equal, the
// hand-written Deployments, budget, Service and NetworkPolicy equal but for
// Helm's labels and the chart's affinity), and that the rendered chart
// with every option applies server-side to a real API server, where its
// admission policies act, and then in webhook mode, where its webhooks do.
package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hitl-dev/hitl/test/testenv"
)

var (
	chartDir  = filepath.Join(testenv.Root(), "charts", "hitl")
	configDir = filepath.Join(testenv.Root(), "config")
)

// everything turns on every option that can go together with the
// admission policies.
func everything() map[string]any {
	return map[string]any{
		"mcp":            map[string]any{"enabled": true},
		"inbox":          map[string]any{"enabled": true},
		"notify":         map[string]any{"enabled": true, "inboxURL": "https://hitl.example.com"},
		"webhook":        map[string]any{"feedback": map[string]any{"enabled": true}},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
	}
}

// webhookMode is everything in webhook mode.
func webhookMode() map[string]any {
	vals := everything()
	vals["webhook"] = map[string]any{"mode": map[string]any{"enabled": true}}
	return vals
}

// TestLint lints the chart as `helm lint --strict` does, with the defaults,
// with every option on (in both admission modes) and with values at their
// edges.
func TestLint(t *testing.T) {
	for name, c := range map[string]struct {
		kube string
		vals map[string]any
	}{
		"defaults":                       {latest, nil},
		"everything":                     {latest, everything()},
		"everything in webhook mode":     {latest, webhookMode()},
		"webhook mode on 1.30":           {"v1.30.0", webhookMode()},
		"without API priority":           {latest, map[string]any{"apf": map[string]any{"enabled": false}}},
		"the inbox with mTLS, no secret": {latest, map[string]any{"inbox": mtlsInbox("")}},
		"the notifier, every value set": {latest, map[string]any{"notify": map[string]any{"enabled": true, "replicas": 1,
			"inboxURL": "https://hitl.example.com/inbox", "secretNamespaces": []any{"team-a", "team-b"}, "extraArgs": []any{"--resync=5m"}}}},
		"one replica without a budget": {latest, map[string]any{"manager": map[string]any{
			"replicas": 1, "leaderElect": false, "podDisruptionBudget": map[string]any{"enabled": false}}}},
	} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict, lint.Namespace, lint.KubeVersion = true, "hitl-system", kubeVersion(t, c.kube)
			res := lint.Run([]string{chartDir}, c.vals)
			for _, m := range res.Messages {
				t.Logf("%s", m)
			}
			if len(res.Errors) > 0 {
				t.Errorf("helm lint --strict: %v", res.Errors)
			}
		})
	}
}

// mtlsInbox are inbox values where the proxy proves itself with a client
// certificate, and with the shared secret in secretName unless it is empty.
func mtlsInbox(secretName string) map[string]any {
	return map[string]any{
		"enabled":     true,
		"proxySecret": map[string]any{"secretName": secretName},
		"tls": map[string]any{"secretName": "inbox-tls", "clientCASecretName": "proxy-ca",
			"proxyClientNames": []any{"oauth2-proxy.auth.svc", "proxy"}},
	}
}

// TestTemplateRefusesValuesThatCannotWork: helm lint only logs a template's
// fail, so these are rendered as helm install would.
func TestTemplateRefusesValuesThatCannotWork(t *testing.T) {
	inbox := func(v map[string]any) map[string]any { return map[string]any{"inbox": v} }
	for name, c := range map[string]struct {
		kube string
		vals map[string]any
		want string
	}{
		"a budget that blocks every drain": {latest, map[string]any{"manager": map[string]any{"replicas": 1}}, "would block every node drain"},
		"a ServiceMonitor without metrics": {latest, map[string]any{"metrics": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}, "serviceMonitor.enabled needs metrics.enabled"},
		"webhook mode and the feedback webhook": {latest, map[string]any{"webhook": map[string]any{
			"mode": map[string]any{"enabled": true}, "feedback": map[string]any{"enabled": true}}}, "webhook.mode.enabled serves the feedback webhook too"},
		"admission policies before 1.36":  {"v1.35.4", nil, "Kubernetes v1.35.4 has no MutatingAdmissionPolicy (1.36 and later): set webhook.mode.enabled=true"},
		"webhook mode before 1.30":        {"v1.29.9", webhookMode(), "chart requires kubeVersion: >=1.30.0-0"},
		"an inbox that trusts any caller": {latest, inbox(map[string]any{"enabled": true, "proxySecret": map[string]any{"secretName": ""}}), "the proxy must prove itself"},
		"client names without their CA":   {latest, inbox(map[string]any{"enabled": true, "tls": map[string]any{"secretName": "tls", "proxyClientNames": []any{"proxy"}}}), "inbox.tls.proxyClientNames needs inbox.tls.clientCASecretName"},
		"a client CA without serving TLS": {latest, inbox(map[string]any{"enabled": true, "tls": map[string]any{"clientCASecretName": "ca", "proxyClientNames": []any{"proxy"}}}), "inbox.tls.clientCASecretName (mTLS) needs inbox.tls.secretName"},
		"an inbox URL that is not one": {latest, map[string]any{"notify": map[string]any{"enabled": true, "inboxURL": "hitl.example.com"}},
			`notify.inboxURL "hitl.example.com" must be the web inbox's absolute http or https URL`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := render("hitl-system", c.kube, c.vals); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestTemplateIsAHighlyAvailableRestrictedInstall renders the defaults into
// another namespace and checks what a platform team asks of an operator.
func TestTemplateIsAHighlyAvailableRestrictedInstall(t *testing.T) {
	objs, crds := template(t, "team-x", map[string]any{"image": map[string]any{"tag": "v7.7.7"}})
	if len(crds) != 6 {
		t.Errorf("%d CRDs, want UserQuestion, QuestionReply, QuestionClaim, ApprovalPolicy, NotificationChannel and NotificationPolicy", len(crds))
	}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
		if o.GetNamespace() != "" && o.GetNamespace() != "team-x" {
			t.Errorf("%s %s is in namespace %s, not the release's", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	for _, k := range []string{"ServiceMonitor", "Namespace"} {
		if len(byKind[k]) > 0 {
			t.Errorf("the defaults render a %s", k)
		}
	}
	if len(byKind["Deployment"]) != 1 {
		t.Fatalf("%d Deployments, want the manager's", len(byKind["Deployment"]))
	}
	d := byKind["Deployment"][0].Object
	if r := number(d, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d, want 2", r)
	}
	pod, _, _ := unstructured.NestedMap(d, "spec", "template", "spec")
	c := pod["containers"].([]any)[0].(map[string]any)
	if c["image"] != "ghcr.io/hitl-dev/hitl:v7.7.7" {
		t.Errorf("image %v", c["image"])
	}
	args := fmt.Sprint(c["args"])
	for _, a := range []string{"--leader-elect", "--metrics-secure", "--metrics-bind-address=:8443"} {
		if !strings.Contains(args, a) {
			t.Errorf("args %s lack %s", args, a)
		}
	}
	for _, p := range []string{"livenessProbe", "readinessProbe"} {
		if c[p] == nil {
			t.Errorf("no %s", p)
		}
	}
	if lim, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); lim == "" {
		t.Error("no memory limit")
	}
	checkRestricted(t, "the manager", pod)
	if len(byKind["PodDisruptionBudget"]) != 1 {
		t.Fatal("no PodDisruptionBudget")
	}
	if v := number(byKind["PodDisruptionBudget"][0].Object, "spec", "minAvailable"); v != 1 {
		t.Errorf("minAvailable %d, want 1", v)
	}
	for _, o := range append(byKind["ClusterRoleBinding"], byKind["RoleBinding"]...) {
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			if ns := s.(map[string]any)["namespace"]; ns != nil && ns != "team-x" {
				t.Errorf("%s %s binds a ServiceAccount of namespace %v", o.GetKind(), o.GetName(), ns)
			}
		}
	}
	all := manifest(t, objs)
	if strings.Contains(all, "hitl-system") {
		t.Error("the release in team-x still names hitl-system")
	}

	// A digest wins over the tag.
	objs, _ = template(t, "team-x", map[string]any{"image": map[string]any{"tag": "v1", "digest": "sha256:" + strings.Repeat("0", 64)}})
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if img := cs[0].(map[string]any)["image"]; img != "ghcr.io/hitl-dev/hitl@sha256:"+strings.Repeat("0", 64) {
				t.Errorf("image %v, want the digest", img)
			}
		}
	}
}

// TestTemplateToggles renders each option on and off (into team-x, so that
// nothing passes by naming hitl-system) and checks the objects and flags it
// adds or takes away.
func TestTemplateToggles(t *testing.T) {
	const ns = "team-x"
	mutatingPolicies := []string{
		"MutatingAdmissionPolicy /hitl-question-agent-label", "MutatingAdmissionPolicyBinding /hitl-question-agent-label",
		"MutatingAdmissionPolicy /hitl-reply-identity", "MutatingAdmissionPolicyBinding /hitl-reply-identity",
	}
	validatingPolicies := []string{
		"ValidatingAdmissionPolicy /hitl-question-identity", "ValidatingAdmissionPolicy /hitl-question-timeout",
		"ValidatingAdmissionPolicy /hitl-reply-identity", "ConfigMap team-x/hitl-admission",
	}
	apf := []string{"PriorityLevelConfiguration /hitl-manager", "FlowSchema /hitl-manager"}
	inbox := []string{"Deployment team-x/hitl-inbox", "ServiceAccount team-x/hitl-inbox", "ClusterRole /hitl-inbox",
		"ClusterRoleBinding /hitl-inbox", "Service team-x/hitl-inbox", "NetworkPolicy team-x/hitl-inbox"}
	feedback := []string{"ValidatingWebhookConfiguration /hitl-validating-webhook-configuration", "Service team-x/hitl-webhook-service",
		"Role team-x/hitl-webhook-certificate-role", "ClusterRole /hitl-webhook-ca-injector"}
	mutatingWebhooks := "MutatingWebhookConfiguration /hitl-mutating-webhook-configuration"
	notify := []string{"Deployment team-x/hitl-notify", "ServiceAccount team-x/hitl-notify", "ClusterRole /hitl-notify",
		"ClusterRoleBinding /hitl-notify", "ClusterRole /hitl-notify-secrets", "Role team-x/hitl-notify-leader-election",
		"RoleBinding team-x/hitl-notify-leader-election"}
	webhookArgs := []string{"--enable-webhooks", "--webhook-cert-secret=hitl-webhook-server-cert"}

	t.Run("defaults", func(t *testing.T) {
		objs := byKey(template(t, ns, nil))
		has(t, objs, append(append(mutatingPolicies, validatingPolicies...), apf...)...)
		hasNot(t, objs, append(append(append(inbox, feedback...), notify...), mutatingWebhooks)...)
		args(t, objs, "hitl-controller-manager", nil, webhookArgs)
		// The FlowSchema is the manager's.
		subjects, _, _ := unstructured.NestedSlice(objs["FlowSchema /hitl-manager"].Object, "spec", "rules")
		if got := fmt.Sprint(subjects); !strings.Contains(got, "map[name:hitl-controller-manager namespace:team-x]") {
			t.Errorf("the FlowSchema's rules %s are not the manager's ServiceAccount's", got)
		}
	})
	t.Run("apf off", func(t *testing.T) {
		hasNot(t, byKey(template(t, ns, map[string]any{"apf": map[string]any{"enabled": false}})), apf...)
	})

	t.Run("inbox", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"inbox": map[string]any{"enabled": true}}))
		has(t, objs, inbox...)
		// Impersonating users and groups and nothing else, bound to its own
		// ServiceAccount only.
		rules, _, _ := unstructured.NestedSlice(objs["ClusterRole /hitl-inbox"].Object, "rules")
		want := []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"users"}, "verbs": []any{"impersonate"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"groups"}, "verbs": []any{"impersonate"}},
		}
		if !equality.Semantic.DeepEqual(rules, want) {
			t.Errorf("the inbox's ClusterRole grants %v, want %v", rules, want)
		}
		b := objs["ClusterRoleBinding /hitl-inbox"].Object
		subjects, _, _ := unstructured.NestedSlice(b, "subjects")
		if ref, _, _ := unstructured.NestedString(b, "roleRef", "name"); ref != "hitl-inbox" || !equality.Semantic.DeepEqual(subjects,
			[]any{map[string]any{"kind": "ServiceAccount", "name": "hitl-inbox", "namespace": ns}}) {
			t.Errorf("the inbox's ClusterRoleBinding binds %s to %v", ref, subjects)
		}
		pod, _, _ := unstructured.NestedMap(objs["Deployment team-x/hitl-inbox"].Object, "spec", "template", "spec")
		checkRestricted(t, "the inbox", pod)
		if pod["serviceAccountName"] != "hitl-inbox" {
			t.Errorf("the inbox runs as %v", pod["serviceAccountName"])
		}
		args(t, objs, "hitl-inbox", []string{"--user-header=X-Forwarded-User", "--groups-header=X-Forwarded-Groups",
			"--proxy-secret-header=X-Hitl-Proxy-Secret", "--proxy-secret-file=/etc/hitl-inbox/proxy/secret"}, []string{"--tls-cert-file"})
		if v := fmt.Sprint(pod["volumes"]); !strings.Contains(v, "secretName:hitl-inbox-proxy") {
			t.Errorf("the inbox does not mount the Secret hitl-inbox-proxy: %s", v)
		}
	})
	t.Run("notify", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"notify": map[string]any{"enabled": true, "inboxURL": "https://hitl.example.com"}}))
		has(t, objs, notify...)
		hasNot(t, objs, "RoleBinding team-a/hitl-notify-secrets")
		// The notifier's rights are config/notify's: it notifies (the
		// hitl.dev/notified record), it never answers or claims.
		rules := fmt.Sprint(objs["ClusterRole /hitl-notify"].Object["rules"])
		for _, want := range []string{"resources:[agents] verbs:[notify]", "resources:[userquestions] verbs:[get list watch patch]"} {
			if !strings.Contains(rules, want) {
				t.Errorf("the notifier's ClusterRole %s lacks %s", rules, want)
			}
		}
		if strings.Contains(rules, "questionreplies") || strings.Contains(rules, "questionclaims") || strings.Contains(rules, "answer") {
			t.Errorf("the notifier's ClusterRole may answer or claim: %s", rules)
		}
		if got := fmt.Sprint(objs["ClusterRole /hitl-notify-secrets"].Object["rules"]); got != "[map[apiGroups:[] resources:[secrets] verbs:[get]]]" {
			t.Errorf("hitl-notify-secrets grants %s", got)
		}
		subjects := fmt.Sprint(objs["ClusterRoleBinding /hitl-notify"].Object["subjects"])
		if subjects != "[map[kind:ServiceAccount name:hitl-notify namespace:team-x]]" {
			t.Errorf("the notifier's ClusterRoleBinding binds %s", subjects)
		}
		d := objs["Deployment team-x/hitl-notify"].Object
		if r := number(d, "spec", "replicas"); r != 2 {
			t.Errorf("the notifier has %d replicas, want 2 (one leads)", r)
		}
		pod, _, _ := unstructured.NestedMap(d, "spec", "template", "spec")
		checkRestricted(t, "the notifier", pod)
		if pod["serviceAccountName"] != "hitl-notify" {
			t.Errorf("the notifier runs as %v", pod["serviceAccountName"])
		}
		args(t, objs, "hitl-notify", []string{"--leader-elect", "--inbox-url=https://hitl.example.com", "--metrics-bind-address=:8443"}, nil)
		if img := container(t, objs, "hitl-notify")["image"]; img != "ghcr.io/hitl-dev/hitl:"+chartAppVersion(t) {
			t.Errorf("the notifier's image is %v, not hitl's one image", img)
		}
	})
	t.Run("notify with its values", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"image": map[string]any{"tag": "v9"}, "notify": map[string]any{"enabled": true, "replicas": 1,
			"secretNamespaces": []any{"team-a", "team-b"}, "extraArgs": []any{"--resync=5m"},
			"resources": map[string]any{"limits": map[string]any{"memory": "100Mi"}}}}))
		args(t, objs, "hitl-notify", []string{"--resync=5m"}, []string{"--inbox-url"})
		c := container(t, objs, "hitl-notify")
		if c["image"] != "ghcr.io/hitl-dev/hitl:v9" {
			t.Errorf("the notifier's image is %v", c["image"])
		}
		// Helm merges the values' maps: the requests stay the defaults.
		if got := fmt.Sprint(c["resources"]); got != "map[limits:map[memory:100Mi] requests:map[cpu:20m memory:48Mi]]" {
			t.Errorf("the notifier's resources are %s", got)
		}
		if r := number(objs["Deployment team-x/hitl-notify"].Object, "spec", "replicas"); r != 1 {
			t.Errorf("replicas %d, want 1", r)
		}
		for _, team := range []string{"team-a", "team-b"} {
			b := objs["RoleBinding "+team+"/hitl-notify-secrets"]
			if b == nil {
				t.Errorf("no RoleBinding of hitl-notify-secrets in %s", team)
				continue
			}
			if ref, _, _ := unstructured.NestedString(b.Object, "roleRef", "name"); ref != "hitl-notify-secrets" {
				t.Errorf("the RoleBinding in %s binds %s", team, ref)
			}
			if got := fmt.Sprint(b.Object["subjects"]); got != "[map[kind:ServiceAccount name:hitl-notify namespace:team-x]]" {
				t.Errorf("the RoleBinding in %s binds %s", team, got)
			}
		}
	})
	t.Run("inbox with other headers, namespaces, no NetworkPolicy", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"inbox": map[string]any{"enabled": true,
			"userHeader": "X-Auth-Request-User", "groupsHeader": "X-Auth-Request-Groups",
			"proxySecret":   map[string]any{"secretName": "proxy", "key": "token", "header": "X-Proxy-Token"},
			"namespaces":    []any{"agents", "bots"},
			"networkPolicy": map[string]any{"enabled": false}}}))
		hasNot(t, objs, "NetworkPolicy team-x/hitl-inbox")
		args(t, objs, "hitl-inbox", []string{"--user-header=X-Auth-Request-User", "--groups-header=X-Auth-Request-Groups",
			"--proxy-secret-header=X-Proxy-Token", "--proxy-secret-file=/etc/hitl-inbox/proxy/token", "--namespaces=agents,bots"}, nil)
	})
	t.Run("inbox with mTLS and no shared secret", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"inbox": mtlsInbox("")}))
		args(t, objs, "hitl-inbox", []string{"--tls-cert-file=/etc/hitl-inbox/tls/tls.crt", "--tls-key-file=/etc/hitl-inbox/tls/tls.key",
			"--client-ca-file=/etc/hitl-inbox/client-ca/ca.crt", "--proxy-client-names=oauth2-proxy.auth.svc,proxy"}, []string{"--proxy-secret-file"})
		c := container(t, objs, "hitl-inbox")
		// The kubelet cannot pass the mTLS handshake: the probes connect only.
		for _, p := range []string{"livenessProbe", "readinessProbe"} {
			if _, ok, _ := unstructured.NestedMap(c, p, "tcpSocket"); !ok {
				t.Errorf("the %s is not a TCP probe: %v", p, c[p])
			}
		}
		pod, _, _ := unstructured.NestedMap(objs["Deployment team-x/hitl-inbox"].Object, "spec", "template", "spec")
		if v := fmt.Sprint(pod["volumes"]); strings.Contains(v, "hitl-inbox-proxy") || !strings.Contains(v, "secretName:inbox-tls") || !strings.Contains(v, "secretName:proxy-ca") {
			t.Errorf("volumes %s, want the TLS and CA Secrets and no shared secret", v)
		}
	})
	t.Run("inbox with TLS probes over HTTPS", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"inbox": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "inbox-tls"}}}))
		if s, _, _ := unstructured.NestedString(container(t, objs, "hitl-inbox"), "readinessProbe", "httpGet", "scheme"); s != "HTTPS" {
			t.Errorf("readiness probe scheme %q, want HTTPS", s)
		}
	})

	t.Run("feedback webhook", func(t *testing.T) {
		objs := byKey(template(t, ns, map[string]any{"webhook": map[string]any{"feedback": map[string]any{"enabled": true}}}))
		has(t, objs, append(append(feedback, mutatingPolicies...), validatingPolicies...)...)
		hasNot(t, objs, mutatingWebhooks)
		args(t, objs, "hitl-controller-manager", webhookArgs, nil)
	})
	for _, kube := range []string{"v1.30.0", "v1.35.4", latest} {
		t.Run("webhook mode on "+kube, func(t *testing.T) {
			objs := byKey(templateFor(t, ns, kube, map[string]any{"webhook": map[string]any{"mode": map[string]any{"enabled": true}}}))
			// The mutating webhooks stamp in place of the mutating
			// policies; identity and authorization are still the
			// validating policies' (config/webhook-mode).
			has(t, objs, append(append(feedback, mutatingWebhooks), validatingPolicies...)...)
			hasNot(t, objs, mutatingPolicies...)
			args(t, objs, "hitl-controller-manager", webhookArgs, nil)
			hooks, _, _ := unstructured.NestedSlice(objs[mutatingWebhooks].Object, "webhooks")
			for _, h := range hooks {
				if h := h.(map[string]any); h["failurePolicy"] != "Fail" {
					t.Errorf("the mutating webhook %v fails %v, not closed", h["name"], h["failurePolicy"])
				}
			}
		})
	}
}

func byKey(objs, _ []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

func has(t *testing.T, objs map[string]*unstructured.Unstructured, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if objs[k] == nil {
			t.Errorf("no %s", k)
		}
	}
}

func hasNot(t *testing.T, objs map[string]*unstructured.Unstructured, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if objs[k] != nil {
			t.Errorf("an unexpected %s", k)
		}
	}
}

// container is the first container of the Deployment name.
func container(t *testing.T, objs map[string]*unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	for k, o := range objs {
		if strings.HasPrefix(k, "Deployment ") && o.GetName() == name {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(cs) > 0 {
				return cs[0].(map[string]any)
			}
		}
	}
	t.Fatalf("no Deployment %s with a container", name)
	return nil
}

// args checks that the arguments of the Deployment name's container include
// every one of want, and none that starts with one of unwanted.
func args(t *testing.T, objs map[string]*unstructured.Unstructured, name string, want, unwanted []string) {
	t.Helper()
	got, _, _ := unstructured.NestedStringSlice(container(t, objs, name), "args")
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s's args %v lack %s", name, got, w)
		}
	}
	for _, u := range unwanted {
		if slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, u) }) {
			t.Errorf("%s's args %v have %s", name, got, u)
		}
	}
}

// checkRestricted checks that a pod meets the restricted Pod Security
// Standard, every container of it.
func checkRestricted(t *testing.T, what string, pod map[string]any) {
	t.Helper()
	if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
		t.Errorf("%s may run as root", what)
	}
	if v, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
		t.Errorf("%s: seccompProfile %q", what, v)
	}
	cs, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(cs) == 0 {
		t.Errorf("%s has no container", what)
	}
	for _, c := range cs {
		c := c.(map[string]any)
		if v, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation"); !found || v {
			t.Errorf("%s: container %v may escalate privileges", what, c["name"])
		}
		if v, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !v {
			t.Errorf("%s: the root file system of container %v is writable", what, c["name"])
		}
		if v, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop"); !slices.Equal(v, []string{"ALL"}) {
			t.Errorf("%s: container %v drops capabilities %v, not ALL", what, c["name"], v)
		}
	}
}

// TestChartEqualsConfig renders the chart into hitl-system with its options
// and the overlay of config/ that installs the same, and compares them
// object by object.
func TestChartEqualsConfig(t *testing.T) {
	for overlay, vals := range map[string]map[string]any{
		"default":          {},
		"mcp":              {"mcp": map[string]any{"enabled": true}},
		"inbox":            {"inbox": map[string]any{"enabled": true}},
		"notify":           {"notify": map[string]any{"enabled": true, "inboxURL": "https://hitl.example.com"}},
		"webhook-feedback": {"webhook": map[string]any{"feedback": map[string]any{"enabled": true}}},
		"webhook-mode":     {"webhook": map[string]any{"mode": map[string]any{"enabled": true}}},
	} {
		t.Run(overlay, func(t *testing.T) {
			want := kustomize(t, filepath.Join(configDir, overlay))
			vals["image"] = map[string]any{"tag": "latest"}
			// config/apf is in the overlays that list it (config/default's
			// FlowSchema is required by TestTemplateToggles).
			vals["apf"] = map[string]any{"enabled": slices.ContainsFunc(want, func(o *unstructured.Unstructured) bool { return o.GetKind() == "FlowSchema" })}
			objs, crds := template(t, "hitl-system", vals)
			chart := map[string]*unstructured.Unstructured{}
			for _, o := range append(objs, crds...) {
				chart[key(o)] = o
			}
			for _, w := range want {
				if w.GetKind() == "Namespace" {
					continue // Helm installs into an existing (or --create-namespace) one
				}
				got := chart[key(w)]
				if got == nil {
					t.Errorf("the chart has no %s", key(w))
					continue
				}
				delete(chart, key(w))
				g, e := comparable(got), comparable(w)
				if !equality.Semantic.DeepEqual(g, e) {
					t.Errorf("%s differs from config/%s:\nchart:  %v\nconfig: %v", key(w), overlay, g, e)
				}
			}
			for k := range chart {
				t.Errorf("the chart has %s, which config/%s does not", k, overlay)
			}
		})
	}
}

// comparable drops what the chart adds by design: Helm's labels on the
// hand-written objects, and the manager's spreading over nodes.
func comparable(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	labels := c.GetLabels()
	for _, k := range []string{"app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
		delete(labels, k)
	}
	c.SetLabels(labels)
	if c.GetKind() == "Deployment" && c.GetName() == "hitl-controller-manager" {
		unstructured.RemoveNestedField(c.Object, "spec", "template", "spec", "affinity")
	}
	return c.Object
}

// TestChartAppliesServerSide applies the rendered chart with every option
// (but the ServiceMonitor, whose CRD the API server lacks) to a real API
// server as `helm install` would (CRDs first), and checks that its admission
// policies then act; then upgrades it to webhook mode, as `helm upgrade`
// would (what the new release lacks is deleted), and checks that its
// mutating webhook, which no manager serves here, now decides.
func TestChartAppliesServerSide(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Setenv("KUBEBUILDER_ASSETS", filepath.Join(testenv.Root(), "bin", "k8s"))
	}
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{Scheme: testenv.Scheme()}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server (run `make envtest-assets`): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	noMonitor := func(vals map[string]any) map[string]any {
		delete(vals, "serviceMonitor")
		return vals
	}
	objs, crds := template(t, "hitl-system", noMonitor(everything()))
	for _, k := range []string{"Deployment hitl-system/hitl-inbox", "Deployment hitl-system/hitl-notify", "FlowSchema /hitl-manager", "Deployment hitl-system/hitl-mcp", "ValidatingWebhookConfiguration /hitl-validating-webhook-configuration"} {
		if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return key(o) == k }) {
			t.Errorf("everything renders no %s", k)
		}
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "hitl-system"}}}
	apply := func(o *unstructured.Unstructured) {
		t.Helper()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("server-side apply of %s: %v", key(o), err)
		}
	}
	apply(ns)
	for _, o := range crds {
		apply(o)
	}
	for _, o := range crds {
		waitEstablished(ctx, t, c, o.GetName())
	}
	for _, o := range objs {
		apply(o)
	}
	// Every object is there as rendered.
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s: %v", key(o), err)
		}
	}
	if err := testenv.WaitForPolicies(ctx, c, "hitl-system", true, time.Minute); err != nil {
		t.Fatalf("the chart's admission policies do not act: %v", err)
	}

	upgraded, _ := template(t, "hitl-system", noMonitor(webhookMode()))
	for _, o := range upgraded {
		apply(o)
	}
	for _, o := range objs {
		if !slices.ContainsFunc(upgraded, func(u *unstructured.Unstructured) bool { return key(u) == key(o) }) {
			if err := c.Delete(ctx, o); err != nil {
				t.Fatalf("deleting %s, which webhook mode lacks: %v", key(o), err)
			}
		}
	}
	// The API server calls the webhook (and fails: nothing serves it)
	// once it has seen the configuration.
	q := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "hitl.dev/v1alpha1", "kind": "UserQuestion",
		"metadata": map[string]any{"namespace": "hitl-system", "name": "probe"}, "spec": map[string]any{}}}
	deadline := time.After(30 * time.Second)
	for {
		err := c.Create(ctx, q.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), `failed calling webhook "muserquestion.hitl.dev"`) {
			t.Logf("webhook mode: %v", err)
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the mutating webhook muserquestion.hitl.dev is not called: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	var last error
	for {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if last = c.Get(ctx, client.ObjectKey{Name: name}, crd); last == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				if m := cond.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s is not established (%v)", name, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// number reads an integer field of decoded JSON (a float64), or -1.
func number(obj map[string]any, fields ...string) int64 {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if !found || err != nil {
		return -1
	}
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	}
	return -1
}

// latest is the version of the API servers the tests run.
const latest = "v1.37.2"

func kubeVersion(t *testing.T, version string) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// template renders the chart for the latest Kubernetes as `helm template
// --include-crds` does and returns its objects and its CRDs.
func template(t *testing.T, namespace string, vals map[string]any) (objs, crds []*unstructured.Unstructured) {
	t.Helper()
	return templateFor(t, namespace, latest, vals)
}

// templateFor is template for Kubernetes kube.
func templateFor(t *testing.T, namespace, kube string, vals map[string]any) (objs, crds []*unstructured.Unstructured) {
	t.Helper()
	manifest, crdFiles, err := render(namespace, kube, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs = decode(t, []byte(manifest))
	for _, f := range crdFiles {
		crds = append(crds, decode(t, f)...)
	}
	return objs, crds
}

func render(namespace, kube string, vals map[string]any) (string, [][]byte, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", nil, err
	}
	kv, err := common.ParseKubeVersion(kube)
	if err != nil {
		return "", nil, err
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = "hitl"
	install.Namespace = namespace
	install.KubeVersion = kv
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return "", nil, fmt.Errorf("release of type %T", rel)
	}
	var crds [][]byte
	for _, f := range chrt.CRDObjects() {
		crds = append(crds, f.File.Data)
	}
	return r.Manifest, crds, nil
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

func manifest(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// chartAppVersion is the chart's appVersion, the default tag of hitl's image.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return chrt.Metadata.AppVersion
}
