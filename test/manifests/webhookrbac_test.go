package manifests

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The certificate Secret's annotations naming the webhook configurations
// the manager injects its CA into (internal/manager's
// MutatingConfigurationsAnnotation and ValidatingConfigurationsAnnotation).
var namedConfigurations = map[string]string{
	"mutatingwebhookconfigurations":   "hitl.dev/mutating-webhook-configurations",
	"validatingwebhookconfigurations": "hitl.dev/validating-webhook-configurations",
}

// kindOfResource is the kind of each webhook configuration resource.
var kindOfResource = map[string]string{
	"mutatingwebhookconfigurations":   "MutatingWebhookConfiguration",
	"validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
}

// TestManagerOwnsOnlyItsWebhookCertificate checks the manager's rights on
// Secrets and webhook configurations in every install overlay, as shipped
// and with another namespace and namePrefix (which must rename the
// resourceNames along with the objects): only what it owns, by name.
func TestManagerOwnsOnlyItsWebhookCertificate(t *testing.T) {
	for _, c := range []struct {
		overlay, kustomization string
		ownCertificate         bool
	}{
		{"default", "default", false},
		{"webhook-feedback", "with-webhooks", true},
		{"webhook-mode", "with-webhooks", true},
		{"webhook-feedback-certmanager", "with-webhooks-certmanager", false},
		{"webhook-mode-certmanager", "with-webhooks-certmanager", false},
	} {
		t.Run(c.overlay, func(t *testing.T) {
			set := decodeAll(t, render(t, filepath.Join(configDir, c.overlay)))
			for _, p := range certificateRBACProblems(set, c.ownCertificate) {
				t.Error(p)
			}
		})
		t.Run(c.overlay+" elsewhere", func(t *testing.T) {
			root := copyConfig(t)
			edit(t, filepath.Join(root, c.kustomization, "kustomization.yaml"), map[string]string{
				"namespace: hitl-system": "namespace: team-a",
				"namePrefix: hitl-":      "namePrefix: qa-hitl-",
			})
			set := decodeAll(t, render(t, filepath.Join(root, c.overlay)))
			for _, p := range certificateRBACProblems(set, c.ownCertificate) {
				t.Error(p)
			}
			if c.ownCertificate && set.get("Secret", "team-a", "qa-hitl-webhook-server-cert") == nil {
				t.Error("no Secret team-a/qa-hitl-webhook-server-cert")
			}
		})
	}
}

// TestCertificateRBACChecksFindExcess widens the shipped rights one way at
// a time and expects certificateRBACProblems to say so.
func TestCertificateRBACChecksFindExcess(t *testing.T) {
	rendered := map[string][][]byte{}
	for _, overlay := range []string{"webhook-mode", "webhook-feedback-certmanager"} {
		rendered[overlay] = render(t, filepath.Join(configDir, overlay))
	}
	for _, c := range []struct {
		name, overlay, kind, objName string
		mutate                       func(obj map[string]any)
		want                         string
	}{
		{"every Secret of the namespace", "webhook-mode", "Role", "hitl-webhook-certificate-role", func(o map[string]any) {
			delete(item(o, "rules", 0), "resourceNames")
		}, "is granted get, update on secrets [] in hitl-system; want only get, update on secrets [hitl-webhook-server-cert]"},
		{"creating Secrets", "webhook-mode", "Role", "hitl-webhook-certificate-role", func(o map[string]any) {
			item(o, "rules", 0)["verbs"] = []any{"get", "create", "update"}
		}, "is granted get, create, update on secrets"},
		{"Secrets by a ClusterRole", "webhook-mode", "ClusterRole", "hitl-webhook-ca-injector", func(o map[string]any) {
			r := item(o, "rules", 0)
			r["apiGroups"], r["resources"] = []any{"", "admissionregistration.k8s.io"}, []any{"mutatingwebhookconfigurations", "secrets"}
		}, "is granted get, patch on secrets [hitl-mutating-webhook-configuration] cluster-wide"},
		{"listing webhook configurations", "webhook-mode", "ClusterRole", "hitl-webhook-ca-injector", func(o map[string]any) {
			item(o, "rules", 1)["verbs"] = []any{"get", "list", "patch"}
		}, "is granted get, list, patch on validatingwebhookconfigurations"},
		{"every webhook configuration", "webhook-mode", "ClusterRole", "hitl-webhook-ca-injector", func(o map[string]any) {
			delete(item(o, "rules", 0), "resourceNames")
		}, "is granted get, patch on mutatingwebhookconfigurations [] cluster-wide; want only get, patch on mutatingwebhookconfigurations [hitl-mutating-webhook-configuration]"},
		{"a wildcard", "webhook-mode", "ClusterRole", "hitl-webhook-ca-injector", func(o map[string]any) {
			item(o, "rules", 1)["resources"] = []any{"*"}
		}, "is granted get, patch on *"},
		{"a configuration the Secret does not name", "webhook-mode", "Secret", "hitl-webhook-server-cert", func(o map[string]any) {
			at(o, "metadata", "annotations")["hitl.dev/validating-webhook-configurations"] = "validating-webhook-configuration"
		}, "ValidatingWebhookConfiguration hitl-validating-webhook-configuration is not named by the Secret"},
		{"a Secret that an apply would own keys of", "webhook-mode", "Secret", "hitl-webhook-server-cert", func(o map[string]any) {
			o["type"] = "kubernetes.io/tls"
			o["data"] = map[string]any{"tls.crt": "", "tls.key": ""}
		}, "has data or is not Opaque"},
		{"the Secret's Role naming another", "webhook-mode", "Role", "hitl-webhook-certificate-role", func(o map[string]any) {
			item(o, "rules", 0)["resourceNames"] = []any{"webhook-server-cert"}
		}, "is granted get, update on secrets [webhook-server-cert] in hitl-system"},
		{"certificate rights with cert-manager", "webhook-feedback-certmanager", "Role", "hitl-leader-election-role", func(o map[string]any) {
			o["rules"] = append(o["rules"].([]any), map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"},
				"resourceNames": []any{"hitl-webhook-server-cert"}, "verbs": []any{"get"}})
		}, "cert-manager provides the certificate, yet the manager's ServiceAccount is granted get on secrets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			docs := mutate(t, rendered[c.overlay], c.kind, c.objName, c.mutate)
			set, errs := decode(docs)
			for _, err := range errs {
				t.Fatal(err)
			}
			found := certificateRBACProblems(set, !strings.HasSuffix(c.overlay, "-certmanager"))
			for _, p := range found {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("no problem says %q; found %q", c.want, found)
		})
	}
}

// mutate returns docs with fn applied to the object of kind named name.
func mutate(t *testing.T, docs [][]byte, kind, name string, fn func(map[string]any)) [][]byte {
	t.Helper()
	out := make([][]byte, 0, len(docs))
	mutated := false
	for _, data := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] == kind && at(obj, "metadata")["name"] == name {
			fn(obj)
			mutated = true
			var err error
			if data, err = yaml.Marshal(obj); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, data)
	}
	if !mutated {
		t.Fatalf("no %s %s", kind, name)
	}
	return out
}

// grant is a rule that reaches the manager's ServiceAccount, and where: in
// a namespace (through a RoleBinding), or cluster-wide ("").
type grant struct {
	rule      rbacv1.PolicyRule
	namespace string
}

// certificateRBACProblems lists what is wrong with the rights of the
// manager's ServiceAccount on Secrets and webhook configurations in an
// install overlay:
//   - With its own certificate (--webhook-cert-secret): the overlay ships
//     that Secret in the manager's namespace, Opaque and without data (so
//     that no apply owns a key the manager writes), naming every webhook
//     configuration of the overlay in the annotation of its kind; every
//     rule that reaches Secrets grants only get and update, in the
//     manager's namespace, on that Secret by name; every rule that reaches
//     webhook configurations only get and patch, on the names the Secret's
//     annotation of their kind lists; and those names are granted both.
//   - With cert-manager, or without webhooks: no rule reaches either.
func certificateRBACProblems(s *objectSet, ownCertificate bool) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var d *appsv1.Deployment
	var namespace string
	for _, o := range s.byKind["Deployment"] {
		if strings.HasSuffix(o.Name, "controller-manager") {
			d, namespace = o.typed.(*appsv1.Deployment), o.Namespace
		}
	}
	if d == nil {
		return []string{"no manager Deployment"}
	}
	grants := managerGrants(s, namespace, d.Spec.Template.Spec.ServiceAccountName)
	if len(grants) == 0 {
		return []string{"the manager's ServiceAccount is granted nothing: the check would find nothing"}
	}
	secret := flagValue(d, "webhook-cert-secret")
	switch {
	case ownCertificate && secret == "":
		return []string{"the manager does not provision its own certificate (no --webhook-cert-secret)"}
	case !ownCertificate:
		for _, g := range grants {
			for _, r := range g.rule.Resources {
				if reachesSecrets(g.rule, r) || reachesWebhookConfigurations(g.rule, r) != "" {
					errorf("cert-manager provides the certificate, yet the manager's ServiceAccount is granted %s on %s", strings.Join(g.rule.Verbs, ", "), r)
				}
			}
		}
		return problems
	}

	named := map[string][]string{} // resource: the names the Secret's annotation lists
	if o := s.get("Secret", namespace, secret); o == nil {
		errorf("the manager's --webhook-cert-secret=%s is not in the output in namespace %s", secret, namespace)
	} else {
		sec := o.typed.(*corev1.Secret)
		if len(sec.Data) > 0 || len(sec.StringData) > 0 || sec.Type != corev1.SecretTypeOpaque {
			errorf("Secret %s/%s has data or is not Opaque (%s): an apply would own keys the manager writes", namespace, secret, sec.Type)
		}
		for resource, annotation := range namedConfigurations {
			named[resource] = splitNames(sec.Annotations[annotation])
		}
	}
	for resource, kind := range kindOfResource {
		for _, o := range s.byKind[kind] {
			if !slices.Contains(named[resource], o.Name) {
				errorf("%s %s is not named by the Secret %s/%s: the manager would not inject its CA", kind, o.Name, namespace, secret)
			}
		}
	}

	// What get and patch (or update) reach, by resource, in the end.
	granted := map[string]map[string][]string{} // resource: verb: names
	for _, g := range grants {
		where := "in " + g.namespace
		if g.namespace == "" {
			where = "cluster-wide"
		}
		verbs := strings.Join(g.rule.Verbs, ", ")
		for _, r := range g.rule.Resources {
			switch {
			case reachesSecrets(g.rule, r):
				if g.namespace != namespace || !slices.Equal(g.rule.ResourceNames, []string{secret}) || !subset(g.rule.Verbs, "get", "update") {
					errorf("the manager's ServiceAccount is granted %s on %s %v %s; want only get, update on secrets [%s] in %s", verbs, r, g.rule.ResourceNames, where, secret, namespace)
				}
			case reachesWebhookConfigurations(g.rule, r) != "":
				res := reachesWebhookConfigurations(g.rule, r)
				if len(g.rule.ResourceNames) == 0 || !subset(g.rule.ResourceNames, named[res]...) || !subset(g.rule.Verbs, "get", "patch") {
					errorf("the manager's ServiceAccount is granted %s on %s %v %s; want only get, patch on %s %v", verbs, r, g.rule.ResourceNames, where, res, named[res])
				}
				for _, v := range g.rule.Verbs {
					if granted[res] == nil {
						granted[res] = map[string][]string{}
					}
					granted[res][v] = append(granted[res][v], g.rule.ResourceNames...)
				}
			}
		}
	}
	for resource, names := range named {
		for _, verb := range []string{"get", "patch"} {
			if !subset(names, granted[resource][verb]...) {
				errorf("the manager's ServiceAccount may not %s every %s the Secret names (%v)", verb, resource, names)
			}
		}
	}
	return problems
}

// reachesSecrets tells whether rule, for its resource r, covers Secrets.
func reachesSecrets(rule rbacv1.PolicyRule, r string) bool {
	return (slices.Contains(rule.APIGroups, "") || slices.Contains(rule.APIGroups, "*")) && (r == "secrets" || r == "*")
}

// reachesWebhookConfigurations is the webhook configuration resource that
// rule covers for its resource r (the mutating one for "*"), or "".
func reachesWebhookConfigurations(rule rbacv1.PolicyRule, r string) string {
	if !slices.Contains(rule.APIGroups, admissionv1.GroupName) && !slices.Contains(rule.APIGroups, "*") {
		return ""
	}
	switch r {
	case "*":
		return "mutatingwebhookconfigurations"
	case "mutatingwebhookconfigurations", "validatingwebhookconfigurations":
		return r
	}
	return ""
}

// managerGrants are the rules of every role bound to the ServiceAccount
// namespace/name in s.
func managerGrants(s *objectSet, namespace, name string) []grant {
	isManager := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(sub rbacv1.Subject) bool {
			return sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace == namespace && sub.Name == name
		})
	}
	rules := func(kind, ns, name string) []rbacv1.PolicyRule {
		switch o := s.get(kind, ns, name); {
		case o == nil:
			return nil
		case kind == "Role":
			return o.typed.(*rbacv1.Role).Rules
		default:
			return o.typed.(*rbacv1.ClusterRole).Rules
		}
	}
	var out []grant
	for _, o := range s.byKind["RoleBinding"] {
		b := o.typed.(*rbacv1.RoleBinding)
		if !isManager(b.Subjects) {
			continue
		}
		roleNS := o.Namespace
		if b.RoleRef.Kind == "ClusterRole" {
			roleNS = ""
		}
		for _, r := range rules(b.RoleRef.Kind, roleNS, b.RoleRef.Name) {
			out = append(out, grant{r, o.Namespace})
		}
	}
	for _, o := range s.byKind["ClusterRoleBinding"] {
		b := o.typed.(*rbacv1.ClusterRoleBinding)
		if !isManager(b.Subjects) {
			continue
		}
		for _, r := range rules("ClusterRole", "", b.RoleRef.Name) {
			out = append(out, grant{r, ""})
		}
	}
	return out
}

// subset tells whether every one of got is one of allowed.
func subset(got []string, allowed ...string) bool {
	for _, g := range got {
		if !slices.Contains(allowed, g) {
			return false
		}
	}
	return true
}

func splitNames(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
