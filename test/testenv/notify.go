package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// NotifierIdentity is hitl-notify's ServiceAccount and the ClusterRole that
// lets it read the channels' Secrets of a namespace once bound there, as
// config/notify names them.
type NotifierIdentity struct {
	Namespace, ServiceAccount string
	SecretsRole               string
}

// Username is the user hitl-notify's requests are made as.
func (n NotifierIdentity) Username() string {
	return "system:serviceaccount:" + n.Namespace + ":" + n.ServiceAccount
}

// InstallNotifierRBAC renders config/notify as `kubectl apply -k
// config/notify` installs it and creates, with an admin client c, what it
// ships for hitl-notify but its Deployment: the ServiceAccount, the notify
// ClusterRole and its binding, the notify-secrets ClusterRole (bound by
// each namespace that wants it) and the leader election Role and binding.
// What already exists (the install namespace, a second call's objects) is
// left as it is.
func InstallNotifierRBAC(ctx context.Context, c client.Client) (NotifierIdentity, error) {
	dir := filepath.Join(Root(), "config", "notify")
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return NotifierIdentity{}, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var id NotifierIdentity
	for _, r := range resources.Resources() {
		if r.GetLabels()["app.kubernetes.io/component"] != "notify" || r.GetKind() == "Deployment" {
			continue
		}
		m, err := r.Map()
		if err != nil {
			return id, err
		}
		obj := &unstructured.Unstructured{Object: m}
		switch obj.GetKind() {
		case "ServiceAccount":
			id.Namespace, id.ServiceAccount = obj.GetNamespace(), obj.GetName()
		case "ClusterRole":
			if strings.HasSuffix(obj.GetName(), "-secrets") {
				id.SecretsRole = obj.GetName()
			}
		}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return id, fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if id.ServiceAccount == "" || id.SecretsRole == "" {
		return id, fmt.Errorf("config/notify renders no ServiceAccount or Secrets ClusterRole for hitl-notify")
	}
	return id, nil
}
