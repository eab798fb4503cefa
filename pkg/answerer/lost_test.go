package answerer_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/hitl-dev/hitl/pkg/answerer"
)

var _ = Describe("A claim that cannot be renewed", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("is lost at the first refused renewal, with the API server's error, when the answerer may not patch questionclaims", func() {
		role := exampleRole()
		role.Name = "hitl-answerer-without-patch"
		found := false
		for i, r := range role.Rules {
			if slices.Contains(r.Resources, "questionclaims") {
				role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "patch" })
				found = true
			}
		}
		Expect(found).To(BeTrue(), "the example role grants rights on questionclaims")
		bindRole(ns, "erin", role)
		a := answerer.New(userClient("erin", nil), ns, "erin-inbox", "release-bot")
		ask(where("q", ns, "release-bot").Timeout(time.Minute).Obj())

		claim, err := a.Claim(ctx, "q", 5*time.Second)
		Expect(err).NotTo(HaveOccurred(), "creating the QuestionClaim is allowed")
		Expect(claim.Err()).To(Succeed())
		Consistently(claim.Lost(), time.Second).ShouldNot(BeClosed(), "nothing is lost before the first renewal")
		Eventually(claim.Lost(), 3*time.Second).Should(BeClosed(), "the first renewal, 5/3 s in, is refused")
		Expect(apierrors.IsForbidden(claim.Err())).To(BeTrue(), "%v", claim.Err())
		Expect(claim.Err().Error()).To(ContainSubstring(claim.Name))
		Expect(claim.Close()).To(Succeed(), "releasing is allowed")
		Expect(apierrors.IsForbidden(claim.Err())).To(BeTrue(), "Close keeps the reason the claim was lost")
	})
})

var _ = Describe("Claim.Lost", func() {
	var (
		ns      string
		clk     *clocktesting.FakeClock
		patches atomic.Int32
		fail    atomic.Pointer[error]
		a       *answerer.Answerer
	)
	BeforeEach(func() {
		ns = newNamespace()
		clk = clocktesting.NewFakeClock(time.Now())
		patches.Store(0)
		fail.Store(nil)
		a = answerer.New(interceptor.NewClient(watcher, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				patches.Add(1)
				if err := fail.Load(); err != nil {
					return *err
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		}), ns, "alice-inbox", "bot")
		a.Clock = clk
		ask(where("q", ns, "bot").Obj())
	})

	// step advances the fake clock by one renewal period of a 6 s claim
	// and waits until the renewal was tried.
	step := func(n int32) {
		GinkgoHelper()
		Eventually(clk.HasWaiters).Should(BeTrue())
		clk.Step(2 * time.Second)
		Eventually(patches.Load).Should(Equal(n))
	}

	It("stays open through renewals that fail for less than the claim's duration, and closes when they fail for all of it", func() {
		claim, err := a.Claim(ctx, "q", 6*time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(claim.Close)
		unavailable := error(apierrors.NewServiceUnavailable("the API server is restarting"))
		fail.Store(&unavailable)

		step(1)
		step(2)
		Consistently(claim.Lost(), 200*time.Millisecond).ShouldNot(BeClosed(), "4 s without a renewal: the 6 s claim still holds")
		Expect(claim.Err()).To(Succeed())

		fail.Store(nil)
		step(3)
		step(4)
		fail.Store(&unavailable)
		step(5)
		step(6)
		Consistently(claim.Lost(), 200*time.Millisecond).ShouldNot(BeClosed(), "a success starts the count again")

		step(7)
		Eventually(claim.Lost()).Should(BeClosed(), "6 s without a renewal: the claim has expired")
		Expect(apierrors.IsServiceUnavailable(claim.Err())).To(BeTrue(), "%v", claim.Err())
		clk.Step(2 * time.Second)
		Consistently(patches.Load, 200*time.Millisecond).Should(Equal(int32(7)), "a lost claim is not renewed any more")
	})

	It("closes when its QuestionClaim is deleted under it", func() {
		claim, err := a.Claim(ctx, "q", 6*time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(claim.Close)
		Expect(admin.Delete(ctx, getClaim(ns, claim.Name))).To(Succeed())
		step(1)
		Eventually(claim.Lost()).Should(BeClosed())
		Expect(apierrors.IsNotFound(claim.Err())).To(BeTrue(), "%v", claim.Err())
		Expect(claim.Close()).To(Succeed(), "a claim that is gone is released")
	})

	It("is not closed by Close or by the end of the claim's context", func() {
		claim, err := a.Claim(ctx, "q", 6*time.Second)
		Expect(err).NotTo(HaveOccurred())
		step(1)
		Expect(claim.Close()).To(Succeed())
		Expect(claim.Lost()).NotTo(BeClosed())
		Expect(claim.Err()).To(Succeed())

		cctx, cancel := context.WithCancel(ctx)
		other, err := a.Claim(cctx, "q", 6*time.Second)
		Expect(err).NotTo(HaveOccurred())
		cancel()
		Expect(other.Close()).To(Succeed())
		Expect(other.Lost()).NotTo(BeClosed())
		Expect(other.Err()).To(Succeed())
		Expect(errors.Is(other.Err(), context.Canceled)).To(BeFalse())
	})
})
