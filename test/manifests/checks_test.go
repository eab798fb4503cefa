package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestOverlaysFollowTheirNamespaceAndPrefix edits each install overlay's
// namespace and namePrefix (for config/webhook-feedback and
// config/webhook-mode, those of their base config/with-webhooks), as someone
// installing hitl elsewhere would, and the Certificate's Secret, and checks
// that every reference follows.
func TestOverlaysFollowTheirNamespaceAndPrefix(t *testing.T) {
	for _, c := range []struct{ overlay, kustomization string }{
		{"default", "default"},
		{"webhook-feedback", "with-webhooks"},
		{"webhook-mode", "with-webhooks"},
		{"webhook-feedback-certmanager", "with-webhooks-certmanager"},
		{"webhook-mode-certmanager", "with-webhooks-certmanager"},
	} {
		t.Run(c.overlay, func(t *testing.T) {
			root := copyConfig(t)
			edit(t, filepath.Join(root, c.kustomization, "kustomization.yaml"), map[string]string{
				"namespace: hitl-system": "namespace: team-a",
				"namePrefix: hitl-":      "namePrefix: qa-hitl-",
			})
			edit(t, filepath.Join(root, "certmanager", "certificate.yaml"), map[string]string{
				"secretName: webhook-server-cert": "secretName: qa-webhook-cert",
			})
			set := decodeAll(t, render(t, filepath.Join(root, c.overlay)))
			for _, p := range set.problems(true) {
				t.Error(p)
			}
			for _, p := range overlayProblems(c.overlay, set) {
				t.Error(p)
			}
			for _, o := range set.all {
				if o.Kind == "Namespace" {
					if o.Name != "team-a" {
						t.Errorf("%s: want namespace team-a", o)
					}
					continue
				}
				if !clusterScoped[o.Kind] && o.Namespace != "team-a" {
					t.Errorf("%s: not in namespace team-a", o)
				}
				if o.Kind != "CustomResourceDefinition" && !strings.HasPrefix(o.Name, "qa-hitl-") {
					t.Errorf("%s: the name lacks the prefix qa-hitl-", o)
				}
			}
			if set.get("ConfigMap", "team-a", "qa-hitl-admission") == nil {
				t.Error("no ConfigMap team-a/qa-hitl-admission")
			}
			if c.overlay == "default" {
				return
			}
			if !strings.HasSuffix(c.overlay, "-certmanager") {
				// The manager's own certificate: its Secret is not renamed
				// (the flag and the label name it alike), the webhook
				// configurations are.
				if set.get("ValidatingWebhookConfiguration", "", "qa-hitl-validating-webhook-configuration") == nil {
					t.Error("no ValidatingWebhookConfiguration qa-hitl-validating-webhook-configuration")
				}
				return
			}
			cert := set.get("Certificate", "team-a", "qa-hitl-serving-cert")
			if cert == nil {
				t.Fatal("no Certificate team-a/qa-hitl-serving-cert")
			}
			if got, want := cert.typed.(*certificate).Spec.DNSNames[0], "qa-hitl-webhook-service.team-a.svc"; got != want {
				t.Errorf("the Certificate's first DNS name is %s, want %s", got, want)
			}
		})
	}
}

// TestChecksFindBrokenReferences breaks one thing at a time in a rendered
// install overlay and expects the checks (problems, overlayProblems) or the
// strict decoding to say so: a check that finds nothing is no check.
func TestChecksFindBrokenReferences(t *testing.T) {
	rendered := map[string][][]byte{}
	for _, overlay := range []string{"default", "webhook-feedback", "webhook-mode", "prometheus", "webhook-feedback-certmanager", "webhook-mode-certmanager"} {
		rendered[overlay] = render(t, filepath.Join(configDir, overlay))
		set := decodeAll(t, rendered[overlay])
		if found := append(set.problems(true), overlayProblems(overlay, set)...); len(found) > 0 {
			t.Fatalf("config/%s has problems before any is made: %v", overlay, found)
		}
	}
	const (
		dflt       = "default"
		feedback   = "webhook-feedback"
		mode       = "webhook-mode"
		cmFeedback = "webhook-feedback-certmanager"
		cmMode     = "webhook-mode-certmanager"
	)
	cases := []struct {
		name, overlay, kind string
		objName             string // the object of kind to break; the first if empty
		mutate              func(obj map[string]any)
		want                string
	}{
		// Admission policies.
		{"binding naming a missing policy", dflt, "ValidatingAdmissionPolicyBinding", "", func(o map[string]any) {
			at(o, "spec")["policyName"] = "question-identity"
		}, "spec.policyName names ValidatingAdmissionPolicy question-identity, which is not in the output"},
		{"mutating binding naming a missing policy", dflt, "MutatingAdmissionPolicyBinding", "", func(o map[string]any) {
			at(o, "spec")["policyName"] = "hitl-reply-identity-v2"
		}, "spec.policyName names MutatingAdmissionPolicy hitl-reply-identity-v2"},
		{"binding naming a policy of the other family", mode, "ValidatingAdmissionPolicyBinding", "hitl-question-identity", func(o map[string]any) {
			// hitl-question-agent-label is a MutatingAdmissionPolicy, and
			// webhook-mode has none.
			at(o, "spec")["policyName"] = "hitl-question-agent-label"
		}, "names ValidatingAdmissionPolicy hitl-question-agent-label"},
		{"policy without a binding", dflt, "ValidatingAdmissionPolicy", "hitl-reply-identity", func(o map[string]any) {
			at(o, "metadata")["name"] = "hitl-reply-identity-v2"
		}, "ValidatingAdmissionPolicy hitl-reply-identity-v2: no ValidatingAdmissionPolicyBinding binds it"},
		{"paramRef naming a missing ConfigMap", dflt, "ValidatingAdmissionPolicyBinding", "hitl-question-timeout", func(o map[string]any) {
			at(o, "spec", "paramRef")["name"] = "admission"
		}, "spec.paramRef names ConfigMap hitl-system/admission, which is not in the output"},
		{"paramRef in another namespace", feedback, "ValidatingAdmissionPolicyBinding", "hitl-question-timeout", func(o map[string]any) {
			at(o, "spec", "paramRef")["namespace"] = "system"
		}, "spec.paramRef names ConfigMap system/hitl-admission"},
		{"paramRef without a namespace", dflt, "ValidatingAdmissionPolicyBinding", "hitl-question-timeout", func(o map[string]any) {
			delete(at(o, "spec", "paramRef"), "namespace")
		}, "spec.paramRef has no namespace"},
		{"paramRef of another kind than the paramKind", dflt, "ValidatingAdmissionPolicy", "hitl-question-timeout", func(o map[string]any) {
			at(o, "spec", "paramKind")["kind"] = "Secret"
		}, "spec.paramRef names Secret hitl-system/hitl-admission"},
		{"paramRef of another version than the paramKind", dflt, "ValidatingAdmissionPolicy", "hitl-question-timeout", func(o map[string]any) {
			at(o, "spec", "paramKind")["apiVersion"] = "v2"
		}, "but its policy's paramKind is v2 ConfigMap"},
		{"paramRef selecting nothing", dflt, "ValidatingAdmissionPolicyBinding", "hitl-question-timeout", func(o map[string]any) {
			ref := at(o, "spec", "paramRef")
			delete(ref, "name")
			ref["selector"] = map[string]any{"matchLabels": map[string]any{"hitl.dev/params": "admission"}}
		}, "selects no v1 ConfigMap"},
		{"ApprovalPolicy paramRef in one namespace", dflt, "ValidatingAdmissionPolicyBinding", "hitl-question-approval", func(o map[string]any) {
			at(o, "spec", "paramRef")["namespace"] = "hitl-system"
		}, "parameters are the request namespace's"},
		{"ApprovalPolicy paramRef that denies without parameters", dflt, "ValidatingAdmissionPolicyBinding", "hitl-question-approval", func(o map[string]any) {
			at(o, "spec", "paramRef")["parameterNotFoundAction"] = "Deny"
		}, "parameterNotFoundAction is not Allow"},
		{"binding without the paramRef its policy needs", dflt, "ValidatingAdmissionPolicyBinding", "hitl-question-timeout", func(o map[string]any) {
			delete(at(o, "spec"), "paramRef")
		}, "has no spec.paramRef, but its policy hitl-question-timeout has spec.paramKind v1 ConfigMap"},
		{"paramRef for a policy without a paramKind", dflt, "ValidatingAdmissionPolicyBinding", "hitl-reply-identity", func(o map[string]any) {
			at(o, "spec")["paramRef"] = map[string]any{"name": "hitl-admission", "namespace": "hitl-system"}
		}, "has a spec.paramRef, but its policy hitl-reply-identity has no spec.paramKind"},
		{"parameter ConfigMap without the key the policy reads", dflt, "ConfigMap", "hitl-admission", func(o map[string]any) {
			o["data"] = map[string]any{"maxTimeOut": "24h"}
		}, "reads params.data.maxTimeout"},
		{"cluster-scoped policy with a namespace", dflt, "MutatingAdmissionPolicy", "", func(o map[string]any) {
			at(o, "metadata")["namespace"] = "hitl-system"
		}, "MutatingAdmissionPolicy is cluster-scoped, yet it has a namespace"},
		{"policy failing open", dflt, "ValidatingAdmissionPolicy", "hitl-question-identity", func(o map[string]any) {
			at(o, "spec")["failurePolicy"] = "Ignore"
		}, "has failurePolicy Ignore"},
		{"binding that only warns", dflt, "ValidatingAdmissionPolicyBinding", "", func(o map[string]any) {
			at(o, "spec")["validationActions"] = []any{"Warn"}
		}, "spec.validationActions [Warn] lacks Deny"},
		{"nothing stamps replies", dflt, "MutatingAdmissionPolicy", "hitl-reply-identity", func(o map[string]any) {
			item(at(o, "spec", "matchConstraints"), "resourceRules", 0)["operations"] = []any{"UPDATE"}
		}, "nothing stamps questionreplies on CREATE"},
		{"a misspelt policy field", dflt, "ValidatingAdmissionPolicy", "", func(o map[string]any) {
			at(o, "spec")["validation"] = []any{}
		}, `unknown field "spec.validation"`},
		{"a v1beta1 policy", dflt, "MutatingAdmissionPolicy", "", func(o map[string]any) {
			o["apiVersion"] = "admissionregistration.k8s.io/v1beta1"
		}, "apiVersion admissionregistration.k8s.io/v1beta1: want admissionregistration.k8s.io/v1"},

		// Webhooks and their failure policies.
		{"feedback webhook failing closed", feedback, "ValidatingWebhookConfiguration", "", func(o map[string]any) {
			item(o, "webhooks", 0)["failurePolicy"] = "Fail"
		}, "webhook vquestionreply.hitl.dev has failurePolicy Fail"},
		{"feedback webhook failing closed by default", feedback, "ValidatingWebhookConfiguration", "", func(o map[string]any) {
			delete(item(o, "webhooks", 0), "failurePolicy")
		}, "webhook vquestionreply.hitl.dev has failurePolicy Fail"},
		{"another feedback webhook", feedback, "ValidatingWebhookConfiguration", "", func(o map[string]any) {
			item(o, "webhooks", 0)["name"] = "vuserquestion.hitl.dev"
		}, "want exactly the validating webhook vquestionreply.hitl.dev"},
		{"mutating webhook failing open in webhook mode", mode, "MutatingWebhookConfiguration", "", func(o map[string]any) {
			item(o, "webhooks", 0)["failurePolicy"] = "Ignore"
		}, "does not have failurePolicy Fail"},
		{"manager of the default install serving webhooks", dflt, "Deployment", "", func(o map[string]any) {
			c := item(at(o, "spec", "template", "spec"), "containers", 0)
			c["args"] = append(c["args"].([]any), "--enable-webhooks")
		}, "runs with --enable-webhooks, but the overlay has no webhook configuration"},
		{"manager of the feedback webhook not serving it", feedback, "Deployment", "", func(o map[string]any) {
			c := item(at(o, "spec", "template", "spec"), "containers", 0)
			c["args"] = []any{"--leader-elect", "--enable-webhooks=false"}
		}, "does not run with --enable-webhooks, but the overlay has webhooks"},

		// cert-manager and the webhook Service.
		{"issuerRef without the prefix (issue 13)", cmFeedback, "Certificate", "", func(o map[string]any) {
			at(o, "spec", "issuerRef")["name"] = "selfsigned-issuer"
		}, "spec.issuerRef names Issuer hitl-system/selfsigned-issuer"},
		{"inject-ca-from without the prefix", cmFeedback, "ValidatingWebhookConfiguration", "", func(o map[string]any) {
			at(o, "metadata", "annotations")[injectCAFrom] = "hitl-system/serving-cert"
		}, "names Certificate hitl-system/serving-cert"},
		{"inject-ca-from in another namespace", cmMode, "MutatingWebhookConfiguration", "", func(o map[string]any) {
			at(o, "metadata", "annotations")[injectCAFrom] = "system/hitl-serving-cert"
		}, "names Certificate system/hitl-serving-cert"},
		{"no inject-ca-from", cmMode, "MutatingWebhookConfiguration", "", func(o map[string]any) {
			delete(at(o, "metadata", "annotations"), injectCAFrom)
		}, "no cert-manager.io/inject-ca-from annotation"},
		{"certificate for another Service", cmFeedback, "Certificate", "", func(o map[string]any) {
			at(o, "spec")["dnsNames"] = []any{"webhook-service.system.svc"}
		}, "not the webhook Service's hitl-webhook-service.hitl-system.svc"},
		{"webhook Service in another namespace", feedback, "ValidatingWebhookConfiguration", "", func(o map[string]any) {
			at(item(o, "webhooks", 0), "clientConfig", "service")["namespace"] = "system"
		}, "names Service system/hitl-webhook-service"},
		{"webhook Service without the prefix", mode, "MutatingWebhookConfiguration", "", func(o map[string]any) {
			at(item(o, "webhooks", 1), "clientConfig", "service")["name"] = "webhook-service"
		}, "names Service hitl-system/webhook-service"},
		{"volume of a Secret no Certificate issues", cmFeedback, "Deployment", "", func(o map[string]any) {
			at(item(at(o, "spec", "template", "spec"), "volumes", 0), "secret")["secretName"] = "hitl-webhook-server-cert"
		}, "mounts Secret hitl-webhook-server-cert, which no Certificate"},
		{"Service selecting nothing", feedback, "Service", "", func(o map[string]any) {
			at(o, "spec", "selector")["app.kubernetes.io/component"] = "webhook"
		}, "selects no Deployment's pods"},
		{"Service sending to a port the pods lack", mode, "Service", "hitl-webhook-service", func(o map[string]any) {
			item(at(o, "spec"), "ports", 0)["targetPort"] = int64(9444)
		}, "port 443 targets 9444"},
		{"a misspelt cert-manager field", cmFeedback, "Certificate", "", func(o map[string]any) {
			at(o, "spec")["dnsName"] = "x"
		}, `unknown field "dnsName"`},

		// The manager's own webhook certificate.
		{"CA injected from another Secret than the manager provisions", feedback, "ValidatingWebhookConfiguration", "", func(o map[string]any) {
			at(o, "metadata", "labels")[injectCALabel] = "webhook-server-cert"
		}, "the manager provisions the Secret hitl-webhook-server-cert"},
		{"no CA injection", mode, "MutatingWebhookConfiguration", "", func(o map[string]any) {
			delete(at(o, "metadata", "labels"), injectCALabel)
		}, "nothing injects a CA"},
		{"certificate provisioned into a read-only mount", feedback, "Deployment", "", func(o map[string]any) {
			c := item(at(o, "spec", "template", "spec"), "containers", 0)
			item(c, "volumeMounts", 0)["readOnly"] = true
		}, "writes its certificate to /tmp/k8s-webhook-server/serving-certs, which is not a writable volume"},

		// Metrics.
		{"metrics Service sending to a port the pods lack", dflt, "Service", "hitl-controller-manager-metrics-service", func(o map[string]any) {
			item(at(o, "spec"), "ports", 0)["targetPort"] = "metrics"
		}, "port 8443 targets metrics"},
		{"ServiceMonitor scraping a port the Service lacks", "prometheus", "ServiceMonitor", "", func(o map[string]any) {
			item(at(o, "spec"), "endpoints", 0)["port"] = "metrics"
		}, `endpoint port "metrics" is no port of a Service it selects`},
		{"ServiceMonitor scraping plain HTTP", "prometheus", "ServiceMonitor", "", func(o map[string]any) {
			item(at(o, "spec"), "endpoints", 0)["scheme"] = "http"
		}, "scrapes without HTTPS and a token"},
		{"a misspelt ServiceMonitor field", "prometheus", "ServiceMonitor", "", func(o map[string]any) {
			at(o, "spec")["endpoint"] = []any{}
		}, `unknown field "endpoint"`},

		// RBAC, the manager, the namespace.
		{"ServiceAccount without the prefix", dflt, "Deployment", "", func(o map[string]any) {
			at(o, "spec", "template", "spec")["serviceAccountName"] = "controller-manager"
		}, "serviceAccountName names ServiceAccount hitl-system/controller-manager"},
		{"Role without the prefix", dflt, "RoleBinding", "", func(o map[string]any) {
			at(o, "roleRef")["name"] = "leader-election-role"
		}, "roleRef names Role hitl-system/leader-election-role"},
		{"ClusterRole without the prefix", dflt, "ClusterRoleBinding", "", func(o map[string]any) {
			at(o, "roleRef")["name"] = "manager-role"
		}, "roleRef names ClusterRole manager-role"},
		{"subject in the base's namespace", dflt, "ClusterRoleBinding", "", func(o map[string]any) {
			item(o, "subjects", 0)["namespace"] = "system"
		}, "a subject names ServiceAccount system/hitl-controller-manager"},
		{"FlowSchema naming the ServiceAccount without the prefix", dflt, "FlowSchema", "", func(o map[string]any) {
			at(item(item(at(o, "spec"), "rules", 0), "subjects", 0), "serviceAccount")["name"] = "controller-manager"
		}, "a subject names ServiceAccount hitl-system/controller-manager"},
		{"FlowSchema naming a missing priority level", dflt, "FlowSchema", "", func(o map[string]any) {
			at(o, "spec", "priorityLevelConfiguration")["name"] = "manager"
		}, "spec.priorityLevelConfiguration names PriorityLevelConfiguration manager"},
		{"namespace not in the output", dflt, "Namespace", "", func(o map[string]any) {
			at(o, "metadata")["name"] = "system"
		}, "its namespace is not in the output"},
		{"a misspelt field", dflt, "Deployment", "", func(o map[string]any) {
			at(o, "spec")["replica"] = int64(2)
		}, `unknown field "spec.replica"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs := make([][]byte, 0, len(rendered[c.overlay]))
			mutated := 0
			for _, data := range rendered[c.overlay] {
				var obj map[string]any
				if err := yaml.Unmarshal(data, &obj); err != nil {
					t.Fatal(err)
				}
				if obj["kind"] == c.kind && (c.objName == "" || at(obj, "metadata")["name"] == c.objName) && mutated == 0 {
					c.mutate(obj)
					mutated++
					var err error
					if data, err = yaml.Marshal(obj); err != nil {
						t.Fatal(err)
					}
				}
				docs = append(docs, data)
			}
			if mutated == 0 {
				t.Fatalf("config/%s has no %s %s", c.overlay, c.kind, c.objName)
			}
			set, errs := decode(docs)
			found := append(set.problems(true), overlayProblems(c.overlay, set)...)
			for _, err := range errs {
				found = append(found, err.Error())
			}
			for _, p := range found {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("no problem says %q; found %q", c.want, found)
		})
	}
}

// at walks obj down the keys and returns the map there.
func at(obj map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		obj = obj[k].(map[string]any)
	}
	return obj
}

// item returns the i-th map of the list at obj[key].
func item(obj map[string]any, key string, i int) map[string]any {
	return obj[key].([]any)[i].(map[string]any)
}

// copyConfig copies config/ into a temporary directory and returns the copy.
func copyConfig(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(root, os.DirFS(configDir)); err != nil {
		t.Fatal(err)
	}
	return root
}

// edit replaces, in the file at path, each key of replace (which must occur
// in it) by its value.
func edit(t *testing.T, path string, replace map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for old, replacement := range replace {
		if !strings.Contains(text, old) {
			t.Fatalf("%s has no %q", path, old)
		}
		text = strings.ReplaceAll(text, old, replacement)
	}
	if err := os.WriteFile(path, []byte(text), fs.FileMode(0o644)); err != nil {
		t.Fatal(err)
	}
}
