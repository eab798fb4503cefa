package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// localcp runs kube-controller-manager, so that what a cluster's controllers
// do to hitl's objects happens under `make run` too.
var _ = Describe("the local control plane's kube-controller-manager", func() {
	It("garbage-collects a question's replies when the question is deleted", func() {
		ns, bot := newNamespace()
		file := writeFile(ns+"-deploy.yaml", deployQuestion)
		_, wait := bot.background("kubectl", "hitl", "-n", ns, "ask", "-f", file, "--name", "deploy")
		Eventually(jsonpath(ns, "uq/deploy", "{.status.state}")).Should(Equal("Open"))
		out := alice.hitl("-n", ns, "answer", "deploy", "--select", "env=staging", "--custom", "notes=ship it")
		Expect(out.code).To(BeZero(), out.stderr)
		Expect(wait().code).To(BeZero())

		uid := jsonpath(ns, "uq/deploy", "{.metadata.uid}")()
		Expect(uid).NotTo(BeEmpty())
		Expect(jsonpath(ns, "qr", "{.items[*].metadata.ownerReferences[*].uid}")()).To(Equal(uid),
			"the reply is owned by its question")

		deleted := admin.kubectl("-n", ns, "delete", "uq", "deploy")
		Expect(deleted.code).To(BeZero(), deleted.stderr)
		Eventually(jsonpath(ns, "qr", "{.items[*].metadata.name}"), "60s").Should(BeEmpty(),
			"the garbage collector deletes the replies of a deleted question")
	})

	It("empties and removes a deleted namespace", func() {
		ns, bot := newNamespace()
		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-q.yaml", `apiVersion: hitl.dev/v1alpha1
kind: UserQuestion
metadata:
  name: pending
spec:
  agent: bot
  questions:
    - id: q
      question: Proceed?
      options: [{label: "yes"}, {label: "no"}]
`)).code).To(BeZero())
		Expect(admin.kubectl("delete", "namespace", ns, "--wait=false").code).To(BeZero())
		Eventually(func() string {
			return admin.kubectl("get", "namespace", ns, "--ignore-not-found", "-o", "name").stdout
		}, "60s").Should(BeEmpty(), "the namespace controller deletes its questions, then the namespace")
	})

	It("aggregates ClusterRoles into admin, edit and view", func() {
		for _, role := range []string{"admin", "edit", "view"} {
			Expect(admin.kubectl("get", "clusterrole", role, "-o", "jsonpath={.rules[*].verbs}").stdout).To(ContainSubstring("get"),
				"the clusterrole-aggregation controller filled %s", role)
		}
	})
})
