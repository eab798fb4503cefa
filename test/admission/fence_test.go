package admission_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/claimreads"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The claims fence, as the manager writes it with its shipped RBAC and
// through each admission mode: a claim an answerer created just before a
// read is in the read, served from the manager's cache made current by the
// fence rather than by a consistent list; without the fence's grants, the
// reads list from the API server instead.
var _ = Describe("The claims fence", func() {
	for _, mode := range modes {
		It("makes the manager's cache hold every claim written before a read, "+mode.String(), func() {
			c := clusters[mode]
			s := c.newScene()
			install, err := testenv.DefaultInstall()
			Expect(err).NotTo(HaveOccurred())
			saNS, saName := install.ManagerServiceAccount()
			if err := c.admin.Get(ctx, types.NamespacedName{Namespace: saNS, Name: saName}, &corev1.ServiceAccount{}); apierrors.IsNotFound(err) {
				Expect(install.InstallManagerRBAC(ctx, c.admin)).To(Succeed())
			}
			token, _, err := testenv.RequestToken(ctx, c.admin, saNS, saName, time.Hour)
			Expect(err).NotTo(HaveOccurred())
			kubeconfig, err := testenv.TokenKubeconfig(c.cfg, install.ManagerUsername(), token, "")
			Expect(err).NotTo(HaveOccurred())
			cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
			Expect(err).NotTo(HaveOccurred())
			cfg.QPS, cfg.Burst = 500, 1000
			manager, err := client.New(cfg, client.Options{Scheme: c.env.Scheme})
			Expect(err).NotTo(HaveOccurred())
			awaitAllowedIn(install.Namespace, manager, mayAnswerAs(claimreads.FenceName))

			// The manager's cache of claims, as its own identity.
			claims, err := cache.New(cfg, cache.Options{Scheme: c.env.Scheme})
			Expect(err).NotTo(HaveOccurred())
			informer, err := claims.GetInformer(ctx, &hitlv1.QuestionClaim{})
			Expect(err).NotTo(HaveOccurred())
			cacheCtx, stopCache := context.WithCancel(ctx)
			defer stopCache()
			go func() { _ = claims.Start(cacheCtx) }()
			Expect(claims.WaitForCacheSync(ctx)).To(BeTrue())

			fence, err := claimreads.NewFence(manager, claims, informer, install.Namespace)
			Expect(err).NotTo(HaveOccurred())
			reads := claimreads.New(manager, clock.RealClock{})
			reads.UseFence(fence)

			alice := s.user("fence-alice-" + mode.String())
			s.bind(answererRole, userSubject("fence-alice-"+mode.String()))
			s.grantAgents(userSubject("fence-alice-"+mode.String()), hitlv1.VerbAnswer, "coder")
			s.awaitAllowed(alice, mayAnswerAs("coder"))

			fenced, listed := claimLists("fence"), claimLists("list")
			const rounds = 20
			for i := range rounds {
				question := fmt.Sprintf("q%d", i)
				Expect(alice.Create(ctx, claim(s, question, "coder"))).To(Succeed())
				read, err := reads.Since(ctx, time.Now())
				Expect(err).NotTo(HaveOccurred())
				Expect(read.Of(types.NamespacedName{Namespace: s.ns, Name: question})).To(HaveLen(1),
					"round %d: the claim created before the read is in it", i)
				Expect(read.Of(types.NamespacedName{Namespace: install.Namespace, Name: claimreads.FenceName})).To(BeEmpty(), "the fence claims nothing")
			}
			Expect(claimLists("fence")-fenced).To(BeNumerically("==", rounds), "every read was made current by the fence")
			Expect(claimLists("list")-listed).To(BeZero(), "no read listed from the API server")
			stored := &hitlv1.QuestionClaim{}
			Expect(c.admin.Get(ctx, types.NamespacedName{Namespace: install.Namespace, Name: claimreads.FenceName}, stored)).To(Succeed())
			Expect(stored.Spec.Holder.Username).To(Equal(install.ManagerUsername()), "the fence's holder is stamped like any claim's")

			// Where the manager has no grants, the fence cannot be written:
			// the reads list from the API server, and still see every claim.
			elsewhere, err := claimreads.NewFence(manager, claims, informer, s.ns)
			Expect(err).NotTo(HaveOccurred())
			fallback := claimreads.New(manager, clock.RealClock{})
			fallback.UseFence(elsewhere)
			listed = claimLists("list")
			Expect(alice.Create(ctx, claim(s, "late", "coder"))).To(Succeed())
			read, err := fallback.Since(ctx, time.Now())
			Expect(err).NotTo(HaveOccurred())
			Expect(read.Of(types.NamespacedName{Namespace: s.ns, Name: "late"})).To(HaveLen(1))
			Expect(claimLists("list") - listed).To(BeNumerically("==", 1))
		})
	}
})

// claimLists is hitl_claim_lists_total{how} in this process.
func claimLists(how string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "hitl_claim_lists_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "how") == how {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
