// Package kubeclient connects the SDKs to the cluster a program runs in:
// the one place that finds the configuration, the scheme and the namespace
// for agent.NewInCluster and answerer.NewInCluster.
package kubeclient

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// serviceAccountNamespace is where a Pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Connect returns a client that reads from the API server directly (no
// cache: the SDKs rely on consistent reads and guarded updates) and the
// namespace to work in. In a Pod it uses the Pod's ServiceAccount and
// namespace; elsewhere KUBECONFIG (or ~/.kube/config) and its current
// context's namespace, "default" when it names none.
func Connect() (client.WithWatch, string, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, "", fmt.Errorf("finding the cluster's configuration: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: hitlv1.NewScheme()})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the API server: %w", err)
	}
	ns, err := namespace(serviceAccountNamespace)
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// namespace is the Pod's namespace when the file at saFile holds it, else
// the kubeconfig context's.
func namespace(saFile string) (string, error) {
	if b, err := os.ReadFile(saFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
	}
	return ns, nil
}
