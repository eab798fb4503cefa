package notify_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// TestTheNotifierMayWriteItsRecordAndNothingElse: the verb notify lets the
// notifier's identity past the question-owner admission policy for the
// hitl.dev/notified annotation alone; as an adversary holding the shipped
// role would, it tries to change anything else of another's question, with
// or without its record in the same write, and is refused NOT_OWNER.
func TestTheNotifierMayWriteItsRecordAndNothingElse(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	q := ask(t, k, Question("owned", ns).Agent("release-bot").Ask("env", "Where to?", "staging", "prod").Obj())
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: notifierUser, Groups: []string{"system:authenticated"}}
	notifier, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	patch := func(body string) error {
		return notifier.Patch(context.Background(), &hitlv1.UserQuestion{ObjectMeta: q.ObjectMeta},
			client.RawPatch("application/merge-patch+json", []byte(body)))
	}

	g.Expect(patch(`{"metadata":{"annotations":{"hitl.dev/notified":"{}"}}}`)).To(Succeed(), "its own record")
	for name, body := range map[string]string{
		"a label":                            `{"metadata":{"labels":{"team":"x"}}}`,
		"another annotation with its record": `{"metadata":{"annotations":{"hitl.dev/notified":"{\"a\":1}","team":"x"}}}`,
		"a finalizer":                        `{"metadata":{"finalizers":["example.com/hold"]}}`,
		"the spec (cancelling it)":           `{"spec":{"cancelled":true}}`,
	} {
		err := patch(body)
		g.Expect(err).To(HaveOccurred(), "the notifier changed %s of another's question", name)
		g.Expect(err.Error()).To(ContainSubstring(string(hitlv1.CodeNotOwner)), name)
	}
	got := &hitlv1.UserQuestion{}
	g.Expect(k.Client.Get(context.Background(), client.ObjectKeyFromObject(q), got)).To(Succeed())
	g.Expect(got.Annotations).To(Equal(map[string]string{hitlv1.NotifiedAnnotation: "{}"}))
	g.Expect(got.Finalizers).To(BeEmpty())
	g.Expect(got.Labels).NotTo(HaveKey("team"))
	g.Expect(got.Spec.Cancelled).To(BeFalse())
}
