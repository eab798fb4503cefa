// Package helm checks the chart charts/hitl with Helm v4 as a library:
// `helm lint`, `helm template` for several value sets, that its objects are
// the objects config/ renders (one source of truth: the generated templates
// equal, the hand-written Deployment, budget and Service equal but for
// Helm's labels and the chart's affinity), and that the rendered chart
// applies server-side to a real API server, where its admission policies
// then act.
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

// TestLint lints the chart as `helm lint --strict` does, with the defaults
// and with every option on; and expects it to fail a chart whose values
// cannot work.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults":   nil,
		"everything": {"mcp": map[string]any{"enabled": true}, "webhook": map[string]any{"feedback": map[string]any{"enabled": true}}, "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}},
		"one replica without a budget": {"manager": map[string]any{
			"replicas": 1, "leaderElect": false, "podDisruptionBudget": map[string]any{"enabled": false}}},
	} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict, lint.Namespace, lint.KubeVersion = true, "hitl-system", kubeVersion(t)
			res := lint.Run([]string{chartDir}, vals)
			for _, m := range res.Messages {
				t.Logf("%s", m)
			}
			if len(res.Errors) > 0 {
				t.Errorf("helm lint --strict: %v", res.Errors)
			}
		})
	}
}

// TestTemplateRefusesValuesThatCannotWork: helm lint only logs a template's
// fail, so these are rendered as helm install would.
func TestTemplateRefusesValuesThatCannotWork(t *testing.T) {
	for name, c := range map[string]struct {
		vals map[string]any
		want string
	}{
		"a budget that blocks every drain": {map[string]any{"manager": map[string]any{"replicas": 1}}, "would block every node drain"},
		"a ServiceMonitor without metrics": {map[string]any{"metrics": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}, "serviceMonitor.enabled needs metrics.enabled"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := render("hitl-system", c.vals); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestTemplateIsAHighlyAvailableRestrictedInstall renders the defaults into
// another namespace and checks what a platform team asks of an operator.
func TestTemplateIsAHighlyAvailableRestrictedInstall(t *testing.T) {
	objs, crds := template(t, "team-x", map[string]any{"image": map[string]any{"tag": "v7.7.7"}})
	if len(crds) != 2 {
		t.Errorf("%d CRDs, want UserQuestion and QuestionReply", len(crds))
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
	// The restricted Pod Security Standard.
	if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
		t.Error("the pod may run as root")
	}
	if v, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
		t.Errorf("seccompProfile %q", v)
	}
	if v, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation"); !found || v {
		t.Error("the container may escalate privileges")
	}
	if v, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !v {
		t.Error("the root file system is writable")
	}
	if v, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop"); !slices.Equal(v, []string{"ALL"}) {
		t.Errorf("capabilities dropped: %v", v)
	}
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

// TestChartEqualsConfig renders the chart into hitl-system with its options
// and the overlay of config/ that installs the same, and compares them
// object by object.
func TestChartEqualsConfig(t *testing.T) {
	for overlay, vals := range map[string]map[string]any{
		"default":          {},
		"mcp":              {"mcp": map[string]any{"enabled": true}},
		"webhook-feedback": {"webhook": map[string]any{"feedback": map[string]any{"enabled": true}}},
	} {
		t.Run(overlay, func(t *testing.T) {
			vals["image"] = map[string]any{"tag": "latest"}
			objs, crds := template(t, "hitl-system", vals)
			want := kustomize(t, filepath.Join(configDir, overlay))
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

// TestChartAppliesServerSide applies the rendered chart to a real API
// server as `helm install` would (CRDs first), and checks that its
// admission policies then act.
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

	objs, crds := template(t, "hitl-system", map[string]any{"mcp": map[string]any{"enabled": true},
		"webhook": map[string]any{"feedback": map[string]any{"enabled": true}}})
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

// kubeVersion is the version of the API servers the tests run.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion("v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// template renders the chart as `helm template --include-crds` does and
// returns its objects and its CRDs.
func template(t *testing.T, namespace string, vals map[string]any) (objs, crds []*unstructured.Unstructured) {
	t.Helper()
	manifest, crdFiles, err := render(namespace, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs = decode(t, []byte(manifest))
	for _, f := range crdFiles {
		crds = append(crds, decode(t, f)...)
	}
	return objs, crds
}

func render(namespace string, vals map[string]any) (string, [][]byte, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", nil, err
	}
	kv, err := common.ParseKubeVersion("v1.37.2")
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
