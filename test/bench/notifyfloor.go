// The notifier burst's floor: the same burst, right after, told by a bare
// client instead of hitl-notify.

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// floorAgent asks the floor's questions.
const floorAgent = "notify-floor"

// notifyFloor asks n questions at once of floorAgent, as notifyBurst asks
// its own and timed the same way, once the namespace is empty and the
// manager idle again, and tells each to rcv with a bare client: one watch
// of the agent's questions on a connection of its own, as the notifier's
// ServiceAccount, that POSTs each question's Asked message, signed, as soon
// as the watch shows it; no queue, no rate limit, no record, no Event.
// What it measures is what the API server's watch and the loopback allow
// in this run on this machine: the floor beside which hitl-notify's figure
// is read (the target stays absolute). hitl-notify must be stopped first,
// so that its bookkeeping does not weigh on the floor.
func (b *bench) notifyFloor(ctx context.Context, rcv *webhookReceiver, n int) ([]time.Duration, error) {
	if err := b.clean(ctx); err != nil {
		return nil, err
	}
	if err := b.quiet(ctx); err != nil {
		return nil, err
	}
	kubeconfig, err := b.notifierKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, err
	}
	// A Proxy function keeps client-go from sharing the connection with
	// another client, as hitl-notify's question watches have their own.
	cfg.Proxy = http.ProxyFromEnvironment
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: b.c.Scheme()})
	if err != nil {
		return nil, err
	}
	var list hitlv1.UserQuestionList
	sel := client.MatchingLabels{hitlv1.AgentLabel: floorAgent}
	if err := c.List(ctx, &list, client.InNamespace(ns), sel); err != nil {
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := c.Watch(watchCtx, &hitlv1.UserQuestionList{}, client.InNamespace(ns), sel,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	hook := &channel.Webhook{URL: rcv.url + "/floor", Key: rcv.key, Client: channel.NewHTTPClient(10 * time.Second)}
	var posts sync.WaitGroup
	var failMu sync.Mutex
	var failed error
	read := make(chan struct{})
	go func() {
		defer close(read)
		for ev := range w.ResultChan() {
			q, ok := ev.Object.(*hitlv1.UserQuestion)
			if !ok || ev.Type != watch.Added {
				continue
			}
			posts.Go(func() {
				m := channel.NewMessage(q, hitlv1.EventAsked, fmt.Sprintf("%s/asked/floor", q.UID), q.WindowStart(), "https://hitl.example.com")
				if err := hook.Send(watchCtx, m); err != nil && watchCtx.Err() == nil {
					failMu.Lock()
					failed = err
					failMu.Unlock()
				}
			})
		}
	}()

	asked, err := b.watchAsks(watchCtx, floorAgent)
	if err != nil {
		return nil, err
	}
	names, _, err := b.askAtOnce(ctx, asked, floorAgent, "floor", n)
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rcv.waitFor(wait, n, func(m *channel.Message) bool { return m.Question.Agent == floorAgent }); err != nil {
		failMu.Lock()
		defer failMu.Unlock()
		return nil, fmt.Errorf("%w (a POST failed: %v)", err, failed)
	}
	late := asked.toDelivered(rcv, names)
	stopWatch()
	w.Stop()
	<-read
	posts.Wait()
	return late, nil
}
