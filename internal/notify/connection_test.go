package notify

import (
	"net/http"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// transportOf is the *http.Transport under the wrappers (authentication,
// user agent) of a client-go HTTP client for cfg: what holds its
// connections.
func transportOf(t *testing.T, cfg *rest.Config) *http.Transport {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := c.Transport
	for {
		switch r := rt.(type) {
		case *http.Transport:
			return r
		case utilnet.RoundTripperWrapper:
			rt = r.WrappedRoundTripper()
		default:
			t.Fatalf("cannot see under the round tripper %T", rt)
		}
	}
}

// The watches of the questions do not share their connection to the API
// server with the notifier's writes (the clients of mgr.GetConfig()).
func TestQuestionWatchesHaveAConnectionOfTheirOwn(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	shared := transportOf(t, cfg)
	if transportOf(t, rest.CopyConfig(cfg)) != shared {
		t.Fatal("client-go no longer shares a transport between equal configs: this test checks nothing")
	}
	if transportOf(t, ownConnection(cfg)) == shared {
		t.Error("the questions' watches share the transport, and so the connection, of the notifier's writes")
	}
	if cfg.Proxy != nil {
		t.Error("ownConnection changed the config it was given")
	}
}
