package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hitl-dev/hitl/test/testenv"
)

const deployQuestion = `agent: bot
questions:
  - id: env
    question: Where should I deploy?
    options: [{label: staging}, {label: prod}]
  - id: notes
    question: Anything for the release notes?
`

const lunchQuestion = `apiVersion: hitl.dev/v1alpha1
kind: UserQuestion
metadata: {name: lunch}
spec:
  agent: bot
  timeout: 2s
  questions:
    - id: food
      question: What should I order?
      multiSelect: true
      options: [{label: pizza}, {label: sushi}]
`

func timedQuestion(name, timeout string) string {
	return `apiVersion: hitl.dev/v1alpha1
kind: UserQuestion
metadata: {name: ` + name + `}
spec:
  agent: bot
  timeout: ` + timeout + `
  questions:
    - id: q
      question: Still there?
      options: [{label: "yes"}, {label: "no"}]
`
}

func decode(s string) map[string]any {
	GinkgoHelper()
	var m map[string]any
	Expect(json.Unmarshal([]byte(s), &m)).To(Succeed(), s)
	return m
}

var _ = Describe("kubectl hitl and the manager", func() {
	// bot is the namespace's agent; alice, a person, answers it.
	var (
		ns  string
		bot actor
	)
	BeforeEach(func() { ns, bot = newNamespace() })

	It("answers a script agent's question inside its window", func() {
		file := writeFile(ns+"-deploy.yaml", deployQuestion)
		_, wait := bot.background("kubectl", "hitl", "-n", ns, "ask", "-f", file, "--name", "deploy")
		Eventually(jsonpath(ns, "uq/deploy", "{.status.state}")).Should(Equal("Open"))

		Expect(alice.hitl("-n", ns, "list").stdout).To(And(ContainSubstring("ACTIVE (1)"), ContainSubstring("deploy")))
		Expect(alice.hitl("-n", ns, "show", "deploy").stdout).To(ContainSubstring("Where should I deploy?"))

		out := alice.hitl("-n", ns, "answer", "deploy", "--select", "env=staging", "--custom", "notes=ship it")
		Expect(out.code).To(BeZero(), out.stderr)
		Expect(out.stdout).To(ContainSubstring("Applied"))

		asked := wait()
		Expect(asked.code).To(BeZero(), asked.stderr)
		Expect(asked.stdout).To(ContainSubstring(`"selected": [`))
		Expect(decode(asked.stdout)["answers"]).To(HaveLen(2))
		Expect(alice.hitl("-n", ns, "list").stdout).To(ContainSubstring("SETTLED (1)"))
		Expect(jsonpath(ns, "qr", "{.items[*].spec.answeredBy.username}")()).To(Equal("alice"))
	})

	It("turns a timeout into pending, queues a late reply, refuses a second, and lets the script agent admit it", func() {
		file := writeFile(ns+"-lunch.yaml", lunchQuestion)
		// Asked late in a second, a window measured from the whole-second
		// creationTimestamp would close almost a second early.
		for time.Now().Nanosecond() < int(800*time.Millisecond) {
			time.Sleep(5 * time.Millisecond)
		}
		start := time.Now()
		asked := bot.hitl("-n", ns, "ask", "-f", file)
		Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second), "the 2s window closed early")
		Expect(asked.code).To(Equal(3), "pending has its own exit status")
		Expect(decode(asked.stdout)).To(HaveKeyWithValue("pending", true))
		Expect(decode(asked.stdout)).To(HaveKeyWithValue("callID", "lunch"))

		late := alice.hitl("-n", ns, "answer", "lunch", "--select", "food=pizza,sushi", "--name", "lunch-alice")
		Expect(late.stdout).To(ContainSubstring("Queued"))
		second := alice.hitl("-n", ns, "answer", "lunch", "--select", "food=sushi")
		Expect(second.code).NotTo(BeZero())
		Expect(second.stderr).To(ContainSubstring("REPLY_QUEUED: question lunch already has queued reply lunch-alice"))

		admitted := bot.hitl("-n", ns, "admit", "lunch")
		Expect(admitted.code).To(BeZero(), admitted.stderr)
		Expect(decode(admitted.stdout)).To(HaveKeyWithValue("late", true))
		Expect(jsonpath(ns, "uq/lunch", "{.status.state} {.status.settlement.late}")()).To(Equal("Settled true"))
		// admit returns once the question is Settled; the controller writes
		// the reply's outcome after the question's status.
		Eventually(jsonpath(ns, "qr/lunch-alice", "{.status.outcome}")).Should(Equal("Admitted"))
	})

	It("measures a window applied with plain kubectl from its askedAt when it has one, else from its whole-second creationTimestamp", func() {
		// No admission time source exists inside the API server: a
		// manifest without spec.askedAt is timed from creationTimestamp.
		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-plain.yaml", timedQuestion("plain", "2s"))).code).To(BeZero())
		Eventually(jsonpath(ns, "uq/plain", "{.status.state}")).Should(Equal("Continued"))
		times := strings.Fields(jsonpath(ns, "uq/plain", "{.metadata.creationTimestamp} {.spec.askedAt} {.status.deadline} {.status.continuedAt}")())
		Expect(times).To(HaveLen(3), "no askedAt is stamped")
		parse := func(s string) time.Time {
			GinkgoHelper()
			t, err := time.Parse(time.RFC3339Nano, s)
			Expect(err).NotTo(HaveOccurred())
			return t
		}
		created, deadline, continuedAt := parse(times[0]), parse(times[1]), parse(times[2])
		Expect(deadline).To(Equal(created.Add(2 * time.Second)))
		Expect(continuedAt).NotTo(BeTemporally("<", deadline))

		// A manifest that records when it was sent is timed from then.
		sent := time.Now().UTC().Truncate(time.Microsecond)
		withAskedAt := strings.Replace(timedQuestion("stamped", "2s"), "  timeout: 2s\n",
			"  timeout: 2s\n  askedAt: "+sent.Format("2006-01-02T15:04:05.000000Z07:00")+"\n", 1)
		Expect(bot.kubectl("-n", ns, "create", "-f", writeFile(ns+"-stamped.yaml", withAskedAt)).code).To(BeZero())
		Eventually(jsonpath(ns, "uq/stamped", "{.status.state}")).Should(Equal("Continued"))
		times = strings.Fields(jsonpath(ns, "uq/stamped", "{.metadata.creationTimestamp} {.spec.askedAt} {.status.deadline} {.status.continuedAt}")())
		Expect(times).To(HaveLen(4))
		askedAt, deadline, continuedAt := parse(times[1]), parse(times[2]), parse(times[3])
		Expect(askedAt).To(Equal(sent))
		Expect(deadline).To(Equal(sent.Add(2 * time.Second)))
		Expect(continuedAt).NotTo(BeTemporally("<", sent.Add(2*time.Second)), "the window closed early")
	})

	It("withdraws a queued reply, and the question stays answerable", func() {
		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-w.yaml", timedQuestion("w", "1s"))).code).To(BeZero())
		Eventually(jsonpath(ns, "uq/w", "{.status.state}")).Should(Equal("Continued"))
		Expect(alice.hitl("-n", ns, "answer", "w", "--select", "q=yes", "--name", "oops").stdout).To(ContainSubstring("Queued"))
		Expect(alice.hitl("-n", ns, "withdraw", "oops").code).To(BeZero())
		Eventually(jsonpath(ns, "uq/w", "{.status.queuedReply.name}")).Should(BeEmpty())
		Expect(jsonpath(ns, "uq/w", "{.status.state}")()).To(Equal("Continued"))
		Expect(alice.hitl("-n", ns, "answer", "w", "--select", "q=no").stdout).To(ContainSubstring("Queued"))
	})

	It("holds the window while the inbox claims the question, and answers in window", func() {
		// An 8 s window: the inbox, a process of its own, must claim the
		// question inside it, which a loaded machine may take seconds to do.
		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-held.yaml", timedQuestion("held", "8s"))).code).To(BeZero())
		inbox := alice.command(GinkgoT().Context(), "", "kubectl", "hitl", "-n", ns, "inbox", "--agent", "bot", "--once", "--hold")
		stdin, err := inbox.StdinPipe()
		Expect(err).NotTo(HaveOccurred())
		inbox.Stdout, inbox.Stderr = GinkgoWriter, GinkgoWriter
		Expect(inbox.Start()).To(Succeed())
		Eventually(jsonpath(ns, "uq/held", "{.status.claims[0].holder}")).Should(Equal("alice"), "the API server stamps the claim's holder")
		deadline, err := time.Parse(time.RFC3339Nano, jsonpath(ns, "uq/held", "{.status.deadline}")())
		Expect(err).NotTo(HaveOccurred())
		Consistently(jsonpath(ns, "uq/held", "{.status.state}"), time.Until(deadline)+1500*time.Millisecond, 500*time.Millisecond).
			Should(Equal("Open"), "the claim holds the window past its deadline")
		// The inbox renews its claim (every third of its 30s) with the
		// rights hitl-answerer gives the person.
		claim := "qc/" + jsonpath(ns, "qc", "{.items[0].metadata.name}")()
		Expect(jsonpath(ns, claim, "{.spec.holder.username} {.spec.agent} {.spec.questionRef.name}")()).To(Equal("alice bot held"))
		renewed := jsonpath(ns, claim, "{.spec.renewTime}")()
		Expect(renewed).NotTo(BeEmpty())
		Eventually(jsonpath(ns, claim, "{.spec.renewTime}"), "15s", "500ms").ShouldNot(Equal(renewed), "the claim is renewed")
		Expect(jsonpath(ns, "uq/held", "{.status.state} {.status.claims[0].holder}")()).To(Equal("Open alice"))
		_, err = stdin.Write([]byte("1\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(inbox.Wait()).To(Succeed())
		Expect(jsonpath(ns, "uq/held", "{.status.state} {.status.settlement.late}")()).To(Equal("Settled "))
		Eventually(jsonpath(ns, "qc", "{.items}")).Should(Equal("[]"), "the inbox releases its claim")
	})

	It("gives the window back when the inbox's countdown ends, and the late answer is queued", func() {
		Expect(bot.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-slow.yaml", timedQuestion("slow", "2s"))).code).To(BeZero())
		inbox := alice.command(GinkgoT().Context(), "", "kubectl", "hitl", "-n", ns, "inbox", "--agent", "bot", "--once")
		stdin, err := inbox.StdinPipe()
		Expect(err).NotTo(HaveOccurred())
		var out strings.Builder
		inbox.Stdout, inbox.Stderr = &out, &out
		Expect(inbox.Start()).To(Succeed())
		Eventually(jsonpath(ns, "uq/slow", "{.status.claims[0].holder}")).Should(Equal("alice"))
		Eventually(jsonpath(ns, "uq/slow", "{.status.state}"), "5s").Should(Equal("Continued"))
		_, err = stdin.Write([]byte("2\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(inbox.Wait()).To(Succeed())
		Expect(out.String()).To(And(ContainSubstring("left"), ContainSubstring("Queued")))
		Expect(jsonpath(ns, "uq/slow", "{.status.queuedReply.answers[0].selected[0]}")()).To(Equal("no"))
	})

	It("cancels the question when the Go agent's ask is aborted", func() {
		agent, wait := bot.background(filepath.Join(workDir, "agent"), "--namespace", ns, "--agent", "bot", "--name", "stop-me")
		Eventually(jsonpath(ns, "uq/stop-me", "{.status.state}")).Should(Equal("Open"))
		Expect(agent.Process.Signal(syscall.SIGTERM)).To(Succeed())
		out := wait()
		Expect(out.code).To(Equal(2))
		Expect(decode(out.stdout)).To(HaveKeyWithValue("code", "ASK_ABORTED"))
		Eventually(jsonpath(ns, "uq/stop-me", "{.status.state}")).Should(Equal("Cancelled"))
		refused := alice.hitl("-n", ns, "answer", "stop-me", "--select", "q=yes")
		Expect(refused.stderr).To(ContainSubstring("NOT_ANSWERABLE: question stop-me is Cancelled"))
	})

	It("lets the Go agent go on after pending and admit the late reply", func() {
		_, wait := bot.background(filepath.Join(workDir, "agent"), "--namespace", ns, "--agent", "bot", "--name", "later",
			"--timeout", "1s", "--admit-late")
		Eventually(jsonpath(ns, "uq/later", "{.status.state}")).Should(Equal("Continued"))
		Expect(alice.hitl("-n", ns, "answer", "later", "--select", "q=yes").stdout).To(ContainSubstring("Queued"))
		out := wait()
		Expect(out.code).To(BeZero(), out.stderr)
		lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
		Expect(lines).To(HaveLen(2))
		Expect(decode(lines[0])).To(HaveKeyWithValue("Pending", true))
		Expect(decode(lines[1])["Answers"]).To(HaveLen(1))
		Expect(jsonpath(ns, "uq/later", "{.status.settlement.late}")()).To(Equal("true"))
	})

	It("approves an Approval question with `approve`", func() {
		sample := filepath.Join(testenv.Root(), "config", "samples", "hitl_v1alpha1_userquestion_approval.yaml")
		Expect(bot.kubectl("-n", ns, "apply", "-f", sample).code).To(BeZero(), "hitl-agent lets bot ask as release-bot")
		out := alice.hitl("-n", ns, "approve", "read-secrets")
		Expect(out.code).To(BeZero(), out.stderr)
		Expect(out.stdout).To(ContainSubstring("Applied"))
		Expect(jsonpath(ns, "uq/read-secrets", "{.status.answers[0].selected[0]}")()).To(Equal("Allow once"))
	})

	It("produces a reply manifest for a GitOps repository that plain kubectl apply settles", func() {
		sample := filepath.Join(testenv.Root(), "config", "samples", "hitl_v1alpha1_userquestion.yaml")
		Expect(bot.kubectl("-n", ns, "apply", "-f", sample).code).To(BeZero())
		manifest := alice.hitl("-n", ns, "answer", "deploy-target", "--select", "env=production", "--skip", "notes",
			"--name", "deploy-target-gitops", "--dry-run=client", "-o", "yaml")
		Expect(manifest.code).To(BeZero(), manifest.stderr)
		Expect(manifest.stdout).To(ContainSubstring("kind: QuestionReply"))
		Expect(jsonpath(ns, "qr", "{.items}")()).To(Equal("[]"), "a dry run creates nothing")

		file := filepath.Join(workDir, ns+"-reply.yaml")
		Expect(os.WriteFile(file, []byte(manifest.stdout), 0o644)).To(Succeed())
		Expect(alice.kubectl("-n", ns, "apply", "-f", file).code).To(BeZero())
		Eventually(jsonpath(ns, "uq/deploy-target", "{.status.state}")).Should(Equal("Settled"))
		Expect(jsonpath(ns, "qr/deploy-target-gitops", "{.status.outcome} {.spec.answeredBy.username}")()).To(Equal("Applied alice"))
	})

	It("shows the code of a rejected bad answer", func() {
		sample := filepath.Join(testenv.Root(), "config", "samples", "hitl_v1alpha1_userquestion.yaml")
		Expect(bot.kubectl("-n", ns, "apply", "-f", sample).code).To(BeZero())
		bad := alice.hitl("-n", ns, "answer", "deploy-target", "--select", "env=moon")
		Expect(bad.code).NotTo(BeZero())
		Expect(bad.stderr).To(ContainSubstring(`BAD_ANSWER: question env: "moon" is not an option of the question`))

		reply := writeFile(ns+"-bad.yaml", `apiVersion: hitl.dev/v1alpha1
kind: QuestionReply
metadata: {name: two-envs}
spec:
  questionRef: {name: deploy-target}
  answers: [{id: env, selected: [staging, production]}, {id: notes}]
`)
		// Admission cannot read the question; the controller rejects the
		// batch with its code, and the question stays Open.
		applied := alice.kubectl("-n", ns, "apply", "-f", reply)
		Expect(applied.code).To(BeZero(), applied.stderr)
		Eventually(jsonpath(ns, "qr/two-envs", "{.status.outcome} {.status.reason}")).Should(Equal("Rejected BAD_ANSWER"))
		Expect(jsonpath(ns, "qr/two-envs", "{.status.message}")()).To(HavePrefix("BAD_ANSWER: question env: the question is single-select"))
		Expect(jsonpath(ns, "uq/deploy-target", "{.status.state}")()).To(Equal("Open"))
	})
})
