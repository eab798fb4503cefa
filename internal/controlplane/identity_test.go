package controlplane

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ManagerRBAC must render what `kubectl apply -k config/default` installs.
func TestManagerRBACMatchesKustomize(t *testing.T) {
	install, err := DefaultInstall()
	if err != nil {
		t.Fatal(err)
	}
	got, err := install.ManagerRBAC()
	if err != nil {
		t.Fatal(err)
	}
	if ns, name := install.ManagerServiceAccount(); ns != "hitl-system" || name != "hitl-controller-manager" {
		t.Errorf("ManagerServiceAccount() = %s/%s, want hitl-system/hitl-controller-manager", ns, name)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH; cannot compare with kubectl kustomize")
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(Root(), "config", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	want := map[string]*unstructured.Unstructured{}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			break
		}
		o := &unstructured.Unstructured{Object: m}
		switch o.GetKind() {
		case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			want[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
	if len(got) != len(want) {
		t.Errorf("rendered %d objects, kustomize renders %d", len(got), len(want))
	}
	for _, o := range got {
		key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		w, ok := want[key]
		if !ok {
			t.Errorf("%s is not in kustomize's rendering", key)
			continue
		}
		if !reflect.DeepEqual(o.Object, w.Object) {
			t.Errorf("%s:\n got %v\nwant %v", key, o.Object, w.Object)
		}
	}
}
