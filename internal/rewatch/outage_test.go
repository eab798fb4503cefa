package rewatch_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/hitl-dev/hitl/internal/controlplane"
	"github.com/hitl-dev/hitl/internal/rewatch"
)

// TestAnInformerCatchesUpAtOnceAfterEachOutage runs an informer against a
// real API server through a link that goes down three times in a row, as
// an API server restarting does: connections cut, new ones refused. While
// the link is down, an object is created and another deleted. Each time
// the link is back, the informer must hold the change within 3 s. A
// Reflector left to its own waits is 3.2 to 6.4 s or more behind by the
// third outage, since its waits double from one to the next.
func TestAnInformerCatchesUpAtOnceAfterEachOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the local control plane")
	}
	env := controlplane.New()
	cfg, _, err := controlplane.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	direct := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	link := newLink(t, cfg.Host)
	viaLink := rest.CopyConfig(cfg)
	viaLink.Host = "https://" + link.addr
	ns := "outage"
	if _, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lw := toolscache.NewListWatchFromClient(kubernetes.NewForConfigOrDie(viaLink).CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	inf := rewatch.NewInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	create := func(name string) {
		t.Helper()
		if _, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("gone-0")
	for i := range 3 {
		link.down()
		time.Sleep(1500 * time.Millisecond)
		create(fmt.Sprintf("new-%d", i))
		if err := direct.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("gone-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		create(fmt.Sprintf("gone-%d", i+1))
		back := time.Now()
		link.up()
		for !holds(inf.GetStore(), fmt.Sprintf("new-%d", i)) || holds(inf.GetStore(), fmt.Sprintf("gone-%d", i)) {
			if time.Since(back) > 3*time.Second {
				t.Fatalf("outage %d: the informer still lacks what changed during it 3 s after the link came back", i+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("outage %d: caught up %s after the link came back", i+1, time.Since(back).Round(time.Millisecond))
	}
}

func holds(s toolscache.Store, name string) bool {
	_, ok, _ := s.GetByKey("outage/" + name)
	return ok
}

// link forwards TCP connections to the API server; down cuts them all and
// refuses new ones until up.
type link struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newLink(t *testing.T, target string) *link {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l := &link{t: t, target: u.Host, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.addr = ln.Addr().String()
	l.serve(ln)
	t.Cleanup(l.down)
	return l
}

func (l *link) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go l.forward(c)
		}
	}()
}

func (l *link) forward(c net.Conn) {
	s, err := net.Dial("tcp", l.target)
	if err != nil {
		_ = c.Close()
		return
	}
	l.mu.Lock()
	l.conns[c], l.conns[s] = struct{}{}, struct{}{}
	l.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
	_, _ = io.Copy(c, s)
	_ = c.Close()
}

func (l *link) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		_ = l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		_ = c.Close()
	}
	clear(l.conns)
}

func (l *link) up() {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		l.t.Fatalf("listening again on %s: %v", l.addr, err)
	}
	l.serve(ln)
}
