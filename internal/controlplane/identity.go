package controlplane

// Identities for the local control plane: the manager's shipped RBAC, as
// `kubectl apply -k config/default` would install it, and kubeconfigs that
// authenticate with ServiceAccount tokens from the TokenRequest API.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Install is where config/default installs hitl: its namespace and the
// prefix of every name.
type Install struct {
	Namespace  string `json:"namespace"`
	NamePrefix string `json:"namePrefix"`
}

// DefaultInstall reads the namespace and name prefix of
// config/default/kustomization.yaml.
func DefaultInstall() (Install, error) {
	var i Install
	data, err := os.ReadFile(filepath.Join(Root(), "config", "default", "kustomization.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &i)
	}
	if err == nil && i.Namespace == "" {
		err = errors.New("no namespace")
	}
	if err != nil {
		return i, fmt.Errorf("reading config/default/kustomization.yaml: %w", err)
	}
	return i, nil
}

// ManagerServiceAccount is the namespace and name of the ServiceAccount the
// manager runs as once installed (config/rbac/service_account.yaml with
// config/default's namespace and prefix).
func (i Install) ManagerServiceAccount() (namespace, name string) {
	return i.Namespace, i.NamePrefix + "controller-manager"
}

// ManagerUsername is the user the manager's requests are made as.
func (i Install) ManagerUsername() string {
	ns, name := i.ManagerServiceAccount()
	return "system:serviceaccount:" + ns + ":" + name
}

// ManagerRBAC renders the resources of config/rbac/kustomization.yaml (the
// manager's ServiceAccount, its ClusterRole generated into role.yaml, the
// leader election Role and their bindings) as config/default does: every
// namespaced object in the install namespace, every name prefixed, and the
// bindings' role references and ServiceAccount subjects following them.
func (i Install) ManagerRBAC() ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(Root(), "config", "rbac")
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &k)
	}
	if err != nil {
		return nil, fmt.Errorf("reading config/rbac/kustomization.yaml: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		docs, err := readObjects(filepath.Join(dir, r))
		if err != nil {
			return nil, err
		}
		objs = append(objs, docs...)
	}
	renamed := map[string]bool{} // kind/name of every object in the set, before the prefix
	for _, o := range objs {
		renamed[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			o.SetNamespace(i.Namespace)
		case "ClusterRole", "ClusterRoleBinding":
		default:
			return nil, fmt.Errorf("config/rbac: unexpected kind %s", o.GetKind())
		}
		o.SetName(i.NamePrefix + o.GetName())
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if renamed[kind+"/"+name] {
			_ = unstructured.SetNestedField(o.Object, i.NamePrefix+name, "roleRef", "name")
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			s := s.(map[string]any)
			if s["kind"] == "ServiceAccount" && renamed["ServiceAccount/"+fmt.Sprint(s["name"])] {
				s["name"] = i.NamePrefix + fmt.Sprint(s["name"])
				s["namespace"] = i.Namespace
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
	}
	return objs, nil
}

// readObjects decodes every object of a multi-document YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// InstallManagerRBAC creates the install namespace and the manager's RBAC
// (ManagerRBAC) with an admin client c.
func (i Install) InstallManagerRBAC(ctx context.Context, c client.Client) error {
	objs, err := i.ManagerRBAC()
	if err != nil {
		return err
	}
	return i.create(ctx, c, objs)
}

// create creates the install namespace, when it does not exist yet, and
// then objs, in order, with an admin client c.
func (i Install) create(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: i.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", i.Namespace, err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// RequestToken asks the TokenRequest API, with a client c allowed to create
// serviceaccounts/token, for a token of the ServiceAccount namespace/name
// that lives for expiration (the API server may shorten it; the returned
// time is when it really expires).
func RequestToken(ctx context.Context, c client.Client, namespace, name string, expiration time.Duration) (string, time.Time, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(expiration / time.Second)),
	}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// TokenKubeconfig is a kubeconfig for the API server of cfg that
// authenticates with a bearer token: token itself, or, when token is empty,
// the token in tokenFile, which clients read again as it changes (client-go
// rereads it every minute), so that whoever writes it can renew it.
func TokenKubeconfig(cfg *rest.Config, user, token, tokenFile string) ([]byte, error) {
	k := clientcmdapi.NewConfig()
	k.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	k.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token, TokenFile: tokenFile}
	k.Contexts[user] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	k.CurrentContext = user
	return clientcmd.Write(*k)
}

// WriteFileAtomic writes data to path through a temporary file and a
// rename, so that a reader never sees half of it.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
