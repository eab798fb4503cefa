package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDefaultOverlayFollowsItsNamespaceAndPrefix edits config/default's
// namespace and namePrefix, as someone installing hitl elsewhere would, and
// the Certificate's Secret, and checks that every reference follows.
func TestDefaultOverlayFollowsItsNamespaceAndPrefix(t *testing.T) {
	root := copyConfig(t)
	edit(t, filepath.Join(root, "default", "kustomization.yaml"), map[string]string{
		"namespace: hitl-system": "namespace: team-a",
		"namePrefix: hitl-":      "namePrefix: qa-hitl-",
	})
	edit(t, filepath.Join(root, "certmanager", "certificate.yaml"), map[string]string{
		"secretName: webhook-server-cert": "secretName: qa-webhook-cert",
	})
	set := decodeAll(t, render(t, filepath.Join(root, "default")))
	for _, p := range set.problems(true) {
		t.Error(p)
	}
	for _, o := range set.all {
		if o.Kind == "Namespace" {
			if o.Name != "team-a" {
				t.Errorf("%s: want namespace team-a", o)
			}
			continue
		}
		if o.Namespace != "" && o.Namespace != "team-a" {
			t.Errorf("%s: not in namespace team-a", o)
		}
		if o.Kind != "CustomResourceDefinition" && !strings.HasPrefix(o.Name, "qa-hitl-") {
			t.Errorf("%s: the name lacks the prefix qa-hitl-", o)
		}
	}
	cert := set.get("Certificate", "team-a", "qa-hitl-serving-cert")
	if cert == nil {
		t.Fatal("no Certificate team-a/qa-hitl-serving-cert")
	}
	if got, want := cert.typed.(*certificate).Spec.DNSNames[0], "qa-hitl-webhook-service.team-a.svc"; got != want {
		t.Errorf("the Certificate's first DNS name is %s, want %s", got, want)
	}
}

// TestChecksFindBrokenReferences breaks one reference at a time in the
// rendered config/default and expects the checks to say so: a check that
// finds nothing is no check.
func TestChecksFindBrokenReferences(t *testing.T) {
	rendered := render(t, filepath.Join(configDir, "default"))
	if set := decodeAll(t, rendered); len(set.problems(true)) > 0 {
		t.Fatalf("config/default has problems before any is made: %v", set.problems(true))
	}
	cases := []struct {
		name, kind string
		mutate     func(obj map[string]any)
		want       string
	}{
		{"issuerRef without the prefix (issue 13)", "Certificate", func(o map[string]any) {
			at(o, "spec", "issuerRef")["name"] = "selfsigned-issuer"
		}, "spec.issuerRef names Issuer hitl-system/selfsigned-issuer"},
		{"inject-ca-from without the prefix", "ValidatingWebhookConfiguration", func(o map[string]any) {
			at(o, "metadata", "annotations")[injectCAFrom] = "hitl-system/serving-cert"
		}, "names Certificate hitl-system/serving-cert"},
		{"inject-ca-from in another namespace", "MutatingWebhookConfiguration", func(o map[string]any) {
			at(o, "metadata", "annotations")[injectCAFrom] = "system/hitl-serving-cert"
		}, "names Certificate system/hitl-serving-cert"},
		{"no inject-ca-from", "MutatingWebhookConfiguration", func(o map[string]any) {
			delete(at(o, "metadata", "annotations"), injectCAFrom)
		}, "no cert-manager.io/inject-ca-from annotation"},
		{"certificate for another Service", "Certificate", func(o map[string]any) {
			at(o, "spec")["dnsNames"] = []any{"webhook-service.system.svc"}
		}, "not the webhook Service's hitl-webhook-service.hitl-system.svc"},
		{"webhook Service in another namespace", "ValidatingWebhookConfiguration", func(o map[string]any) {
			at(item(o, "webhooks", 1), "clientConfig", "service")["namespace"] = "system"
		}, "names Service system/hitl-webhook-service"},
		{"webhook Service without the prefix", "MutatingWebhookConfiguration", func(o map[string]any) {
			at(item(o, "webhooks", 0), "clientConfig", "service")["name"] = "webhook-service"
		}, "names Service hitl-system/webhook-service"},
		{"volume of a Secret no Certificate issues", "Deployment", func(o map[string]any) {
			at(item(at(o, "spec", "template", "spec"), "volumes", 0), "secret")["secretName"] = "hitl-webhook-server-cert"
		}, "mounts Secret hitl-webhook-server-cert, which no Certificate"},
		{"ServiceAccount without the prefix", "Deployment", func(o map[string]any) {
			at(o, "spec", "template", "spec")["serviceAccountName"] = "controller-manager"
		}, "serviceAccountName names ServiceAccount hitl-system/controller-manager"},
		{"Role without the prefix", "RoleBinding", func(o map[string]any) {
			at(o, "roleRef")["name"] = "leader-election-role"
		}, "roleRef names Role hitl-system/leader-election-role"},
		{"ClusterRole without the prefix", "ClusterRoleBinding", func(o map[string]any) {
			at(o, "roleRef")["name"] = "manager-role"
		}, "roleRef names ClusterRole manager-role"},
		{"subject in the base's namespace", "ClusterRoleBinding", func(o map[string]any) {
			item(o, "subjects", 0)["namespace"] = "system"
		}, "a subject names ServiceAccount system/hitl-controller-manager"},
		{"Service selecting nothing", "Service", func(o map[string]any) {
			at(o, "spec", "selector")["app.kubernetes.io/component"] = "webhook"
		}, "selects no Deployment's pods"},
		{"Service sending to a port the pods lack", "Service", func(o map[string]any) {
			item(at(o, "spec"), "ports", 0)["targetPort"] = int64(9444)
		}, "port 443 targets 9444"},
		{"namespace not in the output", "Namespace", func(o map[string]any) {
			at(o, "metadata")["name"] = "system"
		}, "its namespace is not in the output"},
		{"a misspelt field", "Deployment", func(o map[string]any) {
			at(o, "spec")["replica"] = int64(2)
		}, `unknown field "spec.replica"`},
		{"a misspelt cert-manager field", "Certificate", func(o map[string]any) {
			at(o, "spec")["dnsName"] = "x"
		}, `unknown field "dnsName"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs := make([][]byte, 0, len(rendered))
			mutated := 0
			for _, data := range rendered {
				var obj map[string]any
				if err := yaml.Unmarshal(data, &obj); err != nil {
					t.Fatal(err)
				}
				if obj["kind"] == c.kind && mutated == 0 {
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
				t.Fatalf("config/default has no %s", c.kind)
			}
			set, errs := decode(docs)
			found := set.problems(true)
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
