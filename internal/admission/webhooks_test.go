package admission_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/controllers/provenance"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// as returns a client that acts as the given user.
func as(user string, groups ...string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	cl, err := client.New(c, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

func asServiceAccount(ns, name string) client.Client {
	return as("system:serviceaccount:"+ns+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+ns)
}

// deniedByWebhook asserts a denial by the validating reply webhook (not by
// a policy) whose reason starts with the code.
func deniedByWebhook(err error, code hitlv1.ErrorCode, fragment string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "expected a %s denial", code)
	Expect(err.Error()).To(ContainSubstring(`admission webhook "vquestionreply.hitl.dev" denied the request: ` + string(code) + ": "))
	Expect(err.Error()).To(ContainSubstring(fragment))
	// The structure says the same: the code and the field in the cause.
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue(), "not an API status: %v", err)
	Expect(status.Status().Details).NotTo(BeNil(), "the denial carries no details: %v", err)
	causes := status.Status().Details.Causes
	Expect(causes).To(HaveLen(1), "the denial's causes: %v", causes)
	Expect(causes[0].Message).To(ContainSubstring(string(code) + ": "))
	Expect(causes[0].Field).To(MatchRegexp(`^(spec|metadata)\.[a-zA-Z]`), "the cause names no field of the reply")
	Expect(validation.CodeOf(err)).To(Equal(code))
}

// deniedByPolicy asserts a denial by the named validating admission policy
// (its name as config/default prefixes it) whose reason starts with the
// code.
func deniedByPolicy(err error, policy string, code hitlv1.ErrorCode, fragment string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "expected a %s denial", code)
	Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'hitl-" + policy + "'"))
	Expect(err.Error()).To(ContainSubstring("denied request: " + string(code) + ": "))
	Expect(err.Error()).To(ContainSubstring(fragment))
}

// grant binds a Role with the rules to a subject in ns, and waits until the
// API server's authorizer applies it.
func grant(ns, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	GinkgoHelper()
	Expect(admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules})).To(Succeed())
	Expect(admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
	// The authorizer (the policies' and the webhooks' checks) learns of
	// the Role and the binding from watches.
	Expect(testenv.AwaitGrant(ctx, admin, ns, subject, rules, testenv.GrantWait)).To(Succeed())
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

var (
	createQuestions = rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"}, Resources: []string{"userquestions"}, Verbs: []string{"create", "get"}}
	createReplies   = rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"}, Resources: []string{"questionreplies"}, Verbs: []string{"create", "get"}}
)

func agentVerb(verb string, agents ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"}, Resources: []string{"agents"}, Verbs: []string{verb}, ResourceNames: agents}
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wh-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func state(ns, name string) func() hitlv1.QuestionState {
	return func() hitlv1.QuestionState {
		q := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, q)).To(Succeed())
		return q.Status.State
	}
}

// staysOpen checks that a question is Open and stays so for a second: the
// controller may not have written its first status yet (its state is then
// still empty), and a question that settled would never be Open again.
func staysOpen(ns, name string) {
	GinkgoHelper()
	Eventually(state(ns, name)).Should(Equal(hitlv1.StateOpen))
	Consistently(state(ns, name), time.Second).Should(Equal(hitlv1.StateOpen))
}

// refusedOnceSeen creates r as c once the webhook refuses it in a dry run,
// and returns the error of that creation. The webhook reads the question
// from the manager's cache, which may not yet hold a status the test read
// from the API server.
func refusedOnceSeen(c client.Client, r *hitlv1.QuestionReply) error {
	GinkgoHelper()
	Eventually(func() error { return c.Create(ctx, r.DeepCopy(), client.DryRunAll) }).Should(HaveOccurred(),
		"the webhook never refused reply %s", r.Name)
	return c.Create(ctx, r)
}

func outcome(ns, name string) func() hitlv1.ReplyOutcome {
	return func() hitlv1.ReplyOutcome {
		r := &hitlv1.QuestionReply{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, r)).To(Succeed())
		return r.Status.Outcome
	}
}

var _ = Describe("The cluster of this suite", func() {
	It("is one without MutatingAdmissionPolicy, as before Kubernetes 1.36: the webhooks stamp", func() {
		resources, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, r := range resources.APIResources {
			names = append(names, r.Name)
		}
		Expect(names).To(ContainElement("validatingadmissionpolicies"))
		Expect(names).NotTo(ContainElement("mutatingadmissionpolicies"))
	})
})

var _ = Describe("Asking", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		grant(ns, "service-accounts-ask", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + ns}, createQuestions)
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}})).To(Succeed())
		// The annotation that once named the agent a ServiceAccount asks
		// as: it grants nothing any more.
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns,
			Annotations: map[string]string{hitlv1.AgentLabel: "release-bot"}}})).To(Succeed())
	})

	It("lets a ServiceAccount ask as itself, and defaults the agent label", func() {
		q := Question("mine", ns).Agent("bot").Ask("q", "Q?").Obj()
		Expect(asServiceAccount(ns, "bot").Create(ctx, q)).To(Succeed())
		Expect(q.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "bot"))
	})

	It("refuses a ServiceAccount asking as another agent with AGENT_MISMATCH", func() {
		err := asServiceAccount(ns, "bot").Create(ctx, Question("theirs", ns).Agent("release-bot").Ask("q", "Q?").Obj())
		deniedByPolicy(err, "question-identity", hitlv1.CodeAgentMismatch, "may not ask as agent release-bot (spec.agent)")
	})

	It("lets an annotated ServiceAccount ask as its own name only: the annotation grants nothing", func() {
		err := asServiceAccount(ns, "runner").Create(ctx, Question("annotated", ns).Agent("release-bot").Ask("q", "Q?").Obj())
		deniedByPolicy(err, "question-identity", hitlv1.CodeAgentMismatch,
			"user system:serviceaccount:"+ns+":runner may not ask as agent release-bot (spec.agent)")
		Expect(asServiceAccount(ns, "runner").Create(ctx, Question("own-name", ns).Agent("runner").Ask("q", "Q?").Obj())).To(Succeed())
	})

	It("refuses a ServiceAccount of another namespace asking as its own name with AGENT_MISMATCH", func() {
		// agent-a of namespace other may create questions in ns, but it is
		// not ns's agent-a: without the ask grant it may not ask as it.
		other := newNamespace()
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent-a", Namespace: other}})).To(Succeed())
		grant(ns, "foreign-creates", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "agent-a", Namespace: other}, createQuestions)
		err := asServiceAccount(other, "agent-a").Create(ctx, Question("spoofed", ns).Agent("agent-a").Ask("q", "Q?").Obj())
		deniedByPolicy(err, "question-identity", hitlv1.CodeAgentMismatch, "may not ask as agent agent-a (spec.agent) in namespace "+ns)

		grant(ns, "foreign-asks", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "agent-a", Namespace: other}, agentVerb("ask", "agent-a"))
		Expect(asServiceAccount(other, "agent-a").Create(ctx, Question("granted", ns).Agent("agent-a").Ask("q", "Q?").Obj())).To(Succeed())
	})

	It("stamps spec.askedAt on creation when the client did not, and keeps the client's", func() {
		before := time.Now()
		q := Question("stamped", ns).Agent("bot").Ask("q", "Q?").Timeout(time.Minute).Obj()
		Expect(asServiceAccount(ns, "bot").Create(ctx, q)).To(Succeed())
		Expect(q.Spec.AskedAt).NotTo(BeNil())
		Expect(q.Spec.AskedAt.Time).To(BeTemporally(">=", before.Truncate(time.Microsecond)))
		Expect(q.Spec.AskedAt.Time).To(BeTemporally("<=", time.Now()))

		mine := metav1.NewMicroTime(time.Now().Add(-time.Minute).Truncate(time.Microsecond))
		q = Question("client-stamped", ns).Agent("bot").Ask("q", "Q?").Obj()
		q.Spec.AskedAt = &mine
		Expect(asServiceAccount(ns, "bot").Create(ctx, q)).To(Succeed())
		Expect(q.Spec.AskedAt.Time.Equal(mine.Time)).To(BeTrue(), "got %s", q.Spec.AskedAt)
	})

	It("lets a user ask as an agent only with the ask grant", func() {
		grant(ns, "carol-creates", user("carol"), createQuestions)
		grant(ns, "dave-asks", user("dave"), createQuestions, agentVerb("ask", "release-bot"))
		deniedByPolicy(as("carol").Create(ctx, Question("c", ns).Agent("release-bot").Ask("q", "Q?").Obj()),
			"question-identity", hitlv1.CodeAgentMismatch, "user carol may not ask as agent release-bot (spec.agent)")
		Expect(as("dave").Create(ctx, Question("d", ns).Agent("release-bot").Ask("q", "Q?").Obj())).To(Succeed())
		deniedByPolicy(as("dave").Create(ctx, Question("d2", ns).Agent("other-bot").Ask("q", "Q?").Obj()),
			"question-identity", hitlv1.CodeAgentMismatch, "user dave may not ask as agent other-bot (spec.agent)")
	})

	It("refuses a conflicting agent label and a timeout above the maximum", func() {
		bot := asServiceAccount(ns, "bot")
		deniedByPolicy(bot.Create(ctx, Question("label", ns).Agent("bot").Label(hitlv1.AgentLabel, "someone-else").Ask("q", "Q?").Obj()),
			"question-identity", hitlv1.CodeAgentMismatch, "label hitl.dev/agent=someone-else (metadata.labels) conflicts with spec.agent bot")
		deniedByPolicy(bot.Create(ctx, Question("long", ns).Agent("bot").Ask("q", "Q?").Timeout(maxTimeout+time.Millisecond).Obj()),
			"question-timeout", hitlv1.CodeBadTimeout, "(spec.timeout) is above the maximum of 1h0m0s")
		Expect(bot.Create(ctx, Question("max", ns).Agent("bot").Ask("q", "Q?").Timeout(maxTimeout).Obj())).To(Succeed())
	})

	It("keeps the agent label on update, and refuses relabelling a question to another agent", func() {
		grant(ns, "bot-updates", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: ns},
			rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"}, Resources: []string{"userquestions"}, Verbs: []string{"update", "patch"}})
		bot := asServiceAccount(ns, "bot")
		q := Question("relabel", ns).Agent("bot").Ask("q", "Q?").Obj()
		Expect(bot.Create(ctx, q)).To(Succeed())

		// Dropping the label: the defaulting webhook puts it back. (Merge
		// patches, which the controller's status writes cannot conflict
		// with.)
		dropped := q.DeepCopy()
		delete(dropped.Labels, hitlv1.AgentLabel)
		Expect(bot.Patch(ctx, dropped, client.MergeFrom(q))).To(Succeed())
		Expect(dropped.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "bot"))

		relabelled := dropped.DeepCopy()
		relabelled.Labels[hitlv1.AgentLabel] = "release-bot"
		deniedByPolicy(bot.Patch(ctx, relabelled, client.MergeFrom(dropped)), "question-identity", hitlv1.CodeAgentMismatch,
			"label hitl.dev/agent=release-bot (metadata.labels) conflicts with spec.agent bot")
		stored := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(q), stored)).To(Succeed())
		Expect(stored.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "bot"))
	})
})

var _ = Describe("Answering", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		grant(ns, "alice-answers", user("alice"), createReplies, agentVerb("answer", "bot"))
		grant(ns, "mallory-creates", user("mallory"), createReplies)
		Expect(admin.Create(ctx, Question("open", ns).Agent("bot").Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
	})

	It("stamps the real user over a forged answeredBy, and labels and owns the reply", func() {
		r := Reply("forged", ns, "open").Select("env", "staging").AnsweredBy("the-ceo").Obj()
		Expect(as("alice", "answerers").Create(ctx, r)).To(Succeed())
		Expect(r.Spec.AnsweredBy.Username).To(Equal("alice"))
		Expect(r.Spec.AnsweredBy.Groups).To(ContainElements("answerers", "system:authenticated"))
		Expect(r.Labels).To(Equal(map[string]string{hitlv1.AgentLabel: "bot", hitlv1.QuestionLabel: "open"}))
		Expect(r.OwnerReferences).To(HaveLen(1))
		Expect(r.OwnerReferences[0].Name).To(Equal("open"))
		Eventually(state(ns, "open")).Should(Equal(hitlv1.StateSettled))
		q := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "open"}, q)).To(Succeed())
		Expect(q.Status.Settlement.AnsweredBy.Username).To(Equal("alice"))
	})

	It("refuses a user without the answer grant with FORBIDDEN", func() {
		// The defaulting webhook labels the reply with its question's agent,
		// so the reply-identity policy refuses it before the webhook would.
		deniedByPolicy(as("mallory").Create(ctx, Reply("m", ns, "open").Select("env", "prod").Obj()),
			"reply-identity", hitlv1.CodeForbidden, "user mallory may not answer the questions of agent bot (metadata.labels[hitl.dev/agent])")
		staysOpen(ns, "open")
	})

	It("keeps a reply's agent label, and refuses one naming another agent with AGENT_MISMATCH", func() {
		// Alice may answer release-bot too, so the reply-identity policy
		// lets a reply labelled with it through; the feedback webhook
		// compares the label with the question's agent.
		grant(ns, "alice-answers-release-bot", user("alice"), agentVerb("answer", "release-bot"))
		r := Reply("mislabelled", ns, "open").Select("env", "staging").Obj()
		r.Labels = map[string]string{hitlv1.AgentLabel: "release-bot"}
		deniedByWebhook(as("alice").Create(ctx, r), hitlv1.CodeAgentMismatch,
			`label hitl.dev/agent="release-bot" names another agent than question open's "bot" (metadata.labels)`)

		// Without the grant on the labelled agent, the policy refuses it
		// first.
		r = Reply("mislabelled", ns, "open").Select("env", "staging").Obj()
		r.Labels = map[string]string{hitlv1.AgentLabel: "office-bot"}
		deniedByPolicy(as("alice").Create(ctx, r), "reply-identity", hitlv1.CodeForbidden,
			"user alice may not answer the questions of agent office-bot (metadata.labels[hitl.dev/agent])")

		r = Reply("labelled", ns, "open").Select("env", "staging").Obj()
		r.Labels = map[string]string{hitlv1.AgentLabel: "bot"}
		Expect(as("alice").Create(ctx, r)).To(Succeed())
		Expect(r.Labels).To(Equal(map[string]string{hitlv1.AgentLabel: "bot", hitlv1.QuestionLabel: "open"}))
		Eventually(outcome(ns, "labelled")).Should(Equal(hitlv1.OutcomeApplied))
		Expect(state(ns, "open")()).To(Equal(hitlv1.StateSettled))
	})

	It("refuses a bad batch with BAD_ANSWER naming the question id", func() {
		deniedByWebhook(as("alice").Create(ctx, Reply("bad", ns, "open").Select("env", "moon").Obj()),
			hitlv1.CodeBadAnswer, `question env: "moon" is not an option of the question`)
		staysOpen(ns, "open")
	})

	It("refuses replies to a settled or missing question with NOT_ANSWERABLE", func() {
		Expect(as("alice").Create(ctx, Reply("first", ns, "open").Select("env", "staging").Obj())).To(Succeed())
		Eventually(state(ns, "open")).Should(Equal(hitlv1.StateSettled))
		deniedByWebhook(refusedOnceSeen(as("alice"), Reply("again", ns, "open").Select("env", "prod").Obj()),
			hitlv1.CodeNotAnswerable, "question open is Settled")
		deniedByWebhook(as("alice").Create(ctx, Reply("nowhere", ns, "missing").Select("env", "prod").Obj()),
			hitlv1.CodeNotAnswerable, "question missing does not exist in namespace "+ns+" (spec.questionRef.name)")
	})

	It("lets a reply a GitOps engine applies reach a settled or missing question, which the controller closes", func() {
		Expect(as("alice").Create(ctx, Reply("first", ns, "open").Select("env", "staging").Obj())).To(Succeed())
		Eventually(state(ns, "open")).Should(Equal(hitlv1.StateSettled))
		for _, r := range []*hitlv1.QuestionReply{
			Reply("from-git", ns, "open").Select("env", "prod").Obj(),
			Reply("from-git-gone", ns, "missing").Select("env", "prod").Obj(),
		} {
			r.Labels = map[string]string{provenance.FluxNameLabel: "answers", provenance.FluxNamespaceLabel: ns}
			Eventually(func() error { return as("alice").Create(ctx, r) }).Should(Succeed())
			Eventually(outcome(ns, r.Name)).Should(Equal(hitlv1.OutcomeClosed))
		}
		q := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "open"}, q)).To(Succeed())
		Expect(q.Status.Settlement.Reply).To(Equal("first"))
	})

	It("refuses a second reply while one is queued with REPLY_QUEUED", func() {
		Expect(admin.Create(ctx, Question("timed", ns).Agent("bot").Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "timed")).Should(Equal(hitlv1.StateContinued))
		Expect(as("alice").Create(ctx, Reply("late", ns, "timed").Custom("q", "sorry I'm late").Obj())).To(Succeed())
		Eventually(outcome(ns, "late")).Should(Equal(hitlv1.OutcomeQueued))
		deniedByWebhook(refusedOnceSeen(as("alice"), Reply("later", ns, "timed").Custom("q", "me too").Obj()),
			hitlv1.CodeReplyQueued, "question timed already has queued reply late")
	})
})
