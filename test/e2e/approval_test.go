package e2e

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/hitl-dev/hitl/test/testenv"
)

// twoPeople is the platform's rule for release-bot's approvals: two
// distinct people, never the agent that asked, one of them alice.
const twoPeople = `apiVersion: hitl.dev/v1alpha1
kind: ApprovalPolicy
metadata:
  name: two-people
spec:
  selector:
    agents: [release-bot]
    intents: [Approval]
  rule:
    approvals: 2
    from:
      - name: leads
        users: [alice]
        minimum: 1
`

var _ = Describe("an ApprovalPolicy", func() {
	var (
		ns  string
		bot actor
	)
	BeforeEach(func() {
		ns, bot = newNamespace()
		grantAnswering(ns, bob, "hitl-answerer")
		bind(ns, "ClusterRole", "hitl-policy-admin", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: platform.name})
		waitAllowed(platform.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "approvalpolicies", Verb: "create"})
	})

	It("written by the platform makes release-bot's approval need two people, one of them a lead, each voting once", func() {
		Expect(bot.kubectl("-n", ns, "auth", "can-i", "create", "approvalpolicies.hitl.dev").stdout).To(Equal("no\n"), "agents have no rights on policies")
		Expect(bob.kubectl("-n", ns, "auth", "can-i", "update", "approvalpolicies.hitl.dev").stdout).To(Equal("no\n"), "answerers have none either")
		applied := platform.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-policy.yaml", twoPeople))
		Expect(applied.code).To(BeZero(), applied.stderr)
		Eventually(func() string { return platform.kubectl("-n", ns, "get", "ap").stdout }).Should(ContainSubstring("two-people"))

		sample := filepath.Join(testenv.Root(), "config", "samples", "hitl_v1alpha1_userquestion_approval.yaml")
		Expect(bot.kubectl("-n", ns, "apply", "-f", sample).code).To(BeZero())
		Eventually(jsonpath(ns, "uq/read-secrets", "{.status.tally}")).Should(Equal("0/2"))

		first := bob.hitl("-n", ns, "approve", "read-secrets")
		Expect(first.code).To(BeZero(), first.stderr)
		Eventually(jsonpath(ns, "qr", "{.items[0].status.outcome}")).Should(Equal("Counted"))
		Expect(jsonpath(ns, "uq/read-secrets", "{.status.state} {.status.tally} {.status.votes[0].by.username}")()).To(Equal("Open 1/2 bob"))
		Expect(admin.kubectl("-n", ns, "get", "uq", "read-secrets").stdout).To(MatchRegexp(`VOTES[\s\S]*1/2`))

		again := bob.hitl("-n", ns, "approve", "read-secrets")
		Expect(again.code).NotTo(BeZero())
		Expect(again.stdout + again.stderr).To(ContainSubstring("DUPLICATE_VOTE"))

		second := alice.hitl("-n", ns, "approve", "read-secrets")
		Expect(second.code).To(BeZero(), second.stderr)
		Eventually(jsonpath(ns, "uq/read-secrets", "{.status.state}")).Should(Equal("Settled"))
		Expect(jsonpath(ns, "uq/read-secrets", "{.status.settlement.answeredBy.username} {.status.settlement.votes[*].by.username} {.status.answers[0].selected[0]}")()).
			To(Equal("alice bob alice Allow once"))
		Expect(jsonpath(ns, "uq/read-secrets", "{.status.approval.policies[0].name} {.status.approval.from[0].name}")()).To(Equal("two-people two-people/leads"))
	})
})
