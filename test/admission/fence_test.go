package admission_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
			// The manager's client, counting what this test's reads do: the
			// managers the suite runs beside it in this process read claims
			// too, so the process's metrics cannot tell them apart.
			direct, err := client.NewWithWatch(cfg, client.Options{Scheme: c.env.Scheme})
			Expect(err).NotTo(HaveOccurred())
			var fenceWrites, claimLists atomic.Int64 // renewals of the fence (one per read), lists of claims
			manager := interceptor.NewClient(direct, interceptor.Funcs{
				Patch: func(ctx context.Context, w client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, ok := obj.(*hitlv1.QuestionClaim); ok && slices.Contains(claimreads.FenceNames, obj.GetName()) {
						fenceWrites.Add(1)
					}
					return w.Patch(ctx, obj, patch, opts...)
				},
				List: func(ctx context.Context, w client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*hitlv1.QuestionClaimList); ok {
						claimLists.Add(1)
					}
					return w.List(ctx, list, opts...)
				},
			})
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
			Expect(fenceWrites.Load()).To(BeNumerically("==", rounds), "every read was made current by the fence")
			Expect(claimLists.Load()).To(BeZero(), "no read listed from the API server")
			stored := &hitlv1.QuestionClaim{}
			Expect(c.admin.Get(ctx, types.NamespacedName{Namespace: install.Namespace, Name: claimreads.FenceName}, stored)).To(Succeed())
			Expect(stored.Spec.Holder.Username).To(Equal(install.ManagerUsername()), "the fence's holder is stamped like any claim's")

			// Where the manager has no grants, the fence cannot be written:
			// the reads list from the API server, and still see every claim.
			elsewhere, err := claimreads.NewFence(manager, claims, informer, s.ns)
			Expect(err).NotTo(HaveOccurred())
			fallback := claimreads.New(manager, clock.RealClock{})
			fallback.UseFence(elsewhere)
			Expect(alice.Create(ctx, claim(s, "late", "coder"))).To(Succeed())
			read, err := fallback.Since(ctx, time.Now())
			Expect(err).NotTo(HaveOccurred())
			Expect(read.Of(types.NamespacedName{Namespace: s.ns, Name: "late"})).To(HaveLen(1))
			Expect(claimLists.Load()).To(BeNumerically("==", 1), "the read listed from the API server once")
		})
	}
})
