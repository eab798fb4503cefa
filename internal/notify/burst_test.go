package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify"
	. "github.com/hitl-dev/hitl/test/builders"
)

// While questions keep arriving, the notifier sends their notifications
// at once but holds back its writes about them (the records and the
// NotificationSent Events); a notifier stopped meanwhile writes the
// records it held before it hands over, so the next one sends nothing
// again; and once questions stop coming, the records and Events are
// written.
func TestRecordsWaitWhileQuestionsArriveAndAStopWritesThem(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	ctx := context.Background()
	hook := newReceiver(t)
	webhook(t, k, ns, "hook", hook)
	createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{Channels: []string{"hook"}, On: []hitlv1.NotificationEvent{hitlv1.EventAsked}})
	// No question comes for a minute after these: as far as this
	// notifier knows, they are a burst that goes on.
	stop := runNotifier(t, k, notify.Options{RecordQuiet: time.Minute})

	var names []string
	for i := range 3 {
		q := ask(t, k, Question(fmt.Sprintf("burst-%d", i), ns).Agent("bot").Ask("a", "A?", "yes", "no").Obj())
		names = append(names, q.Name)
	}
	for _, name := range names {
		g.Eventually(func() []string { return hook.keys(name) }, 20*time.Second).Should(Equal([]string{"asked"}))
	}
	g.Consistently(func(g Gomega) {
		for _, name := range names {
			g.Expect(notified(g, k, ns, name)).To(BeEmpty(), "the record of %s was written while questions were arriving", name)
		}
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	stop()
	for _, name := range names {
		g.Expect(notified(g, k, ns, name)).To(Equal(`{"hook":["asked"]}`), "the stopped notifier did not write the record of %s", name)
	}

	runNotifier(t, k, notify.Options{})
	late := ask(t, k, Question("after", ns).Agent("bot").Ask("a", "A?", "yes", "no").Obj())
	g.Eventually(func() []string { return hook.keys(late.Name) }, 20*time.Second).Should(Equal([]string{"asked"}))
	g.Eventually(func(g Gomega) string { return notified(g, k, ns, late.Name) }, 10*time.Second).Should(Equal(`{"hook":["asked"]}`))
	g.Eventually(func(g Gomega) []string {
		var evs eventsv1.EventList
		g.Expect(k.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var about []string
		for _, e := range evs.Items {
			if e.Reason == "NotificationSent" && e.Regarding.Name == late.Name {
				about = append(about, e.Note)
			}
		}
		return about
	}, 10*time.Second).Should(Equal([]string{"Asked notification sent to channel hook"}))
	// The restarted notifier read the records: nothing was sent twice.
	time.Sleep(time.Second)
	g.Expect(hook.keys("")).To(HaveLen(len(names) + 1))
}
