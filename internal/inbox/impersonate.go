package inbox

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// maxClients bounds the impersonating clients kept; past it the cache
// starts over.
const maxClients = 1024

// ImpersonatingClients returns a ClientFunc whose clients act as each
// person through impersonation of their username and groups (client-go's
// Impersonate-User and Impersonate-Group), with cfg's own identity doing
// the impersonating: it needs the verb impersonate on users and groups,
// and nothing else. The API server adds system:authenticated.
func ImpersonatingClients(cfg *rest.Config) ClientFunc {
	scheme := hitlv1.NewScheme()
	var mu sync.Mutex
	clients := map[string]client.WithWatch{}
	return func(p Person) (client.WithWatch, error) {
		if p.Username == "" {
			return nil, fmt.Errorf("no user to act as")
		}
		groups := slices.Clone(p.Groups)
		slices.Sort(groups)
		key := p.Username + "\x00" + strings.Join(groups, "\x00")
		mu.Lock()
		defer mu.Unlock()
		if c, ok := clients[key]; ok {
			return c, nil
		}
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: p.Username, Groups: groups}
		c, err := client.NewWithWatch(as, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("a client acting as %s: %w", p.Username, err)
		}
		if len(clients) >= maxClients {
			clients = map[string]client.WithWatch{}
		}
		clients[key] = c
		return c, nil
	}
}

// StaticClient returns a ClientFunc that acts as one identity for every
// person: the local inbox's kubeconfig.
func StaticClient(c client.WithWatch) ClientFunc {
	return func(Person) (client.WithWatch, error) { return c, nil }
}
