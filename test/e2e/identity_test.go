package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/hitl-dev/hitl/test/testenv"
)

// These specs prove that the suite runs every actor with the RBAC the
// project ships: take one verb away and a scenario fails.
var _ = Describe("identities", func() {
	var (
		ns  string
		bot actor
	)
	BeforeEach(func() { ns, bot = newNamespace() })

	It("runs the manager as its own ServiceAccount, which may do only what config/rbac grants", func() {
		Expect(manager.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout).To(Equal(install.ManagerUsername()))
		Expect(manager.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}").stdout).
			To(And(ContainSubstring("system:serviceaccounts"), Not(ContainSubstring("system:masters"))))
		Expect(manager.kubectl("auth", "can-i", "update", "userquestions.hitl.dev", "--subresource=status", "-A").stdout).To(Equal("yes\n"))
		Expect(manager.kubectl("auth", "can-i", "create", "userquestions.hitl.dev", "-A").stdout).To(Equal("no\n"))
		Expect(manager.kubectl("auth", "can-i", "create", "namespaces").stdout).To(Equal("no\n"))
	})

	It("refuses an answer when the person's role lacks one verb of hitl-answerer", func() {
		var role rbacv1.ClusterRole
		data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "rbac", "examples", "hitl_answerer.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(data, &role)).To(Succeed())
		role.Name = "hitl-answerer-without-create-" + ns
		removed := 0
		for i, r := range role.Rules {
			if slices.Contains(r.Resources, "questionreplies") && slices.Contains(r.Verbs, "create") {
				role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
				removed++
			}
		}
		Expect(removed).To(Equal(1), "hitl-answerer grants create on questionreplies once")
		Expect(adminClient.Create(context.Background(), &role)).To(Succeed())
		DeferCleanup(func() { Expect(adminClient.Delete(context.Background(), &role)).To(Succeed()) })
		grantAnswering(ns, bob, role.Name)

		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-q.yaml", timedQuestion("q", "600s"))).code).To(BeZero())
		refused := bob.hitl("-n", ns, "answer", "q", "--select", "q=yes")
		Expect(refused.code).NotTo(BeZero())
		Expect(refused.stderr).To(And(ContainSubstring("forbidden"), ContainSubstring(`User "bob" cannot create resource "questionreplies"`)))
		Expect(jsonpath(ns, "qr", "{.items}")()).To(Equal("[]"))

		// The shipped role has the verb: the same answer goes through.
		bind(ns, "ClusterRole", "hitl-answerer", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: bob.name})
		waitAllowed(bob.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "questionreplies", Verb: "create"})
		answered := bob.hitl("-n", ns, "answer", "q", "--select", "q=yes")
		Expect(answered.code).To(BeZero(), answered.stderr)
		Expect(jsonpath(ns, "uq/q", "{.status.state} {.status.answers[0].selected[0]}")()).To(Equal("Settled yes"))
	})

	It("shows FORBIDDEN to a person who may reply but not answer this agent, and nothing settles", func() {
		// hitl-answerer grants answer on release-bot and office-bot only.
		bind(ns, "ClusterRole", "hitl-answerer", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: bob.name})
		waitAllowed(bob.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "questionreplies", Verb: "create"})
		Expect(allowed(bob.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "agents", Name: agentName, Verb: "answer"})()).To(BeFalse())

		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-q.yaml", timedQuestion("q", "600s"))).code).To(BeZero())
		refused := bob.hitl("-n", ns, "answer", "q", "--select", "q=yes")
		Expect(refused.code).NotTo(BeZero())
		Expect(refused.stderr).To(And(ContainSubstring("FORBIDDEN"), ContainSubstring("may not answer the questions of agent "+agentName)))
		Expect(jsonpath(ns, "qr", "{.items}")()).To(Equal("[]"))
		// The manager may not have written the question's first status yet
		// (Open to the specification, but an empty state); once Open, a
		// settled question would never be Open again.
		Eventually(jsonpath(ns, "uq/q", "{.status.state}")).Should(Equal("Open"))
		Consistently(jsonpath(ns, "uq/q", "{.status.state}"), "1s").Should(Equal("Open"))
	})

	It("holds a reply back, unapplied, while the manager's ClusterRole lacks the verb it checks answerers with", Serial, func() {
		ctx := context.Background()
		// Every shipped ClusterRole that grants the manager the verb: its
		// own role (the answerer checks) and the metrics role (scrapers).
		grantsSAR := func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "subjectaccessreviews") }
		shipped := map[string][]rbacv1.PolicyRule{}
		for _, name := range []string{"manager-role", "metrics-auth-role"} {
			var role rbacv1.ClusterRole
			Expect(adminClient.Get(ctx, types.NamespacedName{Name: install.NamePrefix + name}, &role)).To(Succeed())
			shipped[role.Name] = slices.Clone(role.Rules)
			role.Rules = slices.DeleteFunc(slices.Clone(role.Rules), grantsSAR)
			Expect(role.Rules).To(HaveLen(len(shipped[role.Name])-1), "%s grants create on subjectaccessreviews in one rule", role.Name)
			Expect(adminClient.Update(ctx, &role)).To(Succeed())
		}
		review := authorizationv1.ResourceAttributes{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"}
		restore := func() {
			for name, rules := range shipped {
				var role rbacv1.ClusterRole
				Expect(adminClient.Get(ctx, types.NamespacedName{Name: name}, &role)).To(Succeed())
				role.Rules = rules
				Expect(adminClient.Update(ctx, &role)).To(Succeed())
			}
			waitAllowed(install.ManagerUsername(), review)
		}
		DeferCleanup(restore)
		Eventually(allowed(install.ManagerUsername(), review)).Should(BeFalse())

		// Admission needs nothing from the manager: the ask and the reply
		// are admitted. The controller cannot check the reply's author, so
		// it neither applies nor rejects it.
		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-q.yaml", timedQuestion("q", "600s"))).code).To(BeZero())
		Eventually(jsonpath(ns, "uq/q", "{.status.state}")).Should(Equal("Open"))
		reply := alice.kubectl("-n", ns, "create", "-f", writeFile(ns+"-r.yaml", replyManifest("r", "q", "yes")))
		Expect(reply.code).To(BeZero(), reply.stderr)
		Consistently(jsonpath(ns, "qr/r", "{.status.outcome}"), "2s").Should(BeEmpty())
		Expect(jsonpath(ns, "uq/q", "{.status.state}")()).To(Equal("Open"))

		restore()
		Eventually(jsonpath(ns, "qr/r", "{.status.outcome}"), "30s").Should(Equal("Applied"))
		Expect(jsonpath(ns, "uq/q", "{.status.state} {.status.settlement.answeredBy.username}")()).To(Equal("Settled alice"))
	})
})
